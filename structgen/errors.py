"""Exception hierarchy: one root, typed leaves, messages that say what, where and how to fix.

Every error structgen raises on purpose is a :class:`StructgenError`; errors about user input
also subclass :class:`ValueError`, errors during decoding also :class:`RuntimeError`.
"""

from __future__ import annotations

import reprlib
from typing import Any, TypeVar

__all__ = [
    "StructgenError",
    "OptionError",
    "ParseError",
    "SchemaError",
    "UnsupportedFeatureError",
    "ToolSpecError",
    "StructuralTagError",
    "GrammarError",
    "RegexSyntaxError",
    "CompileError",
    "TokenizerError",
    "BudgetExceededError",
    "SqlError",
    "MessagesError",
    "ContextLengthError",
    "InputTooLargeError",
    "DecodingError",
    "IncompleteGenerationError",
    "BudgetTooSmallError",
    "SqlGenerationError",
    "ModelNotInstalledError",
    "UnsafeCacheWarning",
]


class StructgenError(Exception):
    """Root of every error structgen raises on purpose."""


class OptionError(StructgenError, ValueError):
    """An option has a value outside what it accepts (e.g. ``max_new_tokens=0``); the message
    names the option, the value given and what is allowed."""


class ParseError(StructgenError, ValueError):
    """Text that should have a known shape (a tool-call answer in its format) does not."""


class SchemaError(StructgenError, ValueError):
    """The JSON schema itself is invalid (not a valid JSON Schema document).

    ``pointer`` is the JSON pointer of the offending subschema ("" for the root).
    """

    def __init__(self, message: str, *, pointer: str = "", no_value: bool = False) -> None:
        super().__init__(f"{message} (at JSON pointer '{pointer or '/'}')")
        self.pointer = pointer
        #: no value satisfies the subschema at all (see :func:`no_value`), as opposed to a
        #: schema that is malformed or a keyword that cannot be honoured
        self.no_value = no_value


class UnsupportedFeatureError(SchemaError):
    """A valid schema uses a keyword structgen cannot honour exactly.

    structgen never drops a constraint silently: it raises this error naming the keyword and
    where it is, so the caller can rewrite the schema (or opt into a documented relaxation).
    """

    def __init__(self, keyword: str, *, pointer: str = "", hint: str = "") -> None:
        message = f"JSON Schema keyword '{keyword}' is not supported"
        if hint:
            message += f": {hint}"
        super().__init__(message, pointer=pointer)
        self.keyword = keyword
        self.hint = hint


_E = TypeVar("_E", bound=SchemaError)


def no_value(error: _E) -> _E:
    """Mark ``error`` as saying that no value satisfies a (sub)schema (internal to the frontend).

    Where the subschema is one of several options (an ``anyOf`` branch, one type of a list, an
    optional property), the frontend drops it instead of raising: the language is unchanged.
    """
    error.no_value = True
    return error


def is_no_value(error: BaseException) -> bool:
    """Whether ``error`` was marked by :func:`no_value`."""
    return isinstance(error, SchemaError) and error.no_value


def first_error(errors: list[_E]) -> _E:
    """The first of ``errors``, the list emptied (internal to the frontend, as :func:`no_value`).

    For a function that keeps the errors of the options it leaves out and raises the first
    when none is left: a kept error's traceback holds the frame that caught it, whose list
    holds the error, a reference cycle (with every local of the failed option) that only the
    cyclic collector frees; a large schema leaves ~50,000 of them. Emptying the list, here and
    before the function returns, breaks them.

    >>> errors = [ValueError("a"), ValueError("b")]
    >>> first_error(errors), errors
    (ValueError('a'), [])
    """
    first = errors[0]
    errors.clear()
    return first


class ToolSpecError(SchemaError):
    """A tool list, a tool spec or a ``tool_choice`` is malformed.

    ``tool`` names the tool (None when the problem is not one tool's); ``pointer`` is the JSON
    pointer of the problem inside the ``tools`` list (``/2/function/parameters/properties/x``).
    """

    def __init__(self, message: str, *, tool: str | None = None, pointer: str = "") -> None:
        where = f"tool '{tool}': " if tool else ""
        super().__init__(where + message, pointer=pointer)
        self.tool = tool


class StructuralTagError(SchemaError):
    """A structural tag (xgrammar's composition format) is malformed, or uses a format or field
    structgen cannot honour; ``pointer`` is the JSON pointer of the field in the spec."""


class GrammarError(StructgenError, ValueError):
    """A grammar (IR or grammar file) is malformed."""


class RegexSyntaxError(GrammarError):
    """A malformed or unsupported terminal regex; ``offset`` is the character in the pattern."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class CompileError(StructgenError):
    """A valid grammar could not be compiled (e.g. it recurses without consuming input)."""


class TokenizerError(StructgenError, ValueError):
    """A tokenizer whose tokens structgen cannot map to exact bytes (a WordPiece tokenizer's
    ``##`` continuations, a SentencePiece model without byte fallback, ...). ``family`` names
    what it is; the message says which families structgen reads and how to go on."""

    def __init__(self, message: str, *, family: str) -> None:
        super().__init__(message)
        self.family = family


class EmptyLanguageError(CompileError):
    """A grammar matches nothing at all; ``rule`` names the rule to blame. The compilers turn it
    into the error of their input (SchemaError with a pointer, GrammarError with a rule)."""

    def __init__(self, message: str, *, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


class BudgetExceededError(CompileError):
    """A compile ran out of work units; the message names the schema path and the budget."""


class SqlError(StructgenError, ValueError):
    """A database that cannot be read, or a grammar compile_sql cannot fill in."""


class MessagesError(StructgenError, ValueError):
    """The chat messages are malformed; the message says which one (by index) and why."""


class InputTooLargeError(StructgenError, ValueError):
    """An input is over a size limit of :mod:`structgen.core.limits` (the same limit at every
    door: text, a dict, a file, stdin or a serving request); the message names the input, its
    size and the limit."""


class ContextLengthError(StructgenError, ValueError):
    """The prompt and ``max_new_tokens`` together do not fit the model's context window; raised
    before decoding starts (a 33k-token prompt for an 8k model would otherwise run for minutes
    before failing)."""


class DecodingError(StructgenError, RuntimeError):
    """Decoding failed: the model, the grammar and the tokens could not agree."""


class IncompleteGenerationError(DecodingError):
    """Generation stopped (token budget, stop condition) before the value was complete.

    ``partial_text`` and ``token_ids`` hold what was generated, so nothing is lost; ``stats``
    (a :class:`~structgen.GenerationStats`, when raised by the decoding loop) what it cost.
    """

    def __init__(self, message: str, *, partial_text: str, token_ids: list[int], stats: Any = None) -> None:
        super().__init__(message)
        self.partial_text = partial_text
        self.token_ids = token_ids
        self.stats = stats


class BudgetTooSmallError(DecodingError, ValueError):
    """``max_new_tokens`` is below the fewest tokens any complete output needs (``needed``),
    so no output could be complete within it; raised before decoding starts, under the default
    ``budget="complete"``."""

    def __init__(self, message: str, *, needed: int, max_new_tokens: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.max_new_tokens = max_new_tokens


class SqlGenerationError(DecodingError):
    """No query passed the checks within the retries; ``attempts`` holds each one
    (a :class:`~structgen.SqlAttempt`) and why it failed."""

    def __init__(self, message: str, *, attempts: list[Any]) -> None:
        super().__init__(message)
        self.attempts = attempts


class ModelNotInstalledError(StructgenError, RuntimeError):
    """The package that ships a model's GGUF file is not installed; the message says how."""


class UnsafeCacheWarning(UserWarning):
    """structgen's disk cache (or a folder or file in it) belongs to another user or is writable
    by others, so it is not read: an entry planted there could run code when loaded. The message
    names the path and how to fix it; compiling goes on without the cache."""


_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxstring, _BRIEF.maxother, _BRIEF.maxlong = 4, 60, 60, 40


def shown(value: Any, width: int = 80) -> str:
    """``value`` written for an error message, at most ``width`` characters: never raises on
    what a caller can hand in (5,000 nested lists, an integer of 5,000 digits).

    >>> shown([[[[[[1]]]]]]), shown(10 ** 5000)[:12], shown("x" * 500, 12)
    ('[[[[[...]]]]]', '<an int too ', "'xxxxxxxxxxx")
    """
    try:
        text = _BRIEF.repr(value)
    except (ValueError, RecursionError):
        text = f"<{'an' if type(value).__name__[0] in 'aeiou' else 'a'} {type(value).__name__} too large to show>"
    return text[:width]
