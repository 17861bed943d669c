"""The EBNF reader (xgrammar's EBNF, llama.cpp's GBNF): the format, UTF-8 characters, lookaheads,
errors with line:column, xgrammar's documented examples and llama.cpp's own grammars
(tests/fixtures/gbnf, see SOURCES.md there).

Texts run on a byte-level vocabulary (a token per byte): a text is accepted when every byte
advances the matcher and the end is legal there.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.core.budget import compile_budget
from structgen.engine.compiled import CompiledGrammar
from structgen.engine.vocab import Vocabulary
from structgen.errors import BudgetExceededError, GrammarError
from structgen.frontends.ebnf import read_ebnf

BYTES = Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])
GBNF = Path(__file__).resolve().parent / "fixtures" / "gbnf"


@functools.lru_cache(maxsize=None)
def compiled(grammar: str, start: str = "root") -> CompiledGrammar:
    return CompiledGrammar(read_ebnf(grammar, start=start), BYTES)


def accepts(grammar: str, text: "str | bytes", start: str = "root") -> bool:
    m = compiled(grammar, start).matcher()
    data = text.encode("utf-8") if isinstance(text, str) else text
    return all(m.advance(b) for b in data) and m.can_end()


def table(rows: list[tuple[str, list, list]]) -> list:
    """(grammar, accepted texts, refused texts) rows as (grammar, text, expected) cases."""
    return [pytest.param(g, t, ok, id=f"{g[:40]!r}-{t!r}"[:90])
            for g, good, bad in rows for ok, texts in ((True, good), (False, bad)) for t in texts]


# ---------------------------------------------------------------- the format

FORMAT = [
    # literals and their escapes
    ('root ::= "abc"', ["abc"], ["ab", "abcd", ""]),
    (r'root ::= "a\n\t\r\\\"b"', ['a\n\t\r\\"b'], ["a"]),
    (r'root ::= "\x41\u00e9\U0001F600"', ["Aé😀"], ["A"]),
    (r'root ::= "\x9|"', ["\t|"], ["\t", "x9|"]),
    (r"""root ::= "\/\'\?\e\0\[\]\-\b\f\a\v" """, ["/'?\x1b\x00[]-\b\f\a\v"], []),
    ('root ::= ""', [""], ["a"]),
    ('root ::= "中文"', ["中文"], ["中"]),
    # classes are sets of UTF-8 characters
    ("root ::= [a-z0-9_]+", ["a_1", "zz"], ["A", "", "a-"]),
    (r'root ::= [^"\\]*', ["é€😀 x\n", ""], ['a"', "a\\", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\x80"]),
    (r"root ::= [\x00-\x1F\-\]]", ["\x05", "-", "]"], ["a", "\x20"]),
    ("root ::= [-a]", ["-", "a"], ["b"]),
    ("root ::= [a-]", ["-", "a"], ["b"]),
    ("root ::= [--/]", ["-", ".", "/"], [","]),
    ("root ::= [^]", ["\n", "é", "😀"], ["", "ab", b"\x80"]),
    (r"root ::= [\u4e00-\u9fff]", ["中"], ["a", "ぁ"]),
    (r"root ::= [\^\$\.\*\+\?\(\)\{\}\|\/\[]+", ["^$.*+?(){}|/["], ["a"]),
    ("root ::= [ぁ-ゟ]+", ["ひらがな"], ["カ"]),
    ("root ::= .", ["\n", "😀", "a"], [b"\x80", b"\xff", "ab", ""]),
    # groups, alternatives, repeats
    ('root ::= ("a" | "b") "c"', ["ac", "bc"], ["c", "abc"]),
    ('root ::= "a"* "b"+ "c"?', ["b", "aabbc"], ["ac", "bcc"]),
    ('root ::= "a"{3}', ["aaa"], ["aa", "aaaa"]),
    ('root ::= "a"{2,}', ["aa", "aaaaa"], ["a"]),
    ('root ::= "a"{1,2}', ["a", "aa"], ["", "aaa"]),
    ('root ::= "a"{ 1 , 2 }', ["aa"], ["aaa"]),
    ('root ::= "a"{1, -1}', ["aaaa"], [""]),
    ('root ::= "x" "a"{0}', ["x"], ["xa"]),
    ('root ::= "a"+?', ["", "aa"], ["b"]),
    ('root ::= ( ) "a"', ["a"], [""]),
    ('root ::= | "a"', ["", "a"], ["aa"]),
    # rules span lines; comments
    ('root ::= (\n  "a"\n  | "b"\n)\n', ["a", "b"], ["ab"]),
    ('root ::=\n  "a" "b"\n\nother ::= "c"\n', ["ab"], ["c"]),
    ('root ::= "a" # a comment with "quotes" and [brackets\n  "b" # more\n# a whole line\n', ["ab"], ["a"]),
    ('root ::= "a"\r\n  | b\r\nb ::= "#"\r\n', ["a", "#"], ["b"]),
    # names, references, recursion
    ('root ::= check-mate rule_1 a.b 2x\ncheck-mate ::= "#"\nrule_1 ::= "1"\na.b ::= "."\n2x ::= "x"', ["#1.x"], []),
    ('root ::= a .\na ::= "a"', ["ab", "a."], ["a"]),
    ('root ::= "(" root ")" | ""', ["", "((()))"], ["(()", ")("]),
    ('root ::= root "a" | "a"', ["a", "aaa"], ["", "b"]),
    ('root ::= expr\nexpr ::= term | expr "+" term\nterm ::= [0-9] | "(" expr ")"', ["1+(2+3)", "7"], ["1+", "()"]),
    # a loop over a rule that may match nothing (the loop becomes a rule: the runtime cannot call
    # a rule again without reading a byte)
    ('root ::= a*\na ::= "" | "b"', ["", "bb"], ["c"]),
    ('root ::= (ws item)+ "."\nws ::= " "*\nitem ::= [a-z]*', [".", " a b.", "ab  c."], ["a. "]),
    ('root ::= a+ "x"\na ::= b\nb ::= "" | "b" a', ["x", "bx", "bbbx"], ["xb"]),
    # lookahead assertions (xgrammar), one character a byte decides: honoured
    ('root ::= a [a-z0-9]*\na ::= "x"+ (= [0-9 ])', ["xx1", "xx", "x0y"], ["xxb", "xyz"]),
    ('root ::= a [y-z]*\na ::= "x"+ (=[^y])', ["xxz", "x"], ["xy", "xxy"]),
    ('root ::= a .\na ::= "x" (= [^,])', ["xé", "xa"], ["x,"]),
    ('root ::= a "b"\na ::= (("a")) (=(("b")))', ["ab"], ["a"]),
    ('root ::= a "b"\na ::= "a" (= .)', ["ab"], ["a"]),
]


@pytest.mark.parametrize("grammar, text, ok", table(FORMAT))
def test_format(grammar: str, text: "str | bytes", ok: bool) -> None:
    assert accepts(grammar, text) is ok


def test_result_is_checked_ir_of_the_rules_reached() -> None:
    g = read_ebnf('root ::= "[" b "]"\nunused ::= "u"\nb ::= [0-9]+')
    assert [name for name, _ in g.rules] == ["root", "b"]
    assert str(g) == 'root ::= "[" b "]"\nb ::= [0-9]+'
    assert g.lookahead == ()
    assert read_ebnf('root ::= "a"\nexpr ::= "b"', start="expr").start == "expr"
    assert accepts('root ::= "a"\nexpr ::= "b" | root', "b", start="expr")
    assert str(read_ebnf('root ::= a\na ::= "x" (= [,}])')).endswith("a !> [\\x00-+\\--|~-\\xff]")


def test_deep_groups() -> None:
    assert accepts("root ::= " + "(" * 1_500 + '"a"' + ")" * 1_500, "a")
    with pytest.raises(GrammarError, match="nest more than 2000 deep"):
        read_ebnf("root ::= " + "(" * 2_001 + '"a"' + ")" * 2_001)


def test_budget_is_checked_before_reading() -> None:
    with compile_budget(1_000):
        with pytest.raises(BudgetExceededError, match="reading grammar text of 2,009 characters"):
            read_ebnf("root ::= " + '"a" ' * 500)


# ---------------------------------------------------------------- errors

ERRORS = [
    ("root ::= foo", "undefined rule 'foo'", 1, 10),
    ('root ::= "a" | fo\nfoo ::= "x"', "undefined rule 'fo'", 1, 16),
    ('root ::= [a-z]\n\nfoo ::= bar', "undefined rule 'bar'", 3, 9),
    ('rot ::= "a"', "no start rule 'root'", 1, 1),
    ("", "no start rule 'root'", 1, 1),
    (r'root ::= "a\q"', "unknown escape '\\q'", 1, 12),
    (r"root ::= [\d]", "shorthand class '\\d' is not supported", 1, 11),
    (r'root ::= "\x41B"', "'\\x41B' is ambiguous", 1, 11),
    (r'root ::= "\u12"', "'\\u' needs 4 hex digits", 1, 11),
    (r'root ::= "\U0011FFFF"', "past U+10FFFF", 1, 11),
    (r'root ::= "\uD800"', "U+D800 is a surrogate", 1, 11),
    ('root ::= ("a"', "unbalanced '(': no matching ')'", 1, 10),
    ('root ::= "a")', "unbalanced ')': it closes no group", 1, 13),
    ('root ::= ("a"\n  | "b"\nnext ::= "c"', "unbalanced '(': no matching ')'", 1, 10),
    ("root ::= [a-z", "unterminated character class", 1, 10),
    ('root ::= "abc\n"', "unterminated string literal", 1, 10),
    ("root ::= [z-a]", "range z-a is out of order", 1, 11),
    ("root ::= []", "empty character class", 1, 10),
    (r"root ::= [^\x00-\U0010FFFF]", "matches no character", 1, 10),
    ('root ::= "a"{3,1}', "bounds out of order", 1, 13),
    ('root ::= "a"{,3}', "a repeat needs its lower bound", 1, 13),
    ('root ::= "a"{x}', "malformed repeat", 1, 13),
    ('root ::= "a"{5000}', "repeat {5000} is above 4096", 1, 13),
    ('root ::= "a"{0,' + "9" * 5000 + "}", "is above 4096", 1, 13),
    ('root ::= (("ab"){1000}){1000}', "unrolls to 2,000,001 automaton states", 1, 24),
    ('root ::= * "a"', "'*' has nothing to repeat", 1, 10),
    ('root ::= "a"\nroot ::= "b"', "rule 'root' is defined twice (first at line 1)", 2, 1),
    ('root ::= "a" b ::= "c"', "rule name 'b' must be the first thing on its line", 1, 14),
    ('::= "a"', "'::=' needs a rule name before it", 1, 1),
    ('"a"\nroot ::= "b"', "expected a rule definition", 1, 1),
    ('root ::= "a" ;', "unexpected character ';'", 1, 14),
    ("root ::= <[1000]>", "token matches", 1, 10),
    ("root ::= !<think>", "token matches", 1, 10),
    ('root ::= Regex("[0-9]+")', "macro Regex(...) is not supported", 1, 10),
    ('root ::= TagDispatch(("<tool>", tool))\ntool ::= "x"', "macro TagDispatch(...)", 1, 10),
    ('root[max_tokens=3] ::= "a"', "rule options '[max_tokens=3]' are not supported", 1, 5),
    ('root ::= x\nx[capture, lazy] ::= "a"', "rule options", 2, 2),
    ('root ::= a "bc"\na ::= "a" (= "b" "c")', "this lookahead assertion cannot be honoured", 2, 11),
    ('root ::= a "é"\na ::= "a" (= "é")', "this lookahead assertion cannot be honoured", 2, 11),
    ('root ::= a "b"\na ::= "a" (= [a-z]', "unbalanced '(=': no matching ')'", 2, 11),
    ('root ::= "a" (= "b") "c"', "after the lookahead assertion", 1, 22),
    ('root ::= a\na ::= a "x" | "y" (= [a-z])', "lookahead assertion in a left-recursive grammar", 2, 1),
    ('root ::= "a", "b"', "expected an element, found ','", 1, 13),
    ('root ::= a\na ::= a "x"', "the grammar matches no text", 1, 1),
    ('root ::= "x" | a\na ::= "(" a ")"', "rule 'a' matches no text", 2, 1),
]


@pytest.mark.parametrize("grammar, message, line, column", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_errors_name_line_and_column(grammar: str, message: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError) as info:
        read_ebnf(grammar, name="g.gbnf")
    err = info.value
    assert message in str(err)
    assert (err.line, err.column) == (line, column), str(err)  # type: ignore[attr-defined]
    first, shown, caret, *hint = str(err).split("\n")
    assert first.startswith(f"g.gbnf:{line}:{column}: ")
    assert caret.strip().startswith("^") and hint, str(err)  # the line, a caret under the problem, a hint
    assert isinstance(err, ValueError)


def test_undefined_rule_hint_names_the_nearest() -> None:
    with pytest.raises(GrammarError, match="Did you mean 'value'"):
        read_ebnf('root ::= valeu\nvalue ::= "v"')


# ---------------------------------------------------------------- xgrammar's documented examples
# docs/defining_structures/ebnf_grammar.md in mlc-ai/xgrammar

XGRAMMAR_EXPR = '''root ::= expr ("=" expr)*
expr ::= term ([-+*/] term)*
term ::= num | "(" expr ")"
num  ::= [0-9]+
'''
XGRAMMAR_STRING = r'''root   ::= "\"" char* "\""
char   ::= [^"\\\x00-\x1f] | "\\" escape
escape ::= ["\\/bfnrt] | "u" [0-9A-Fa-f]{4}
'''
XGRAMMAR_JSON = r'''root ::= basic_array | basic_object
basic_any ::= basic_number | basic_string | basic_boolean | basic_null | basic_array | basic_object
basic_integer ::= ("0" | "-"? [1-9] [0-9]*) ".0"?
basic_number ::= ("0" | "-"? [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?
basic_string ::= (([\"] basic_string_1 [\"]))
basic_string_1 ::= "" | [^"\\\x00-\x1F] basic_string_1 | "\\" escape basic_string_1
escape ::= ["\\/bfnrt] | "u" [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9] [A-Fa-f0-9]
basic_boolean ::= "true" | "false"
basic_null ::= "null"
basic_array ::= "[" ("" | ws basic_any (ws "," ws basic_any)*) ws "]"
basic_object ::= "{" ("" | ws basic_string ws ":" ws basic_any ( ws "," ws basic_string ws ":" ws basic_any)*) ws "}"
ws ::= [ \n\t]*
'''

XGRAMMAR = [
    (XGRAMMAR_EXPR, ["1+2", "(3*4)-5=7", "2=2=2"], ["1+", "=1", "(1", "1=="]),
    ('root ::= "a" |\n         "b" |\n         "c"', ["a", "b", "c"], ["ab"]),
    ('root ::= root "a" | "a"     # left recursion: accepts "a", "aa", "aaa", ...', ["a", "aa", "aaa"], [""]),
    ('root ::= sign [0-9]\nsign ::= "" | "+" | "-"', ["1", "+1", "-1"], ["+-1"]),
    ('root  ::= value ("," value)*\nvalue ::= [0-9]+', ["1,22,333"], ["1,", ",1"]),
    ('root       ::= identifier ("," identifier){0,4}\nidentifier ::= [a-zA-Z_] [a-zA-Z0-9_]*',
     ["a", "a,b,c,d,e", "_x1,y"], ["a,b,c,d,e,f", "1a"]),
    (XGRAMMAR_STRING, ['"hello"', r'"line1\nline2"', r'"\u00e9"', '"é"'], ['"abc', r'"\q"', '"a\nb"', r'"\u00e"']),
    (XGRAMMAR_JSON, ['{"a": [1, 2.5e3, "x\\n", true, null, {}]}', "[ ]", "[]", '{"é": -5.5E+2}'],
     ['{"a" 1}', "1", '{"a": 01}', "[1,]", "[-0]"]),
    ("root ::= [^]*", ["", "any\ntext é"], [b"\xff"]),
]


@pytest.mark.parametrize("grammar, text, ok", table(XGRAMMAR))
def test_xgrammar_documented_examples(grammar: str, text: "str | bytes", ok: bool) -> None:
    assert accepts(grammar, text) is ok


# ---------------------------------------------------------------- llama.cpp's grammars

def gbnf(name: str) -> str:
    return (GBNF / name).read_text(encoding="utf-8")


DOCUMENTS = [
    {"name": "structgen", "version": "0.1.0", "private": True, "dependencies": {"numpy": ">=1.26", "lark": "^1.1"},
     "keywords": ["grammar", "json", "llm"], "license": None},
    {"type": "Feature", "geometry": {"type": "Point", "coordinates": [-122.4194, 37.7749]},
     "properties": {"name": "San Francisco", "population": 815201, "tags": []}},
    {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                      "arguments": "{\"city\": \"Zürich\", \"unit\": \"celsius\"}"}},
    {"text": "tab\there, quote \" backslash \\ newline\n, bell \u0007 and emoji 😀", "ratio": 1e-07, "n": -0},
    {"matrix": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "empty": {}, "nested": {"a": {"b": {"c": [True, False, None]}}}},
]
JSON_TEXTS = [json.dumps(d) for d in DOCUMENTS] + [json.dumps(d, indent=2) for d in DOCUMENTS] + \
    [json.dumps(d, separators=(",", ":"), ensure_ascii=False) for d in DOCUMENTS] + \
    ['{ "a" : 1 , "b" : [ ] }', '{\n\t"a": "\\u00E9\\r"}']
BROKEN_JSON = ['{"a": 1,}', "{'a': 1}", '{a: 1}', '{"a": 1', '{"a": "x\ny"}', '{"a": 01}', '{"a": "\\x41"}',
               '{"a": tru}', '{"a": 1}}', '{"a": 1} x', '{"a": [1, 2}', '{"a": .5}', '{"a": 1.}', '{"a": -}', ""]
#: valid JSON that json.gbnf, as written, does not accept: the grammar is read as it is
JSON_OUTSIDE_JSON_GBNF = ["[1, 2]", '"top-level string"', '{"a": "\\/"}', '{"a": 1e10}', '{"a": 12345678901234567}',
                          '{"a": "\x7f"}']


@pytest.mark.parametrize("text", JSON_TEXTS, ids=range(len(JSON_TEXTS)))
def test_json_gbnf_accepts_json(text: str) -> None:
    json.loads(text)
    assert accepts(gbnf("json.gbnf"), text)


@pytest.mark.parametrize("text", BROKEN_JSON)
def test_json_gbnf_refuses_broken_json(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert not accepts(gbnf("json.gbnf"), text)


@pytest.mark.parametrize("text", JSON_OUTSIDE_JSON_GBNF)
def test_json_gbnf_is_read_as_written(text: str) -> None:
    json.loads(text)
    assert not accepts(gbnf("json.gbnf"), text)


GBNF_FILES = [
    ("json_arr.gbnf", ['[\n{"a": 1},\n"x",\n[true, null]]', "[\n]"], ["[1]", '[\n1] ']),
    ("chess.gbnf", ["1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n", "1. O-O O-O-O\n12. exd5 Qxd5+\n", "1. d4 d5\n2. c8=Q Kxe2#\n"],
     ["1. e4 e5\n", "1. e9 e5\n2. d4 d5\n", "1. e4 e5\n100. d4 d5\n"]),
    ("list.gbnf", ["- milk\n- eggs\n", "- crème brûlée ☕\n"],
     ["", "- \n", "- a\u2028b\n", "- a\u0085b\n", "* a\n"]),
    ("english.gbnf", ["Hello, world!", "a[1]{x}~b_c\\d^e", "two\nlines\tand tabs"], ["Hello  world", "héllo", " a"]),
    ("japanese.gbnf", ["こんにちは 世界", "カタカナ、漢字"], ["hello", "こんにちは  世界"]),
]


@pytest.mark.parametrize("name, text, ok", [pytest.param(n, t, ok, id=f"{n}-{t!r}"[:60]) for n, good, bad in GBNF_FILES
                                            for ok, texts in ((True, good), (False, bad)) for t in texts])
def test_llama_cpp_grammars(name: str, text: str, ok: bool) -> None:
    assert accepts(gbnf(name), text) is ok


def test_llama_cpp_grammars_keep_their_rule_names() -> None:
    english = read_ebnf(gbnf("english.gbnf"))
    assert [n for n, _ in english.rules] == ["root", "en-char", "letter", "digit", "punctuation"]
    assert {n for n, _ in read_ebnf(gbnf("json.gbnf"), name="json.gbnf").rules} == \
        {"root", "value", "object", "array", "string", "number", "ws"}


#: json.gbnf's strings hold no raw DEL (json.dumps writes it raw with ensure_ascii=False)
TEXTS = st.text(st.characters(codec="utf-8", exclude_characters="\x7f"), max_size=8)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**15, 10**15) | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(TEXTS, JSON_VALUES, max_size=4), st.sampled_from([None, 2]), st.booleans())
def test_json_gbnf_accepts_what_json_dumps_writes(doc: dict, indent: "int | None", ascii_only: bool) -> None:
    assert accepts(gbnf("json.gbnf"), json.dumps(doc, indent=indent, ensure_ascii=ascii_only))
