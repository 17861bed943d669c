"""JSON Schema ``pattern`` (ECMA-262 dialect) compiled to grammar IR over JSON string bytes.

Data flow
---------
``pattern`` constrains the *decoded* value of a JSON string and is an unanchored search: the
string must *contain* a match unless ``^``/``$`` anchor it. The automaton, though, reads the
*encoded* bytes between the quotes, where every character may be spelt raw (UTF-8), as a short
escape (``\\n``, ``\\"`` ...) or as ``\\uXXXX`` in either hex case (astral characters as a
surrogate pair). So compilation runs in three steps:

1. :func:`pattern_to_ir` parses the pattern (recursive descent, our own parser) into a small
   syntax tree whose leaves are *code-point sets* (a literal ``a`` is the set ``{0x61}``, ``\\d``
   is ``{0x30..0x39}``, ``[^x]`` the complement of ``{0x78}``).
2. Each leaf becomes :func:`char_set_ir`: one JSON string character, in any spelling, whose
   decoded code point lies in the set. Raw UTF-8 uses the standard UTF-8 range splitting,
   ``\\u`` escapes a hexadecimal-digit range splitting; the resulting byte-class sequences are
   factored into a prefix tree, so even ``[^a]`` is a few dozen IR nodes.
3. Sequences, alternatives and quantifiers map onto ``seq``/``alt``/``Repeat``; the pattern is
   wrapped in ``Repeat(JSON_CHAR, 0, None)`` on each side that is not anchored.

Dialect
-------
ECMA-262 with the ``u`` flag (code-point semantics, as JSON Schema recommends), no other flags:

* literal characters; escapes ``\\n \\r \\t \\f \\v \\0 \\cX \\xHH \\uHHHH \\u{H...}`` (a
  ``\\uHHHH\\uHHHH`` surrogate pair is one character) and identity escapes of ASCII punctuation
  (``\\. \\* \\/ \\- \\\\`` ...); an escaped ASCII letter or digit without a meaning is an error;
* ``\\d \\D \\w \\W \\s \\S`` (ASCII ``\\d``/``\\w``; ``\\s`` is ECMA WhiteSpace and
  LineTerminator), ``.`` (anything but ``\\n \\r \\u2028 \\u2029``);
* classes ``[...]``/``[^...]`` with ranges and escapes (``\\b`` there is backspace);
* groups ``(...)``, ``(?:...)``, ``(?<name>...)``; alternation ``|``; quantifiers
  ``* + ? {n} {n,} {n,m}`` and their lazy forms (same language);
* ``^`` at the start and ``$`` at the end of the pattern or of a top-level alternative, also
  through groups (``^(a|b)$``, ``(^a|b$)``, ``(^a|b)c``).

Refused with :class:`~structgen.errors.UnsupportedFeatureError` (keyword ``pattern``): lookahead
and lookbehind, backreferences, ``\\b``/``\\B`` word boundaries, ``\\p{...}`` property escapes,
inline modifiers, anchors anywhere else, and quantifiers whose unrolled copies (multiplied
through nesting) exceed :data:`structgen.core.automaton.MAX_UNROLL`. A malformed pattern raises
:class:`~structgen.errors.SchemaError` saying what is wrong at which character offset.

Code points U+D800..U+DFFF (lone surrogates) are never matched: JSON strings cannot hold them.

Example
-------
>>> from structgen.core.ir import Grammar, Lit, seq
>>> from structgen.core.automaton import build_automaton
>>> from structgen.engine.pda import StackMachine, ACCEPT
>>> body = seq(Lit(b'"'), pattern_to_ir("^[a-z]+$"), Lit(b'"'))
>>> sm = StackMachine(build_automaton(Grammar.of("root", root=body)))
>>> [ACCEPT in sm.step_bytes(sm.initial(), s) for s in (b'"abc"', b'"\\\\u0061b"', b'"a1"')]
[True, True, False]
"""

from __future__ import annotations

import functools

from structgen.core.budget import affordable_text
from structgen.errors import SchemaError, UnsupportedFeatureError
from structgen.core.ir import Expr, Lit, Repeat, alt, seq
from structgen.frontends.json_text import JSON_CHAR
from structgen.frontends.regex.charsets import MAX_CODE_POINT, char_set_ir, raw_set_ir
from structgen.frontends.regex.syntax import Malformed, Parser, Unsupported, branches

__all__ = ["char_set_ir", "pattern_to_ir", "raw_set_ir"]


@functools.lru_cache(maxsize=1024)
def _compile(pattern: str, canonical: bool) -> Expr:
    tree = Parser(pattern).parse()
    any_ = Repeat(char_set_ir([(0, MAX_CODE_POINT)], canonical=True) if canonical else JSON_CHAR, 0, None)
    opts = []
    for sa, ea, ir in branches(tree, True, True, 1, canonical):
        if not sa and not ea and ir == Lit(b""):
            opts.append(any_)
        else:
            opts.append(seq(Lit(b"") if sa else any_, ir, Lit(b"") if ea else any_))
    return alt(*opts)


def pattern_to_ir(pattern: str, *, pointer: str = "", canonical: bool = False) -> Expr:
    """IR for the bytes between the quotes of a JSON string whose value matches ``pattern``.

    Matching is an ECMA-262 search (``u`` flag): the decoded string must contain a match, unless
    ``^``/``$`` anchor it; every spelling of every character counts (``canonical=True``: only
    the spelling ``json.dumps`` writes, for generation; see :func:`char_set_ir`). The result has no
    :class:`~structgen.core.ir.Ref`, so it can sit anywhere in a grammar. Results are cached.

    Raises
    ------
    SchemaError
        The pattern is malformed; the message says what and at which character offset.
    UnsupportedFeatureError
        The pattern uses lookaround, backreferences, word boundaries, property escapes, inline
        modifiers, an anchor inside the pattern, or a quantifier too large to unroll.

    Example
    -------
    >>> print(pattern_to_ir("^a?$"))
    ("a" | "\\\\u0061")?
    >>> pattern_to_ir("a(?=b)", pointer="/properties/x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    structgen.errors.UnsupportedFeatureError: ... lookahead '(?=', at character offset 1 ...
    """
    if not isinstance(pattern, str):
        raise SchemaError(f"'pattern' must be a string, not {type(pattern).__name__}", pointer=pointer)
    affordable_text(pattern, "a pattern")  # on every call: cached or not
    try:
        return _compile(pattern, canonical)
    except Malformed as e:
        raise SchemaError(f"invalid pattern {pattern!r}: {e.what}, at character offset {e.offset}",
                          pointer=pointer) from None
    except Unsupported as e:
        hint = f"{e.what}, at character offset {e.offset} of pattern {pattern!r}"
        raise UnsupportedFeatureError("pattern", pointer=pointer, hint=hint) from None
