"""Shared helper for stand-ins of modules used only to build constrained-decoding grammars or
type annotations (xgrammar, transformers): any attribute is a permissive placeholder class.
The parsing paths the driver calls never use these objects' behaviour; if one ever did, the
placeholder raises, so a difference could not pass silently."""


class Placeholder:
    """Accepts any construction; any use beyond construction/isinstance raises."""

    def __init__(self, *args, **kwargs):
        self._args = args
        self._kwargs = kwargs

    def __class_getitem__(cls, item):
        return cls

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema

        return core_schema.any_schema()

    @classmethod
    def model_validate(cls, *a, **k):
        raise NotImplementedError(f"stand-in {cls.__qualname__}: grammar building is not modelled")


def module_getattr(modname):
    cache = {}

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in cache:
            cache[name] = type(name, (Placeholder,), {"__module__": modname})
        return cache[name]

    return __getattr__
