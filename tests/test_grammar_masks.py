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

CASES = [
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
