"""Stand-in for `sglang/utils.py` (imports IPython, numpy, requests, tqdm at module level).
The protocol models use only `convert_json_schema_to_str`; it is executed verbatim from the
wheel's `sglang/utils.py`."""

import json
from typing import Type, Union

from pydantic import BaseModel

import loader

loader.extract(
    "sglang/utils.py",
    ["convert_json_schema_to_str"],
    globals(),
)
