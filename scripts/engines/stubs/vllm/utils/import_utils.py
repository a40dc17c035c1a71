"""Stand-in for `vllm/utils/import_utils.py` (platform probes): `import_plugin` loads a module by
file path (only used for `--tool-parser-plugin`, which the driver does not pass)."""

import importlib.util


def import_plugin(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class LazyLoader:
    def __init__(self, *a, **k):
        raise NotImplementedError("stand-in: LazyLoader is not needed by the parser path")
