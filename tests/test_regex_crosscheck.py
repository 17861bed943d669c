"""Regex languages cross-checked against interegular, an independent regex-to-FSM library.

Each pattern below is one that both of structgen's dialects (ECMA-262 with ``u`` for JSON Schema
``pattern``, :func:`structgen.frontends.regex.ecma.pattern_to_ir`; Python ``re`` for grammar
terminals and ``compile_regex``, :func:`structgen.frontends.regex.python.text_regex_to_ir`) and
interegular (which reads Python's ``re`` syntax) read alike: ASCII, anchored (the ECMA pattern is
wrapped in ``^(?:...)$``; the Python dialect matches whole), no lookaround, backreferences or
word boundaries.

The comparison is exact, not sampled: a breadth-first walk over pairs of states (structgen's
minimal byte DFA from :func:`structgen.core.regular.to_fsm`, interegular's FSM) over every
character of an alphabet on which the dialects agree, so any string on which the two languages
differ is found, and the shortest one is reported (with Python ``re``'s verdict on it).

The alphabets, and why:

* ECMA: printable ASCII without ``"`` and ``\\``. structgen's ECMA automaton reads a JSON
  string's *encoded* bytes; for these characters the raw spelling is the character itself (the
  others must or may be escaped, which :mod:`tests.test_json_schema` covers).
* Python: printable ASCII plus ``\\t \\n \\v \\f \\r``. Not ``\\x1c``-``\\x1f``: Python's Unicode
  ``\\s`` includes them, interegular's ``\\s`` is ``[ \\t\\n\\r\\f\\v]``; not other controls, to keep
  the alphabet small (no pattern here names them).
"""

from __future__ import annotations

import re
from collections import deque

import pytest

interegular = pytest.importorskip("interegular")

from structgen.core.regular import to_fsm  # noqa: E402
from structgen.frontends.regex.ecma import pattern_to_ir  # noqa: E402
from structgen.frontends.regex.python import text_regex_to_ir  # noqa: E402

PATTERNS = [
    "abc", "a|b|c", "ab|cd|", "[a-z]+", "[^a-z]*x", r"\d{3}-\d{4}", "(ab|cd)*e?", "a{2,4}", "a{3,}",
    "a{0,2}b", "a{0}b", "[A-Za-z_][A-Za-z0-9_]*", r"\w+@\w+\.com", "(a|ab)(c|bcd)(d*)", "x*y+z?",
    r"[0-9]+(\.[0-9]+)?", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", r"\s*", " +", ".{2,3}",
    "a.c", "[.]", r"\.", r"[\^a]", r"[a\-z]", "[-a]", "[a-]", "(?:ab)+", "((a|b)c)*",
    "[abc]{2}[^abc]{1,2}", r"\D+", r"\W", r"\S\s\S", "(a*)*", "(a|b)*abb",
    "[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}", r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    "[^ ]+ [^ ]+", "a+?b", "(a|b)??c", r"\(\)\[\]\{\}", r"\*\+\?\|", r"\$\^", "[$^]", r"[\]\[]", r"\/",
    r"[\d_]+", r"[\w.-]+@[\w-]+(\.[\w-]+)+", r"[^\d\s]+", "(abc){2,3}", "a(b(c(d)?)?)?",
    "(x|y|z){1,3}w", "[a-cx-z]{2,}", "(?:[a-z]+,)*[a-z]+", r"\x41\x7a", r"[\x30-\x39]+",
    "(0|1)*1(0|1)(0|1)", "((ab)*|c)+d", "[ab]*(a|b)", "(|a)b", "(ab){0,}c", ".*a.*", "[^a]",
    r"\.\d+|\d+\.\d*", "(?:a|b|c|d|e|f)+g", "[A-Z][a-z]*( [A-Z][a-z]*)*", "a*?", r"[^\w ]{2}",
    r"[\s\S]", r"[^\S ]+", "(a|b|ab|ba)*", r"\d+(,\d{3})*", "(a{2}){2,3}", r"(?:\+|-)?\d*\.?\d+",
    "(a{1,2}b?){2,3}", "((a|b){2}c?)+", "[a-c]{0,3}[b-d]{1,2}", "(x+x+)+y", r"[^-\]]+",
    # not here: \uHHHH (interegular refuses it: "unicode properties are not supported")
]

PRINTABLE = [chr(c) for c in range(0x20, 0x7F)]
ECMA_ALPHABET = [c for c in PRINTABLE if c not in '"\\']
PYTHON_ALPHABET = ["\t", "\n", "\v", "\f", "\r"] + PRINTABLE


def _structgen_dfa(expr):
    fsm = to_fsm(expr)
    trans = [{b: t for cls, t in edges for b in cls.bytes()} for edges in fsm.edges]
    return trans, fsm.accept


def first_difference(expr, pattern: str, alphabet: list[str]) -> "tuple[str, bool, bool] | None":
    """The shortest string over ``alphabet`` that exactly one of structgen's automaton for ``expr``
    and interegular's for ``pattern`` accepts, with (structgen, interegular)'s verdicts; or None."""
    trans, accept = _structgen_dfa(expr)
    ifsm = interegular.parse_pattern(pattern).to_fsm()
    symbols = {c: ifsm.alphabet[c] for c in alphabet}

    def step_ours(q, c):
        return -1 if q < 0 else trans[q].get(ord(c), -1)

    def step_theirs(q, c):
        sym = symbols[c]
        if q is None or sym is None:
            return None
        return ifsm.map.get(q, {}).get(sym)

    start = (0 if trans else -1, ifsm.initial)
    seen = {start: ""}
    todo = deque([start])
    while todo:
        pair = todo.popleft()
        text = seen[pair]
        ours = pair[0] >= 0 and pair[0] in accept
        theirs = pair[1] is not None and pair[1] in ifsm.finals
        if ours != theirs:
            return text, ours, theirs
        for c in alphabet:
            nxt = (step_ours(pair[0], c), step_theirs(pair[1], c))
            if nxt == (-1, None) or nxt in seen:
                continue
            seen[nxt] = text + c
            todo.append(nxt)
    return None


def _message(dialect: str, pattern: str, diff) -> str:
    text, ours, theirs = diff
    verdict = re.fullmatch(pattern, text) is not None
    return (f"{dialect} {pattern!r} on {text!r}: structgen {'accepts' if ours else 'rejects'}, "
            f"interegular {'accepts' if theirs else 'rejects'}; Python re.fullmatch says {verdict}")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_python_dialect_language_equals_interegulars(pattern):
    diff = first_difference(text_regex_to_ir(pattern), pattern, PYTHON_ALPHABET)
    assert diff is None, _message("Python", pattern, diff)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_ecma_dialect_language_equals_interegulars(pattern):
    diff = first_difference(pattern_to_ir(f"^(?:{pattern})$"), pattern, ECMA_ALPHABET)
    assert diff is None, _message("ECMA", pattern, diff)


def test_the_walk_finds_a_difference_when_there_is_one():
    """The walk is no rubber stamp: a language that differs by one string is caught."""
    assert first_difference(text_regex_to_ir("a{1,3}"), "a{1,2}", PYTHON_ALPHABET) == ("aaa", True, False)
    assert first_difference(text_regex_to_ir("[a-y]"), "[a-z]", PYTHON_ALPHABET) == ("z", False, True)
    assert first_difference(pattern_to_ir("^(?:a.c)$"), "a.c", ECMA_ALPHABET) is None
