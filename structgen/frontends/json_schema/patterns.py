"""Whether a string matches an ECMA-262 ``pattern`` or a known ``format``, judged by
structgen's own regex engine (so a key or an enum value is judged exactly as its automaton would).

Example
-------
>>> pattern_matches("^x-", "x-rate", "/patternProperties/^x-"), pattern_matches("^x-", "y", "")
(True, False)
"""

from __future__ import annotations

import json
from typing import Any

from structgen.core.memo import Recent
from structgen.core.regular import matcher
from structgen.errors import UnsupportedFeatureError
from structgen.frontends.json_schema.formats import FORMAT_ALIASES, FORMAT_PATTERNS
from structgen.frontends.regex.ecma import pattern_to_ir

__all__ = ["pattern_matches", "matches_avoided"]

_PATTERNS: Recent[tuple[str, str], Any] = Recent(512)


def pattern_matches(pattern: str, key: str, pointer: str) -> bool:
    """Whether the ECMA-262 ``pattern`` finds a match in ``key`` (memoized per pattern)."""
    got = _PATTERNS.get((pattern, pointer))
    if got is None:
        got = _PATTERNS[(pattern, pointer)] = matcher(pattern_to_ir(pattern, pointer=pointer, canonical=True))
    return got(json.dumps(key, ensure_ascii=False)[1:-1].encode())


def matches_avoided(value: str, avoided: list[tuple[str, str, str]]) -> bool:
    """Whether the string ``value`` matches one of the patterns or known formats ``avoided``
    (``(kind, pattern or format, pointer)`` triples, from ``not``)."""
    for kind, what, ptr in avoided:
        what = FORMAT_ALIASES.get(what, what) if kind == "format" else what
        if kind == "format" and what not in FORMAT_PATTERNS:
            raise UnsupportedFeatureError("format", pointer=ptr, hint=f"format {what!r} under not is not supported")
        if pattern_matches(what if kind == "pattern" else FORMAT_PATTERNS[what], value, ptr):
            return True
    return False
