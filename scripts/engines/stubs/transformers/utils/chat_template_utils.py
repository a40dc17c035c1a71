"""Stand-in for `transformers.utils.chat_template_utils` (xgrammar builds constrained-decoding grammars and needs
torch; transformers is the tokenizer library): the parser code imports names from it only for
structural tags and type annotations, never to parse text. Every name is a placeholder class
(stubs/_anything.py)."""

from _anything import module_getattr

__getattr__ = module_getattr(__name__)
