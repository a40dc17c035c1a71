"""Stand-in for `vllm/renderers/cohere.py` (the Cohere chat renderer; imports the engine config
and HF tokenizers): the Command parser imports only the constant `POSITION_TO_SOURCE_KEY`,
executed verbatim from the wheel's file."""

import loader

loader.extract("vllm/renderers/cohere.py", ["POSITION_TO_SOURCE_KEY"], globals())
