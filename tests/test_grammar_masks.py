"""Token masks of grammar files on real tokenizers, against the brute-force oracle.

Every position of each walk compares the mask with every vocabulary token walked byte by byte
(tests/oracle.py), and the forced text with a byte-by-byte search. The texts cross terminal
boundaries inside tokens (``) AS``, ``"}]``), keywords next to identifiers, ignored text and
comments, so the lexer's lookahead guards are on the path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import structgen
from oracle import check_walk

GRAMMARS = Path(__file__).resolve().parent.parent / "structgen" / "grammars"

SQLISH = r'''
start: "select"i cols "from"i NAME ("where"i cond)? ";"?
cols: col ("," col)* | "*"
col: NAME ("as"i NAME)? | "count" "(" "*" ")" ("as"i NAME)?
cond: NAME ("=" | "<" | "<=") (NAME | NUMBER | STRING) (("and"i | "or"i) cond)?
NAME: /[a-z_][a-z0-9_]*/i
NUMBER: /[0-9]+/
STRING: /'[^']*'/
%ignore /[ \t\n]+/
%ignore /--[^\n]*/
'''

#: line and block comments are called rules, whitespace is written into the callers: comments
#: next to tokens, to whitespace, to each other and to an operator that starts like them
C_LIKE = r'''
start: func+
func: TYPE NAME "(" (TYPE NAME ("," TYPE NAME)*)? ")" "{" stmt* "}"
stmt: "return" expr ";" | NAME "=" expr ";"
expr: atom (OP atom)*
atom: NAME | NUMBER | "(" expr ")"
TYPE: "int" | "void"
OP: "+" | "-" | "*" | "/"
NAME: /[a-zA-Z_][a-zA-Z0-9_]*/
NUMBER: /[0-9]+/
%ignore /[ \t\n]+/
%ignore /\/\/[^\n]*/
%ignore /\/\*([^*]|\*+[^*\/])*\*+\//
'''

CASES = [
    (C_LIKE, "int f(int a) { // c\n  return a/*x*//2; /* y */}\nvoid g() {/**/b = (1)//z\n;}// end"),
    (GRAMMARS / "json.lark", '{"name": "Ada", "tags": ["x", {"k": [1, 2.5e-3]}], "ok": true}'),
    (GRAMMARS / "json.lark", '[{"a":[]},{"b":{}}]'),
    (GRAMMARS / "arithmetic.lark", "max(a, b)*-(c+10)/2^x - f()"),
    (SQLISH, "SELECT name AS n, count(*) AS c FROM people WHERE age<=30 and city = 'Paris';"),
    (SQLISH, "select *\nfrom t -- all of it\nwhere a<b or x='y'"),
]


@pytest.mark.parametrize("tokenizer_name", ["smollm2_tokenizer", "gemma_tokenizer"])
@pytest.mark.parametrize("grammar,text", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_masks_match_brute_force(request, tokenizer_name, grammar, text):
    tokenizer = request.getfixturevalue(tokenizer_name)
    compiled = structgen.compile_grammar(grammar, tokenizer)
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert check_walk(compiled.matcher(), list(ids)) == len(ids) + 1


def test_a_rules_crossing_reads_are_shared_across_grammars(request, monkeypatch):
    # What the tokens crossing out of a rule state read after it is a function of the state's
    # fingerprint (its rule and all it calls), the bytes that may follow the rule and the
    # remainders: a second grammar with the same rule under other parents takes them from the
    # vocabulary's cache, and its masks stay exact.
    from structgen.engine.masks import MaskBuilder

    tokenizer = request.getfixturevalue("smollm2_tokenizer")
    walked: list[str] = []
    walk = MaskBuilder._walk_isolated_reads

    def counted(self, keys, iso, follow):
        walked.append(self.sm.rules[self.sm.frames[iso][0]].name)
        return walk(self, keys, iso, follow)

    monkeypatch.setattr(MaskBuilder, "_walk_isolated_reads", counted)
    rules = 'shared_reads_pair: NAME "=" NUMBER ("," NUMBER)*\nNAME: /[a-z]+/\nNUMBER: /[0-9]+/\n'
    texts = {'start: "(" shared_reads_pair ")"\n': "(abc=12,7)",
             'start: "[" shared_reads_pair ")" | "{" shared_reads_pair ")"\n': "{abc=12,7)"}
    per_grammar = []
    for head, text in texts.items():
        walked.clear()
        compiled = structgen.compile_grammar(head + rules, tokenizer)
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert check_walk(compiled.matcher(), list(ids)) == len(ids) + 1
        per_grammar.append(list(walked))
    assert "shared_reads_pair" in per_grammar[0] and "shared_reads_pair" not in per_grammar[1]
