"""Stand-in for `vllm/config/utils.py` (imports torch): `replace` as `dataclasses.replace`
(the protocol module uses it only for sampling parameters)."""

from dataclasses import replace  # noqa: F401
