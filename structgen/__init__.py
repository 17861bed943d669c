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

# The façade: the public names, re-exported from the layers (core → frontends → engine →
# decoding → tasks → api; see DESIGN.md). Nothing below this package imports it.
from structgen.api.compile import (compile_grammar, compile_json_schema, compile_regex, compile_sql,
                                   compile_structural_tag, compile_tool_calls, prepare_vocabulary)
from structgen.api.generator import (Generator, JsonResult, TextResult, generate_grammar, generate_json,
                                     generate_regex, generate_sql, generate_tool_calls)
from structgen.core.ir import Grammar
from structgen.decoding.stats import GenerationStats
from structgen.engine.compiled import CompiledGrammar
from structgen.engine.compiler import Compiler
from structgen.engine.matcher import Matcher
from structgen.engine.vocab import Vocabulary
from structgen.errors import (BudgetExceededError, CompileError, DecodingError, GrammarError,
                              IncompleteGenerationError, BudgetTooSmallError, InputTooLargeError, MessagesError, ContextLengthError, ModelNotInstalledError, OptionError, ParseError,
                              RegexSyntaxError, SchemaError, SqlError, SqlGenerationError, StructgenError, StructuralTagError,
                              TokenizerError, ToolSpecError, UnsupportedFeatureError)
from structgen.frontends.sql import CompiledSql
from structgen.frontends.tool_calls import FORMATS as TOOL_FORMATS, ToolFormat
from structgen.tasks.jobs import Retry
from structgen.tasks.sql import SqlAttempt, SqlResult
from structgen.tasks.segments import Segment
from structgen.tasks.structural import StructuralResult
from structgen.tasks.tool_calls import ToolCallResult
from structgen.version import __version__ as __version__


def __getattr__(name: str) -> object:
    # transformers is imported only when the processor is asked for: ``import structgen`` and
    # compiling stay light.
    if name == "LogitsProcessor":
        from structgen.integrations.hf_processor import LogitsProcessor

        return LogitsProcessor
    if name == "drafted_generate":
        from structgen.integrations.hf_generate import drafted_generate

        return drafted_generate
    raise AttributeError(f"module 'structgen' has no attribute {name!r}")

__all__ = [
    "BudgetExceededError",
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
    "InputTooLargeError",
    "BudgetTooSmallError",
    "LogitsProcessor",
    "JsonResult",
    "Matcher",
    "MessagesError",
    "ContextLengthError",
    "ModelNotInstalledError",
    "OptionError",
    "ParseError",
    "RegexSyntaxError",
    "Retry",
    "SchemaError",
    "SqlAttempt",
    "SqlError",
    "SqlGenerationError",
    "SqlResult",
    "Segment",
    "StructuralResult",
    "StructgenError",
    "StructuralTagError",
    "TextResult",
    "TokenizerError",
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
    "compile_structural_tag",
    "compile_tool_calls",
    "drafted_generate",
    "generate_grammar",
    "generate_json",
    "generate_regex",
    "generate_sql",
    "generate_tool_calls",
    "prepare_vocabulary",
]
