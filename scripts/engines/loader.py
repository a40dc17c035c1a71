"""Import the engines' released parser code from the unpacked wheels, with stand-ins.

The wheels (`pip download --no-deps vllm==0.33.0 sglang==0.5.23`) are unpacked by
scripts/setup.sh into `$TOOLSCOPE_CACHE/engines/src/<pkg>-<version>/`, parser folders only
(plus the few modules those import that are themselves plain Python with light imports, such as
SGLang's protocol models and `environ.py`, listed in setup.sh). Everything else the parser code
imports (torch-backed modules, the server, logging setup, tokenizers) is replaced by a stand-in
from `stubs/<pkg>/…`: each stand-in's docstring names the module it replaces and why.

Resolution for a module `vllm.x.y` / `sglang.x.y` (this finder runs before the default ones):
1. a stand-in `stubs/vllm/x/y.py` (or `…/y/__init__.py`) wins;
2. else the module from the unpacked wheel (`src/vllm-0.33.0/vllm/x/y.py`);
3. a package whose `__init__.py` is not parser code (`vllm`, `sglang.srt`, `vllm.entrypoints`,
   …: every package outside PARSER_PACKAGES) is created empty, so importing one parser does not start the server.
The parsing code itself is never edited or replaced.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
STUBS = os.path.join(HERE, "stubs")

# The parser packages: their `__init__.py` (registries) runs from the wheel. Any other package's
# `__init__.py` (the server, torch, the model zoo) is not run: the package module is empty and only
# the submodules the parser code imports are loaded.
PARSER_PACKAGES = (
    "vllm.tool_parsers",
    "vllm.parser",
    "vllm.reasoning",
    "sglang.srt.function_call",
    "sglang.srt.parser",
)


def _is_parser_package(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PARSER_PACKAGES)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, roots: list[str], tops: set[str]):
        self.roots = roots  # unpacked wheel dirs (each holding `vllm/` or `sglang/`)
        self.tops = tops
        self.loaded_from: dict[str, str] = {}

    def _candidates(self, base: str, name: str):
        rel = name.replace(".", os.sep)
        init = os.path.join(base, rel, "__init__.py")
        if os.path.isfile(init):
            return init, True
        mod = os.path.join(base, rel + ".py")
        if os.path.isfile(mod):
            return mod, False
        if os.path.isdir(os.path.join(base, rel)):
            return None, True
        return None, False

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in self.tops:
            return None
        stub, stub_pkg = self._candidates(STUBS, name)
        if stub:
            self.loaded_from[name] = "stub"
            return self._spec(name, stub, stub_pkg)
        for root in self.roots:
            real, real_pkg = self._candidates(root, name)
            if real_pkg and not _is_parser_package(name):
                self.loaded_from[name] = "empty"
                spec = importlib.util.spec_from_loader(name, _EmptyLoader(), is_package=True)
                spec.submodule_search_locations = [
                    os.path.join(b, name.replace(".", os.sep)) for b in [STUBS, *self.roots]
                ]
                return spec
            if real:
                self.loaded_from[name] = "wheel"
                return self._spec(name, real, real_pkg)
            if real_pkg:  # namespace-like folder without __init__.py
                self.loaded_from[name] = "wheel"
                spec = importlib.util.spec_from_loader(name, _EmptyLoader(), is_package=True)
                spec.submodule_search_locations = [os.path.join(root, name.replace(".", os.sep))]
                return spec
        if stub_pkg:
            spec = importlib.util.spec_from_loader(name, _EmptyLoader(), is_package=True)
            spec.submodule_search_locations = [os.path.join(STUBS, name.replace(".", os.sep))]
            return spec
        return None

    @staticmethod
    def _spec(name, file, is_pkg):
        return importlib.util.spec_from_file_location(
            name,
            file,
            submodule_search_locations=[os.path.dirname(file)] if is_pkg else None,
        )


class _EmptyLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        return None


def install(roots: list[str], tops: set[str]) -> _Finder:
    finder = _Finder(roots, tops)
    sys.meta_path.insert(0, finder)
    return finder


def wheel_file(top: str, rel: str) -> str:
    """Path of `rel` (e.g. `sglang/utils.py`) in the unpacked wheel holding package `top`."""
    for f in sys.meta_path:
        if isinstance(f, _Finder):
            for root in f.roots:
                p = os.path.join(root, rel)
                if os.path.isfile(p):
                    return p
    raise FileNotFoundError(rel)


def extract(rel: str, names: list[str], namespace: dict) -> dict:
    """Execute only the top-level definitions `names` (functions, classes) of the wheel's module
    `rel` (and constants `NAME = …`), verbatim, in `namespace`; used where a module holds one needed function among heavy
    imports (the module's own import lines are not run; `namespace` supplies what they bind).
    Returns `namespace`."""
    import ast

    path = wheel_file(rel.split("/")[0], rel)
    src = open(path, encoding="utf-8").read()
    tree = ast.parse(src, filename=path)
    found = set()
    for node in tree.body:
        named = None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            named = node.name
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            named = node.targets[0].id
        if named in names:
            code = compile(ast.Module(body=[node], type_ignores=[]), path, "exec")
            exec(code, namespace)
            found.add(named)
    missing = set(names) - found
    if missing:
        raise ImportError(f"{rel}: no top-level {sorted(missing)}")
    return namespace


def extract_method(rel: str, cls: str, method: str, namespace: dict):
    """The function object of method `cls.method` from the wheel's module `rel`, compiled
    verbatim (decorators dropped) with `namespace` as its globals."""
    import ast

    path = wheel_file(rel.split("/")[0], rel)
    tree = ast.parse(open(path, encoding="utf-8").read(), filename=path)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    item.decorator_list = []
                    code = compile(ast.Module(body=[item], type_ignores=[]), path, "exec")
                    exec(code, namespace)
                    return namespace[method]
    raise ImportError(f"{rel}: no {cls}.{method}")
