"""The short path for patterns that are words and ``|`` only (SQL names, functions, ``"SELECT"i``).

:func:`structgen.frontends.regex.python.text_regex_to_ir` builds such a pattern's IR without
the general parser. It must give the very IR the parser gives (the rule caches key on it), and
leave every other pattern to the parser.
"""

from __future__ import annotations

import re

import pytest

from structgen.frontends.regex import python as py_regex
from structgen.frontends.sql import _names_terminal

# Names as a SQL database may have them: ASCII, quotes and brackets inside, beyond ASCII (folded
# or not), characters whose case mapping is not one character (ß, İ), ones Python's re folds and
# structgen does not (ſ, K), an astral character, regex syntax.
NAMES = ["city", "CountryCode", "Life Expectancy", 'say "hi"', "a`b", "x]y", "café", "Straße", "İstanbul",
         "ſtate", "\u212aelvin", "emoji😀", "a/b", "50%", "(paren)", "dot.ted", "a|b", "back\\slash"]


def _patterns_of(terminal_line: str) -> list[tuple[str, bool]]:
    """The ``(pattern, ignore case)`` pairs of a ``LABEL: /.../i | /.../`` line."""
    return [(p.replace("\\/", "/"), f == "i") for p, f in re.findall(r"/((?:[^/\\]|\\.)+)/(i?)", terminal_line)]


WORD_PATTERNS = (_patterns_of(_names_terminal("NAME", NAMES))
                 + [(re.escape(w), ic) for w in ["SELECT", "NOT NULL", "<=", "||", "#", "a-b", "€"] for ic in (False, True)]
                 + [(re.escape(chr(c)), ic) for c in range(0x20, 0x7F) for ic in (False, True)]
                 + [("abs|changes|char|coalesce", True), ("a|a|b", False)])


@pytest.mark.parametrize("pattern,ignore_case", WORD_PATTERNS)
def test_word_patterns_take_the_short_path_to_the_parsers_ir(pattern, ignore_case):
    if not py_regex._WORDS.fullmatch(pattern):
        # the names' regexes beyond ASCII spell letters [aA] without the i flag: the parser's
        assert re.search(r"\[[a-z][A-Z]\]", pattern), pattern
        return
    assert py_regex._words(pattern, ignore_case) == py_regex._parsed(pattern, ignore_case, False)[0]


def test_the_sql_names_and_every_escaped_ascii_character_are_words():
    # else the test above checks nothing
    taken = [p for p, _ in WORD_PATTERNS if py_regex._WORDS.fullmatch(p)]
    assert len(taken) >= len(WORD_PATTERNS) - 2
    assert all(py_regex._WORDS.fullmatch(re.escape(chr(c))) for c in range(0x20, 0x7F))


@pytest.mark.parametrize("pattern", ["a|", "|a", "a||b", "", "a.b", "a*", "a+b", "a?", "(a)", "[ab]", "a{2}", "^a",
                                     "a$", r"\d", r"\w", r"\b", r"\x41", r"\u00e9", "\\", r"\é", "a\\\n",
                                     "\ud83d\ude00"])
def test_everything_else_goes_to_the_parser(pattern):
    assert not py_regex._WORDS.fullmatch(pattern)


def test_an_escaped_backslash_is_a_backslash():
    assert py_regex._WORDS.fullmatch(r"a\\")
    assert py_regex._words(r"a\\", False) == py_regex._parsed(r"a\\", False, False)[0]
