"""Stand-in for `vllm/sampling_params.py` (imports torch and msgspec structs of the engine):
`StructuredOutputsParams` with the fields the parser code reads or sets (json, regex, choice,
grammar, json_object, structural_tag); `SamplingParams` and `check_json_nesting` are only used
when building grammars, which the driver does not do."""

from dataclasses import dataclass
from typing import Any


@dataclass
class StructuredOutputsParams:
    json: str | dict | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    structural_tag: str | None = None
    disable_fallback: bool = False
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None


class SamplingParams:
    def __init__(self, *a, **k):
        raise NotImplementedError("stand-in: sampling is not modelled")


def check_json_nesting(*a, **k) -> None:
    return None
