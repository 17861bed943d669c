"""structgen: structured generation with language models — exact grammar masks, forced-text drafts.

Example
-------
>>> import structgen
>>> from structgen.engine.vocab import Vocabulary
>>> vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
>>> m = structgen.compile_json_schema({"type": "boolean"}, vocab).matcher()
>>> m.advance(ord("f")), m.forced_text()
(True, 'alse')
"""

from structgen.engine.compiler import (CompiledGrammar, Compiler, compile_grammar, compile_json_schema, compile_regex,
                       prepare_vocabulary)
from .errors import (
    CompileError,
    DecodingError,
    GrammarError,
    IncompleteGenerationError,
    SchemaError,
    StructgenError,
    UnsupportedFeatureError,
)
from structgen.decoding.stats import GenerationStats
from structgen.api.generator import (Generator, JsonResult, TextResult, generate_grammar, generate_json, generate_regex,
                        generate_sql, generate_tool_calls)
from structgen.core.ir import Grammar
from structgen.engine.matcher import Matcher
from structgen.frontends.sql import CompiledSql, SqlError, compile_sql
from structgen.tasks.sql import SqlAttempt, SqlGenerationError, SqlResult
from structgen.frontends.tool_calls import FORMATS as TOOL_FORMATS, ToolFormat, ToolSpecError
from structgen.tasks.tool_calls import MessagesError, ToolCallResult
from structgen.engine.vocab import Vocabulary

__version__ = "0.1.0"

__all__ = [
    "CompileError",
    "CompiledGrammar",
    "CompiledSql",
    "Compiler",
    "DecodingError",
    "GenerationStats",
    "Generator",
    "Grammar",
    "GrammarError",
    "IncompleteGenerationError",
    "JsonResult",
    "Matcher",
    "MessagesError",
    "SchemaError",
    "SqlAttempt",
    "SqlError",
    "SqlGenerationError",
    "SqlResult",
    "StructgenError",
    "TextResult",
    "TOOL_FORMATS",
    "ToolCallResult",
    "ToolFormat",
    "ToolSpecError",
    "UnsupportedFeatureError",
    "Vocabulary",
    "compile_grammar",
    "compile_json_schema",
    "compile_regex",
    "compile_sql",
    "generate_grammar",
    "generate_json",
    "generate_regex",
    "generate_sql",
    "generate_tool_calls",
    "prepare_vocabulary",
]
