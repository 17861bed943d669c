"""structgen: structured generation with language models — exact grammar masks, forced-text drafts.

Example
-------
>>> import structgen
>>> from structgen.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> m = structgen.compile_json_schema({"type": "boolean"}, vocab).matcher()
>>> m.advance(ord("f")), m.forced_text()
(True, 'alse')
"""

from .compiler import CompiledGrammar, Compiler, compile_json_schema, prepare_vocabulary
from .errors import (
    CompileError,
    DecodingError,
    GrammarError,
    IncompleteGenerationError,
    SchemaError,
    StructgenError,
    UnsupportedFeatureError,
)
from .decoding import GenerationStats
from .generator import Generator, JsonResult, generate_json
from .ir import Grammar
from .matcher import Matcher
from .vocab import Vocabulary

__version__ = "0.1.0"

__all__ = [
    "CompileError",
    "CompiledGrammar",
    "Compiler",
    "DecodingError",
    "GenerationStats",
    "Generator",
    "Grammar",
    "GrammarError",
    "IncompleteGenerationError",
    "JsonResult",
    "Matcher",
    "SchemaError",
    "StructgenError",
    "UnsupportedFeatureError",
    "Vocabulary",
    "compile_json_schema",
    "generate_json",
    "prepare_vocabulary",
]
