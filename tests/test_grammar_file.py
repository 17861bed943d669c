"""Grammar files (Lark-style EBNF): the format, its errors, left recursion and the lexer rules.

The oracle is Lark itself (``parser="earley", lexer="basic"``: a real lexer, then a parser that
takes any context-free grammar), on the byte-level vocabulary so that every string is one
token per byte. Masks on real tokenizers are checked in tests/test_grammar_masks.py.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

import structgen
from structgen import GrammarError
from structgen.engine.vocab import Vocabulary

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
GRAMMARS = Path(__file__).resolve().parent.parent / "structgen" / "grammars"


def accepts(compiled, text: str) -> bool:
    m = compiled.matcher()
    return all(m.advance(b) for b in text.encode()) and m.can_end()


def lark_accepts(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


def oracle(text: str) -> lark.Lark:
    return lark.Lark(text, parser="earley", lexer="basic")


# ---------------------------------------------------------------- grammars under test

ARITH = r'''
?start: sum
?sum: product | sum "+" product | sum "-" product
?product: atom | product "*" atom | product "/" atom
?atom: NUMBER | NAME | NAME "(" [sum ("," sum)*] ")" | "-" atom | "(" sum ")"
NUMBER: /[0-9]+(\.[0-9]+)?/
NAME: /[a-z_][a-z0-9_]*/
%ignore " "
'''

SQLISH = r'''
start: "select"i cols "from"i NAME ("where"i cond)?
cols: col ("," col)* | "*"
col: NAME ("as"i NAME)?
cond: NAME "=" (NAME | NUMBER | STRING) (("and"i | "or"i) cond)?
NAME: /[a-z_][a-z0-9_]*/i
NUMBER: /[0-9]+/
STRING: /'[^']*'/
%ignore /[ \t\n]+/
'''

# Ambiguous: nested lists whose items may or may not carry a label.
LISTS = r'''
start: item+
item: "[" item* "]" | WORD | WORD ":" item
WORD: /[a-z]+/
%ignore " "
'''

# Left recursion hidden behind a nullable prefix, and an indirect cycle.
HIDDEN = r'''
start: a
a: b a "x" | c "y" | "y"
b: "z"?
c: a "w" | "v"
'''

# Valid texts mixed into Lark's generated ones (its generator often joins tokens without the
# gap its lexer needs, ``SELECTaFROMt``), so near misses of valid texts are always tested.
SEEDS = {
    "arith": ["f(x, 2) * -(a + 1.5) / b", "1-2-3"],
    "sqlish": ["select a, b as c from t where x = 1 and y = 'z'", "SELECT * FROM t"],
    "lists": ["[a [b c] d:e]", "x:y:[ ]"],
    "hidden": ["zzyxx", "vwzyxwy"],
    "json.lark": ['{"a": [1, -2.5e3, true], "b": {"c": null}}', '"s"'],
}

PROPERTY_GRAMMARS = {"arith": ARITH, "sqlish": SQLISH, "lists": LISTS, "hidden": HIDDEN,
                     "json.lark": (GRAMMARS / "json.lark").read_text()}


# ---------------------------------------------------------------- the format

@pytest.mark.parametrize("text,good,bad", [
    ('start: "a" ["b"] "c"', ["ac", "abc"], ["ab", "abbc"]),
    ('start: "a"~3', ["aaa"], ["aa", "aaaa"]),
    ('start: "a" ~ 2..3', ["aa", "aaa"], ["a", "aaaa"]),
    ('start: LETTER+\nLETTER: "a".."c"', ["abc", "cab"], ["abd", ""]),
    ('start: "sel"i', ["sel", "SEL", "sEl"], ["se", "sell"]),
    ('start: /a.b/s', ["a\nb", "axb"], ["ab"]),
    ('start: /a.b/', ["axb"], ["a\nb"]),
    ('?start: x -> alias\n!x: "q" | "r" -> other\n_y: "unused"', ["q", "r"], ["y"]),
    ('start.2: X\nX.-1: "p"', ["p"], ["q"]),
    ('start: A B\nA: "a" C\nC: "c"\nB: "b"', ["acb"], ["ab"]),
    ('start: x\n    | y\n// a comment\nx: "1"  # another\ny: "2"', ["1", "2"], ["3"]),
    ('start: NAME\n%import common.CNAME -> NAME', ["_a1", "ab"], ["1a"]),
    ('start: INT ("," INT)*\n%import common (INT, WS)\n%ignore WS', ["1, 2 ,3", " 4 "], ["1,", "1 2"]),
    ('start: "caf\\u00e9" | "\\x41"', ["café", "A"], ["cafe"]),
])
def test_format(text, good, bad):
    compiled = structgen.compile_grammar(text, BYTES)
    for s in good:
        assert accepts(compiled, s), s
    for s in bad:
        assert not accepts(compiled, s), s


@pytest.mark.parametrize("path,good,bad", [
    ("json.lark", ['{"a": [1, -2.5e3, true, null, "x\\n\\u00e9"]}', '[]', '"s"', ' 0 '],
     ['{"a":}', '[1,]', '01', '[truefalse]', '{"a" 1}', '"\x01"']),
    ("arithmetic.lark", ["1 + 2*3^2 - f(x, 2)", "-(1+2)/3", "f()", "a^b^c"],
     ["1 +", "f(,)", "1 2", "f(x)y", "()"]),
])
def test_bundled_grammars(path, good, bad):
    compiled = structgen.compile_grammar(GRAMMARS / path, BYTES)
    for s in good:
        assert accepts(compiled, s), s
    for s in bad:
        assert not accepts(compiled, s), s


def test_grammar_sources(tmp_path):
    (tmp_path / "pieces.lark").write_text('DIGITS: /[0-9]+/\nSIGN: "+" | "-"\n')
    main = tmp_path / "main.lark"
    main.write_text("start: SIGN? DIGITS\n%import pieces (DIGITS, SIGN)\n")
    by_path = structgen.compile_grammar(main, BYTES)
    by_str = structgen.compile_grammar(str(main), BYTES)
    assert accepts(by_path, "-12") and accepts(by_str, "+3") and not accepts(by_path, "+")
    with pytest.raises(GrammarError, match="cannot read grammar file"):
        structgen.compile_grammar(str(tmp_path / "missing.lark"), BYTES)
    with pytest.raises(GrammarError, match="no start rule 'begin'"):
        structgen.compile_grammar(main, BYTES, start="begin")


def test_ir_grammar_with_left_recursion():
    from structgen.core.ir import ByteClass, Grammar, Lit, Ref, alt, seq
    g = Grammar.of("e", e=alt(seq(Ref("e"), Lit(b"+"), Ref("n")), Ref("n")), n=ByteClass.of("0-9"))
    compiled = structgen.compile_grammar(g, BYTES)
    assert accepts(compiled, "1+2+3") and not accepts(compiled, "1++2")


@pytest.mark.parametrize("rules,start,message", [
    # the rewrite of left recursion follows references: a dangling one is an error, not a KeyError
    ({"e": "left-recursive", "n": "to 'm'"}, "e", "rule 'n' refers to undefined rule 'm'"),
    ({"e": "left-recursive", "n": "digits"}, "s", "the start rule 's' is not defined"),
    ({"n": "digits"}, "s", "the start rule 's' is not defined"),
])
def test_ir_grammar_with_a_dangling_reference_is_a_grammar_error(rules, start, message):
    from structgen.core.ir import ByteClass, Grammar, Lit, Ref, alt, seq
    bodies = {"left-recursive": alt(seq(Ref("e"), Lit(b"+"), Ref("n")), Ref("n")),
              "to 'm'": alt(Ref("m"), ByteClass.of("0-9")), "digits": ByteClass.of("0-9")}
    g = Grammar(tuple((name, bodies[kind]) for name, kind in rules.items()), start)
    with pytest.raises(GrammarError, match=re.escape(message)):
        structgen.compile_grammar(g, BYTES)


# ---------------------------------------------------------------- errors, with a caret

@pytest.mark.parametrize("text,message,line,column", [
    ('start: expr\nexpr: expr "+" trem | term\nterm: "1"', "undefined rule 'trem'", 2, 16),
    ('start: NUMBR\nNUMBER: /[0-9]+/', "undefined terminal 'NUMBR'", 1, 8),
    ('start: ("a" | "b"\nx: "c"', "unbalanced '(': no matching ')'", 1, 8),
    ('start: "a" )', "unbalanced ')': it closes no group", 1, 12),
    ('start: "a" ["b"', "unbalanced '[': no matching ']'", 1, 12),
    ('start: /[a-/', "invalid regular expression: unterminated character class", 1, 9),
    ('start: /a(?=b)/', "lookahead", 1, 10),
    ('start: X\nX: /ab\\1/', "backreference", 2, 7),
    ('start: "a"\nstart: "b"', "'start' is defined twice (first at line 1)", 2, 1),
    ('start: start "a"', "the grammar matches no text", 1, 1),
    ('start: "a" | loop\nloop: "(" loop ")"', "rule 'loop' matches no text", 2, 1),
    ('start: X\nX: y\ny: "a"', "terminal 'X' refers to rule 'y'", 2, 4),
    ('start: X\nX: "a" X', "terminal 'X' refers to itself", 2, 1),
    ('start: X\nX: "a"?', "terminal 'X' matches the empty text", 2, 1),
    ('start: "abc', "unterminated string literal", 1, 8),
    ('start: "a"\n%declare FOO', "directive '%declare' is not supported", 2, 1),
    ('start: X\n%import nowhere.X', "cannot find grammar module 'nowhere'", 2, 9),
    ('start: X\n%import common.NOPE -> X', "'NOPE' is not defined in grammar module 'common'", 2, 16),
    ('start "a"', "expected ':' after the name 'start'", 1, 7),
    ('start: /a/x', "unsupported regular-expression flag 'x'", 1, 11),
    # Sizes an automaton cannot hold: refused at the part to blame, not deep in the compiler.
    ('start: "a" ~ 100000', "repeat bound 100000 is above 4096", 1, 12),
    ('start: x ~ 5..100000\nx: "a" | "b"', "repeat bound 100000 is above 4096", 1, 10),
    ('start: A\nA: "a" ~ 0..5000', "repeat bound 5000 is above 4096", 2, 8),
    ('start: "a" ~ -1', "repeat bound -1 is negative", 1, 14),
    ('start: ("a" ~ 4000) ~ 4000', "repeat unrolls to 16,000,001 automaton states", 1, 21),
    ('start: A\nA: B ~ 4000\nB: "a" ~ 4000', "nested repeats multiplied", 2, 6),
    ('start: "x"\n    | "' + "a" * 200_000 + '"', "string literal of 200,000 bytes", 2, 7),
    ('start: X\nX: "' + "é" * 30_000 + '"', "string literal of 60,000 bytes", 2, 4),
    ('start: /' + "ab" * 30_000 + '/', "regular expression unrolls to 60,001 automaton states", 1, 8),
    ('start: X\nX: "' + "a" * 30_000 + '" "' + "b" * 30_000 + '"', "terminal 'X' unrolls to 60,001", 2, 1),
])
def test_grammar_errors(text, message, line, column):
    with pytest.raises(GrammarError) as info:
        structgen.compile_grammar(text, BYTES)
    err = info.value
    assert message in str(err)
    assert (err.line, err.column) == (line, column), str(err)
    lines = str(err).split("\n")
    assert lines[0].startswith(f"<grammar>:{line}:{column}: ")
    source_line = text.split("\n")[line - 1]
    caret = lines[2]
    if len(source_line) <= 160:
        assert lines[1] == "    " + source_line
        assert caret.startswith("    " + " " * (column - 1) + "^"), str(err)
    else:  # a window of the line around the column, the caret under the same character
        assert len(lines[1]) < 200 and lines[1][caret.index("^")] == source_line[column - 1]


def test_error_says_how_to_fix():
    with pytest.raises(GrammarError) as info:
        structgen.compile_grammar('start: expr\nexpr: expr "+" trem | term\nterm: "1"', BYTES)
    assert "Did you mean 'term'?" in str(info.value)
    with pytest.raises(GrammarError) as info:
        structgen.compile_grammar('start: start "a"', BYTES)
    assert "base case" in str(info.value)


# ---------------------------------------------------------------- left recursion, exhaustively

@pytest.mark.parametrize("text,alphabet,length", [
    ('start: start "+" "a" | "a"', "a+", 7),                                    # direct
    ('start: x\nx: y "b" | "a"\ny: x "c" | z\nz: x "d"', "abcd", 6),            # indirect cycle
    (HIDDEN, "xyzvw", 6),                                                       # hidden, nullable
    ('start: a\na: a a | "(" a? ")"', "()", 8),                                 # ambiguous
    ('start: x\nx: y | "a"\ny: x | "b"', "ab", 3),                              # unit cycle
    ('start: start start? "a" | "b"?', "ab", 6),                                # nullable start
])
def test_left_recursion_exhaustive(text, alphabet, length):
    compiled = structgen.compile_grammar(text, BYTES)
    parser = oracle(text)
    for n in range(length + 1):
        for chars in itertools.product(alphabet, repeat=n):
            s = "".join(chars)
            assert accepts(compiled, s) == lark_accepts(parser, s), s


# ---------------------------------------------------------------- lexer rules

@pytest.mark.parametrize("text,good,bad", [
    # keywords are not identifiers, in any case
    (SQLISH, ["select a from t", "SELECT a AS b FROM t WHERE a = 1", "select selects from t",
              "select *\nfrom t where x='y' and z = 2", "select a from t where a=1and b=2"],
     ["select select from t", "select a from FROM", "select a as from from t", "selecta from t",
      "select a fromt", "select a from t where a=bor c=d"]),
    # numbers and names do not split without a gap; punctuation needs none
    (ARITH, ["a1+2", "f(1)", "x*y", "ab + cd"], ["a 1", "1 2", "12a"]),
    # an ignored comment runs to the end of its line
    ('start: X+ "."\nX: /[a-z]+/\n%ignore /#[^\\n]*/\n%ignore " " | "\\n"', ["ab #c\nd.", "a#x\nb .", "a. #c"],
     ["ab #c .", "a #b.", "a. #c\n."]),
    # a lazy comment ends at its first closing mark
    ('start: X+\nX: /[a-z]+/\n%import common.C_COMMENT\n%ignore C_COMMENT\n%ignore " "',
     ["a /* b */ c", "a/**/b /* * / */"], ["a /* b */ c */", "a /* b"]),
    # comments (called rules) between whitespace (written into the callers), tokens and each other
    ('start: X+\nX: /[a-z]+/\n%ignore /\\/\\/[^\\n]*/\n%ignore /\\/\\*([^*]|\\*+[^*\\/])*\\*+\\//\n%ignore /[ \\n]+/',
     ["a//x b", "a /*c*/b", "a/*c*//*d*/ b//e", "a\n//x\n/*y*/\nb", "a//x\n//y\n b /**/"],
     ["/*x*/", "//a", "/*c*/ //b", "a//x\n/*", "a /*c*/ */b", "a//x\n/", "a /*/ b"]),
])
def test_lexer_rules(text, good, bad):
    compiled = structgen.compile_grammar(text, BYTES)
    parser = oracle(text)
    for s in good:
        assert accepts(compiled, s) and lark_accepts(parser, s), s
    for s in bad:
        assert not accepts(compiled, s) and not lark_accepts(parser, s), s


def test_punctuation_is_not_reserved():
    """Only word-like literals are keywords: a pattern terminal keeps punctuation that a literal
    also spells (Lark's lexer would retype ``=`` and refuse ``x=y;``; llguidance and xgrammar
    accept it, and so does structgen)."""
    text = ('start: (decl | expr) ";"\ndecl: "int" NAME "=" NAME\nexpr: NAME ASSIGN NAME\n'
            'ASSIGN: "=" | "+="\nNAME: /[a-z]+/\n%ignore " "')
    compiled = structgen.compile_grammar(text, BYTES)
    for s in ("x=y;", "x += y;", "int x = y;"):
        assert accepts(compiled, s), s
    assert not accepts(compiled, "int = y;") and not accepts(compiled, "int x y;")


C_SNIPPETS = [
    "int f(int a) { /* x */ return a * 2 + 1; } // end",
    "double m(double* v, long n) { double s = 0.0; for (long i = 0; i < n; ++i) s += v[i]; return s / n; }",
    "int main() { char c = '\\n'; x = (y << 2) ^ ~z; if (!p || q && r) a->b = c; else { break; } }",
]


def test_c_like_grammar():
    """The benchmark's large grammar: 12 left-recursive operator levels, keywords, comments.
    Lark's Earley parser with its dynamic lexer (no punctuation retyping) is the oracle."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "grammar_c_expr.lark"
    compiled = structgen.compile_grammar(path, BYTES)
    parser = lark.Lark(path.read_text(), parser="earley", lexer="dynamic")
    for s in C_SNIPPETS:
        assert accepts(compiled, s) and lark_accepts(parser, s), s
    for s in ("int int = 1;", "intx y;", "x = /* open", "return a +;", "a = b c;"):
        assert not accepts(compiled, s), s


def test_case_folding_stays_simple():
    """``"select"i`` folds case by the simple Unicode mapping; Python's re would also take a long
    s (U+017F) for ``s``, which no SQL engine reads as a keyword."""
    compiled = structgen.compile_grammar('start: "select"i', BYTES)
    assert accepts(compiled, "SeLeCt")
    assert not accepts(compiled, "\u017felect")


# ---------------------------------------------------------------- Hypothesis, Lark as the oracle

_CHARS = " x1(),+*-az'=[]:\n"


def _mutants(s: str, data) -> list[str]:
    out = []
    for _ in range(4):
        if not s:
            out.append(data.draw(st.sampled_from(_CHARS)))
            continue
        i = data.draw(st.integers(0, len(s) - 1))
        kind = data.draw(st.sampled_from("dirs"))
        c = data.draw(st.sampled_from(_CHARS))
        out.append({"d": s[:i] + s[i + 1:], "i": s[:i] + c + s[i:], "r": s[:i] + c + s[i + 1:],
                    "s": s[:i] + s[i + 1:i + 2] + s[i:i + 1] + s[i + 2:]}[kind])
    return out


@pytest.mark.parametrize("name", sorted(PROPERTY_GRAMMARS))
def test_agrees_with_lark(name):
    """Strings Lark's generator derives from the grammar, and near misses of each, are accepted
    exactly when Lark parses them."""
    text = PROPERTY_GRAMMARS[name]
    compiled = structgen.compile_grammar(text, BYTES)
    parser = oracle(text)
    strategy = st.one_of(from_lark(oracle(text), alphabet=st.characters(codec="ascii")),
                         st.sampled_from(SEEDS[name]))
    seen = {"valid": 0}

    @settings(max_examples=120, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy, st.data())
    def check(s, data):
        for x in [s] + _mutants(s, data):
            want = lark_accepts(parser, x)
            seen["valid"] += want
            assert accepts(compiled, x) == want, x

    check()
    assert seen["valid"] >= 20  # not all near misses


# ---------------------------------------------------------------- standalone regexes

@pytest.mark.parametrize("pattern,flags,good,bad", [
    (r"(?P<y>\d{4})-\d\d", {}, ["2024-01", "\u0661\u0662\u0663\u0664-12"], ["2024-1", "24-01"]),
    (r"[a-z]+(\s[a-z]+)*", {}, ["ab cd", "a\u00a0b"], ["ab  cd", "ab "]),
    (r"yes|no", {"ignore_case": True}, ["YES", "No"], ["yesno", "n"]),
    (r"a.c", {"dotall": True}, ["a\nc"], ["ac"]),
    (r"[^\W\d]\w*", {}, ["caf\u00e9_1"], ["1a"]),
    (r"\U0001F600+|\x41\u00e9", {}, ["\U0001F600\U0001F600", "A\u00e9"], [""]),
])
def test_regex(pattern, flags, good, bad):
    compiled = structgen.compile_regex(pattern, BYTES, **flags)
    re_flags = (re.I if flags.get("ignore_case") else 0) | (re.S if flags.get("dotall") else 0)
    for s in good:
        assert re.fullmatch(pattern, s, re_flags) and accepts(compiled, s), s
    for s in bad:
        assert not re.fullmatch(pattern, s, re_flags) and not accepts(compiled, s), s


@given(st.sampled_from([r"[a-f0-9]{2,4}(:[a-f0-9]{2,4})*", r"(\+|-)?\d+(\.\d*)?([eE]\d+)?",
                        r"[A-Z][a-z]*( [A-Z][a-z]*)?"]).flatmap(
    lambda p: st.tuples(st.just(p), st.one_of(st.from_regex(p, fullmatch=True), st.text(max_size=8)))))
@settings(max_examples=300, deadline=None)
def test_regex_agrees_with_re(case):
    pattern, s = case
    assert accepts(structgen.compile_regex(pattern, BYTES), s) == bool(re.fullmatch(pattern, s))


@pytest.mark.parametrize("pattern,message", [
    (r"a(?=b)", "lookahead"), (r"^a", "anchor '^'"), (r"a\b", "word boundary"),
    (r"(a", "never closed"), (r"(?P=x)", "backreference"),
])
def test_regex_errors(pattern, message):
    with pytest.raises(GrammarError, match=re.escape(message)):
        structgen.compile_regex(pattern, BYTES)


def test_a_module_imported_several_times_is_read_once(monkeypatch):
    """Three imports from common.lark read it once (reading it per import was most of the
    time to read a grammar), and what each import brings is still there."""
    from structgen.frontends.lark import reader

    loads = []
    real = reader._load

    def counting(text, name, *args, **kwargs):
        loads.append(name)
        return real(text, name, *args, **kwargs)

    monkeypatch.setattr(reader, "_load", counting)
    ir = reader.read_grammar('start: CNAME "=" NUMBER\n%import common.CNAME\n%import common.NUMBER\n'
                             '%import common.WS\n%ignore WS\n')
    assert len(loads) == 2 and loads[1].endswith("common.lark")
    assert {"CNAME", "NUMBER"} <= {name.split("#")[0] for name, _ in ir.rules}
