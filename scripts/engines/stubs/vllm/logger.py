"""Stand-in for `vllm/logger.py` (configures vLLM's logging from envs): `init_logger` returns a
standard `logging.Logger` with the `*_once` helpers vLLM adds (`info_once`, `warning_once`,
`debug_once`), which here log every time."""

import logging


class _Logger(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        kwargs.pop("scope", None)
        return msg, kwargs

    def info_once(self, msg, *args, **kwargs):
        self.info(msg, *args, **kwargs)

    def warning_once(self, msg, *args, **kwargs):
        self.warning(msg, *args, **kwargs)

    def debug_once(self, msg, *args, **kwargs):
        self.debug(msg, *args, **kwargs)


def init_logger(name: str):
    return _Logger(logging.getLogger(name), {})
