"""Exception hierarchy: one root, typed leaves, messages that say what, where and how to fix.

Every error structgen raises on purpose is a :class:`StructgenError`; errors about user input
also subclass :class:`ValueError`, errors during decoding also :class:`RuntimeError`.
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = [
    "StructgenError",
    "SchemaError",
    "UnsupportedFeatureError",
    "GrammarError",
    "CompileError",
    "DecodingError",
    "IncompleteGenerationError",
]


class StructgenError(Exception):
    """Root of every error structgen raises on purpose."""


class SchemaError(StructgenError, ValueError):
    """The JSON schema itself is invalid (not a valid JSON Schema document).

    ``pointer`` is the JSON pointer of the offending subschema ("" for the root).
    """

    def __init__(self, message: str, *, pointer: str = "") -> None:
        super().__init__(f"{message} (at JSON pointer '{pointer or '/'}')")
        self.pointer = pointer


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
    error.no_value = True  # type: ignore[attr-defined]
    return error


def is_no_value(error: BaseException) -> bool:
    """Whether ``error`` was marked by :func:`no_value`."""
    return getattr(error, "no_value", False) is True


class GrammarError(StructgenError, ValueError):
    """A grammar (IR or grammar file) is malformed."""


class CompileError(StructgenError):
    """A valid grammar could not be compiled (e.g. it recurses without consuming input)."""


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


class OptionError(StructgenError, ValueError):
    """An option has a value outside what it accepts (e.g. ``max_new_tokens=0``); the message
    names the option, the value given and what is allowed."""
