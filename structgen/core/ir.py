"""Grammar IR: frozen, hashable values that every frontend produces.

A :class:`Grammar` is a set of named rules; each rule body is an expression built from
literals, byte classes, sequences, alternatives, bounded repeats and references to other
rules. Being frozen dataclasses, IR values hash by content, which makes a grammar its own
compile-cache key, and ``str()`` prints a readable EBNF-like form.

Example
-------
>>> g = Grammar.of("root", root=Seq((Lit(b"["), Ref("digit"), Lit(b"]"))),
...                digit=ByteClass.of("0-9"))
>>> print(g)
root ::= "[" digit "]"
digit ::= [0-9]
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass
from typing import Callable, Sequence, Union

from structgen.errors import GrammarError

__all__ = ["seq", "alt", "substitute", "digest", "word_text", "written_fsm", "Lit", "ByteClass", "Seq", "Alt", "Repeat", "Ref", "Counted", "Unordered",
           "Fsm", "Expr", "Grammar", "Shape", "shape"]


@dataclass(frozen=True)
class Lit:
    """Exact bytes."""

    data: bytes

    def __str__(self) -> str:
        return _quote(self.data)


@dataclass(frozen=True)
class ByteClass:
    """One byte from a set, stored as sorted inclusive ranges ``((lo, hi), ...)``."""

    ranges: tuple[tuple[int, int], ...]

    @staticmethod
    def of(spec: str, *, negate: bool = False) -> "ByteClass":
        """Build from a regex-like spec of single bytes and ``a-z`` ranges (no escapes but ``\\``)."""
        chars: set[int] = set()
        i = 0
        raw = spec.encode("latin-1")
        while i < len(raw):
            if raw[i] == 0x5C and i + 1 < len(raw):  # backslash escapes the next byte
                i += 1
            lo = raw[i]
            if i + 2 < len(raw) and raw[i + 1] == ord("-"):
                chars.update(range(lo, raw[i + 2] + 1))
                i += 3
            else:
                chars.add(lo)
                i += 1
        if negate:
            chars = set(range(256)) - chars
        return ByteClass.from_bytes(chars)

    @staticmethod
    def from_bytes(values: "set[int] | frozenset[int]") -> "ByteClass":
        ranges: list[tuple[int, int]] = []
        for b in sorted(values):
            if ranges and ranges[-1][1] == b - 1:
                ranges[-1] = (ranges[-1][0], b)
            else:
                ranges.append((b, b))
        return ByteClass(tuple(ranges))

    def bytes(self) -> frozenset[int]:
        return frozenset(b for lo, hi in self.ranges for b in range(lo, hi + 1))

    def __str__(self) -> str:
        parts = []
        for lo, hi in self.ranges:
            parts.append(_byte(lo) if lo == hi else f"{_byte(lo)}-{_byte(hi)}")
        return "[" + "".join(parts) + "]"


@dataclass(frozen=True)
class Seq:
    items: tuple["Expr", ...]

    def __str__(self) -> str:
        return " ".join(_paren(x) for x in self.items) if self.items else '""'


@dataclass(frozen=True)
class Alt:
    items: tuple["Expr", ...]

    def __str__(self) -> str:
        return " | ".join(str(x) for x in self.items)


@dataclass(frozen=True)
class Repeat:
    """``item`` repeated ``min`` to ``max`` times (``max=None``: unbounded), unrolled into states.

    Use :class:`Counted` for large bounds: it keeps a counter beside the state instead.
    """

    item: "Expr"
    min: int = 0
    max: int | None = None

    def __str__(self) -> str:
        inner = _paren(self.item)
        if (self.min, self.max) == (0, None):
            return inner + "*"
        if (self.min, self.max) == (1, None):
            return inner + "+"
        if (self.min, self.max) == (0, 1):
            return inner + "?"
        return f"{inner}{{{self.min},{'' if self.max is None else self.max}}}"


@dataclass(frozen=True)
class Ref:
    """A call of another rule by name (the automaton keeps calls on a stack)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Counted:
    """A whole rule body: ``item`` repeated ``min``..``max`` times, counted beside the state.

    ``item`` must read at least one byte and be prefix-free as an automaton (no complete item
    continues into a longer one), as a JSON string character, a whitespace byte or an array's
    ``, element`` is. A regular item (no :class:`Ref`) gets one memoized mask per item state
    intersected with a per-count bitset; an item that calls rules (array elements) gets masks per
    item state and *count class*: counts a token cannot tell apart (far from both bounds) share
    one, so a bound of 10,000 costs no more states or masks than a bound of 10.

    ``exclude`` lists item sequences the rule must not match as a whole: each word is a tuple of
    positions, each position the set of spellings of one item (a JSON key ``"ab"`` is excluded in
    every spelling of ``a`` and of ``b``). The exclusion only bites when the rule ends, so inside
    the rule the shared per-state masks still apply.
    """

    item: "Expr"
    min: int = 0
    max: int | None = None
    exclude: frozenset[tuple[frozenset[bytes], ...]] = frozenset()

    def __str__(self) -> str:
        text = f"count({self.item}){{{self.min},{'' if self.max is None else self.max}}}"
        if self.exclude:
            words = sorted(b"".join(min(p) for p in w).decode("utf-8", "replace") for w in self.exclude)
            text += f" except {words}"
        return text


@dataclass(frozen=True)
class Unordered:
    """A whole rule body: one or more ``items`` separated by ``sep``, in any order, each *slot*
    written at most once (a JSON object's members, walked in whatever order the text has them).

    Each item is a rule call; which item was read is known from the rule called, so the set of
    slots written so far lives beside the parse state (a bitmask), as a :class:`Counted` rule's
    count does, and the stack machine explores only the sets actually reached. ``slots[i]`` is
    the slot item ``i`` fills (``-1``: none, the item may recur: an object's additional members);
    every slot must have an item that ``gives`` nothing. The rule may end only once every slot of
    the bitmask ``required`` is written, the bits ``gives`` of the items written cover ``full``
    (each bit at most once: members that ``not`` asks for), and ``min``..``max`` items were
    written; an item is offered only while the rule can still end after it, so no state is a
    dead end.
    """

    items: tuple[Ref, ...]
    slots: tuple[int, ...]
    sep: "Expr"
    required: int = 0
    min: int = 0
    max: int | None = None
    gives: tuple[int, ...] = ()  # empty: every item gives nothing
    full: int = 0

    def __str__(self) -> str:
        names = " | ".join(f"{r.name}@{s}" for r, s in zip(self.items, self.slots))
        text = f"unordered({names}; {self.sep}){{{self.min},{'' if self.max is None else self.max}}}"
        if self.required:
            text += f" required {self.required:#x}"
        if self.full:
            text += f" gives {self.gives} full {self.full:#x}"
        return text


@dataclass(frozen=True)
class Fsm:
    """A byte DFA given as data: state 0 starts, ``edges[q]`` lists ``(ByteClass, target)``.

    Frontends build these where a regular expression would be unwieldy: intersections
    (:func:`structgen.core.regular.intersect`) and counters such as ``multipleOf`` remainders.
    Every state must be able to reach an accepting one (:func:`structgen.core.regular.trim`).
    """

    edges: tuple[tuple[tuple[ByteClass, int], ...], ...]
    accept: frozenset[int]

    def __str__(self) -> str:
        import hashlib

        digest = hashlib.sha1(repr(self).encode()).hexdigest()[:8]
        return f"fsm<{len(self.edges)} states, {digest}>"


def seq(*items: "Expr") -> "Expr":
    """A sequence, flattened: nested sequences inlined, empties dropped, adjacent literals merged.

    Linear in the items: a run of adjacent literals is joined once, where it ends (merging
    pairwise copied the run so far at every literal: a 1M-character regex literal took 14 s)."""
    out: list[Expr] = []
    pieces: list[bytes] | None = None  # the run of literals ending ``out``, once it has two
    for x in items:
        for y in (x.items if isinstance(x, Seq) else (x,)):
            if isinstance(y, Lit):
                if not y.data:
                    continue
                if out and isinstance(out[-1], Lit):
                    if pieces is None:
                        pieces = [out[-1].data]
                    pieces.append(y.data)
                    continue
            elif pieces is not None:
                out[-1] = Lit(b"".join(pieces))
                pieces = None
            out.append(y)
    if pieces is not None:
        out[-1] = Lit(b"".join(pieces))
    return out[0] if len(out) == 1 else Seq(tuple(out))


def alt(*items: "Expr") -> "Expr":
    """An alternative; a single option stands for itself."""
    return items[0] if len(items) == 1 else Alt(tuple(items))


Expr = Union[Lit, ByteClass, Seq, Alt, Repeat, Ref, Counted, Unordered, Fsm]


def _inner(e: object) -> tuple:
    """The expressions directly inside ``e``."""
    if isinstance(e, (Seq, Alt)):
        return e.items
    if isinstance(e, (Repeat, Counted)):
        return (e.item,)
    return ()


def _hash_once(self) -> int:
    """The dataclass hash, computed once per node: rule bodies are dict keys in several caches,
    and a nested body would otherwise be re-hashed from its leaves at every lookup. Inner
    nodes are hashed first, bottom-up, so a deep expression (a 200-digit number range, 1,000
    nested groups) does not recurse."""
    got = self.__dict__.get("_hash")
    if got is None:
        order, todo = [], [self]
        while todo:
            node = todo.pop()
            order.append(node)
            todo.extend(x for x in _inner(node) if "_hash" not in x.__dict__ and not isinstance(x, (Lit, ByteClass, Ref)))
        for node in reversed(order):
            if "_hash" not in node.__dict__:
                object.__setattr__(node, "_hash", hash(tuple(getattr(node, f) for f in node.__dataclass_fields__)))
        got = self.__dict__["_hash"]
    return got


def _eq_iter(self, other: object) -> bool:
    """Structural equality without recursion (the dataclass ``__eq__`` recurses per level)."""
    todo = [(self, other)]
    while todo:
        a, b = todo.pop()
        if a is b:
            continue
        if type(a) is not type(b):
            return False
        if isinstance(a, (Seq, Alt)):
            if len(a.items) != len(b.items) or hash(a) != hash(b):
                return False
            todo.extend(zip(a.items, b.items))
        elif isinstance(a, (Repeat, Counted)):
            if (a.min, a.max, getattr(a, "exclude", None)) != (b.min, b.max, getattr(b, "exclude", None)):
                return False
            todo.append((a.item, b.item))
        elif a != b:  # Lit, ByteClass, Ref, Fsm: flat, their own dataclass equality
            return False
    return True


def digest(e: Expr) -> str:
    """A digest of ``e`` (20 hex digits), the same in every process: rule fingerprints and
    cache keys are made of it. Equal expressions have equal digests.

    >>> digest(Seq((Lit(b"a"), Ref("b")))) == digest(seq(Lit(b"a"), Ref("b")))
    True
    >>> digest(Alt((Lit(b"a"), Ref("b")))) == digest(Seq((Lit(b"a"), Ref("b"))))
    False
    """
    got = e.__dict__.get("_digest")  # kept on the node: a format's automaton recurs across schemas
    if got is None:
        got = hashlib.sha1(_text(e).encode()).hexdigest()[:20]
        object.__setattr__(e, "_digest", got)
    return got


def _key_part(e: Expr) -> bool:
    """Whether ``e`` is one spelling of a key's character: a literal, a rule, or a literal
    then a rule (a backslash, then the character's escape rule)."""
    return (type(e) is Lit or type(e) is Ref
            or type(e) is Seq and len(e.items) == 2 and type(e.items[0]) is Lit and type(e.items[1]) is Ref)


def _key_part_text(e: Expr) -> str:
    """:func:`_text` of a :func:`_key_part`, written directly."""
    if type(e) is Lit:
        return repr(e.data)
    if type(e) is Ref:
        return "@" + repr(e.name)
    return "S(" + repr(e.items[0].data) + "@" + repr(e.items[1].name) + ")"  # type: ignore[attr-defined]


def _text(e: Expr) -> str:
    """``e`` written out, each part self-delimiting (so the text is unambiguous): a flat writer,
    about twice as fast as the dataclass ``repr`` it replaces (a large schema's rule bodies are
    megabytes of text), and the same in every process (sets sorted)."""
    out: list[str] = []
    todo: list = [e]
    while todo:
        x = todo.pop()
        if type(x) is str:
            out.append(x)
        elif type(x) is Lit:
            out.append(repr(x.data))
        elif type(x) is Ref:
            out.append("@" + repr(x.name))
        elif type(x) is ByteClass:
            out.append("B" + repr(x.ranges))
        elif type(x) is Alt and len(x.items) <= 4 and all(map(_key_part, x.items)):
            # a character of a key in any spelling ("k" | "\\" esc_6b): one shared node per
            # character, in every key; its text is kept on it
            got = x.__dict__.get("_text")
            if got is None:
                got = "A(" + "".join(map(_key_part_text, x.items)) + ")"
                object.__setattr__(x, "_text", got)
            out.append(got)
        elif type(x) is Seq or type(x) is Alt:
            out.append("S(" if type(x) is Seq else "A(")
            todo.append(")")
            todo.extend(reversed(x.items))
        elif type(x) is Repeat:
            out.append(f"R{x.min},{x.max}(")
            todo += (")", x.item)
        elif type(x) is Counted:
            out.append(f"C{x.min},{x.max},[{','.join(sorted(map(word_text, x.exclude)))}](")
            todo += (")", x.item)
        elif type(x) is Unordered:
            out.append(f"U{x.slots},{x.required},{x.min},{x.max},{x.gives},{x.full}(")
            todo += (")", x.sep, "|")
            todo.extend(reversed(x.items))
        elif type(x) is Fsm:
            out.append("F" + _fsm_digest(x))
        else:
            raise TypeError(f"not an IR expression: {x!r}")
    return "".join(out)


def word_text(word: tuple[frozenset[bytes], ...]) -> str:
    """An excluded word of a :class:`Counted` written out, each position its sorted spellings:
    the same in every process (a frozenset's order changes from one to the next), so words
    sort by it.

    >>> word_text((frozenset({b"a", b"A"}), frozenset({b"b"})))
    "(['A', 'a'],['b'])"
    """
    parts = []
    for spellings in word:  # an object's excluded keys: thousands of characters, a few dozen sets
        got = _SPELLINGS.get(spellings)
        if got is None:
            if len(_SPELLINGS) > 65_536:
                _SPELLINGS.clear()
            got = _SPELLINGS[spellings] = repr(sorted(x.decode("latin-1") for x in spellings))
        parts.append(got)
    return "(" + ",".join(parts) + ")"


#: a position's spellings -> written out (:func:`word_text`)
_SPELLINGS: dict[frozenset[bytes], str] = {}


def _fsm_digest(fsm: Fsm) -> str:
    """An automaton's digest, kept on it: a pattern's automaton (thousands of edges) is in the
    digest of its rule's name and of every rule body around it."""
    got = fsm.__dict__.get("_fsm_digest")
    if got is None:
        got = _fsm_hash(_fsm_text(fsm).encode())
        object.__setattr__(fsm, "_fsm_digest", got)
    return got


def _fsm_hash(text: bytes) -> str:
    return hashlib.sha1(text).hexdigest()[:20]


def _fsm_text(fsm: Fsm) -> str:
    """What an automaton's digest is made of: rows by ``;``, edges by ``,``, each
    ``repr(ranges)>target``, then ``|`` and the sorted accepting states."""
    text: dict[int, str] = {}  # id(ByteClass) -> its ranges written out; rows share classes
    rows = []
    for row in fsm.edges:
        part = []
        for c, t in row:
            written = text.get(id(c))
            if written is None:
                written = text[id(c)] = repr(c.ranges)
            part.append(f"{written}>{t}")
        rows.append(",".join(part))
    return f"{';'.join(rows)}|{sorted(fsm.accept)}"


def written_fsm(edges: tuple, accept: frozenset[int], text: bytes) -> Fsm:
    """``Fsm(edges, accept)`` with its digest made from ``text``, which must be what
    :func:`_fsm_text` writes of it (the lexer's kernel writes it while building the rows;
    ``tests/test_dfa_kernel.py`` holds it to that).

    >>> fsm = written_fsm(((),), frozenset({0}), b"|[0]")
    >>> digest(fsm) == digest(Fsm(((),), frozenset({0})))
    True
    """
    fsm = Fsm(edges, accept)
    object.__setattr__(fsm, "_fsm_digest", _fsm_hash(text))
    return fsm


def _state_without_hash(self) -> dict:
    # String hashes differ between processes: a pickled one would break lookups after loading
    # (a kept text or shape is only left out: it is made again where needed).
    return {k: v for k, v in self.__dict__.items() if k not in _NOT_PICKLED}


_NOT_PICKLED = ("_hash", "_text", "_shape")


def _fsm_hash_once(self: Fsm) -> int:
    """An automaton's hash, from its digest: hashing its edges hashes every byte class anew,
    and the digest is made for the rule fingerprints anyway (the lexer's kernel writes it)."""
    return hash(_fsm_digest(self))


def _fsm_eq(self: Fsm, other: object) -> bool:
    """Equal automata have equal digests, and the digest stands for the automaton already (a
    rule's fingerprint, which keys the state facts every grammar on a vocabulary shares, is made
    of it): comparing edges compared every byte class in Python, a millisecond per SQL compile
    in the rule cache's lookups."""
    if type(other) is not Fsm:
        return NotImplemented
    return self is other or _fsm_digest(self) == _fsm_digest(other)


for _cls in (Seq, Alt, Repeat, Counted, Unordered, Fsm):
    _cls.__hash__ = _hash_once  # type: ignore[method-assign]
    _cls.__getstate__ = _state_without_hash  # type: ignore[attr-defined]
Fsm.__hash__ = _fsm_hash_once  # type: ignore[method-assign]
Fsm.__eq__ = _fsm_eq  # type: ignore[method-assign]
for _cls in (Seq, Alt, Repeat, Counted):
    _cls.__eq__ = _eq_iter  # type: ignore[method-assign]


@dataclass(frozen=True)
class Grammar:
    """Named rules and a start rule. Rule order is kept (it is part of the cache key).

    ``lookahead`` gives some rules a condition on what follows them, as a lexer has: when rule
    ``name`` completes, the next byte must not be one of ``forbidden`` (the end of the input is
    fine). Grammar files use it so that a token ends where a lexer would end it
    (:mod:`structgen.frontends.lark.lexer`).
    """

    rules: tuple[tuple[str, Expr], ...]
    start: str
    lookahead: tuple[tuple[str, frozenset[int]], ...] = ()

    @staticmethod
    def of(start: str, **rules: Expr) -> "Grammar":
        return Grammar(tuple(rules.items()), start).checked()

    def checked(self, shapes: "Sequence[Shape | None] | None" = None) -> "Grammar":
        """Raise :class:`GrammarError` for undefined references (the start rule's included) or
        duplicate rule names.

        ``shapes``: each rule's :func:`shape` where the caller has it (a compile keeps it with
        the rule's automaton), else None (computed here)."""
        names = [n for n, _ in self.rules]
        defined = set(names)
        if len(defined) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise GrammarError(f"rule '{dup}' is defined twice")
        if self.start not in defined:
            raise GrammarError(f"the start rule '{self.start}' is not defined")
        for i, (name, body) in enumerate(self.rules):
            known = shapes[i] if shapes is not None else None
            refs, misuse = known if known is not None else shape(body)
            undefined = next(((at, n) for at, n in refs if n not in defined), None)  # the first one
            if misuse is not None and (undefined is None or misuse[0] < undefined[0]):
                raise GrammarError(f"rule '{name}': {misuse[1]}")
            if undefined is not None:
                raise GrammarError(f"rule '{name}' refers to undefined rule '{undefined[1]}'")
        for name, forbidden in self.lookahead:
            if name not in defined:
                raise GrammarError(f"a lookahead names undefined rule '{name}'")
            if not forbidden:
                raise GrammarError(f"the lookahead of rule '{name}' forbids nothing")
        return self

    def __str__(self) -> str:
        lines = [f"{n} ::= {b}" for n, b in self.rules]
        lines += [f"{n} !> {ByteClass.from_bytes(set(f))}" for n, f in self.lookahead]
        return "\n".join(lines)


#: what :meth:`Grammar.checked` needs of a rule body (see :func:`shape`)
Shape = tuple[tuple[tuple[int, str], ...], "tuple[int, str] | None"]


def shape(body: Expr) -> Shape:
    """The rules ``body`` calls, each with the position (in :func:`nodes` order) of its first
    call, and the first misplaced counted or unordered node as (position, what is wrong), or
    None.

    >>> shape(Seq((Ref("a"), Lit(b"x"), Ref("b"), Ref("a"))))
    (((1, 'a'), (3, 'b')), None)
    """
    kept = getattr(body, "__dict__", None)  # kept on the node: a compile asks three or four times
    got = kept.get("_shape") if kept is not None else None
    if got is None:
        got = _shape(body)
        if kept is not None:
            object.__setattr__(body, "_shape", got)
    return got


def _shape(body: Expr) -> Shape:
    refs: dict[str, int] = {}
    misuse = None
    todo: list = [body]
    k = -1
    while todo:  # the order of :func:`nodes`, inlined (through it, a tenth of a large schema's compile)
        node = todo.pop()
        k += 1
        t = type(node)
        if t is Seq or t is Alt:
            todo.extend(reversed(node.items))
        elif t is Ref:
            refs.setdefault(node.name, k)
        elif t is Repeat:
            todo.append(node.item)
        elif t is Counted:
            if misuse is None and node is not body:
                misuse = (k, "a counted repeat must be a whole rule body")
            todo.append(node.item)
        elif t is Unordered:
            if misuse is None and node is not body:
                misuse = (k, "an unordered rule must be a whole rule body")
            elif misuse is None and (not node.items or len(node.slots) != len(node.items) or (
                    node.gives and len(node.gives) != len(node.items))):
                misuse = (k, "an unordered rule needs one slot (and gives, if any) per item")
            todo.append(node.sep)
            todo.extend(reversed(node.items))
    return tuple((k, n) for n, k in refs.items()), misuse


def substitute(e: Expr, replace: "Callable[[str], Expr | None]") -> Expr:
    """``e`` with each reference ``Ref(n)`` replaced by ``replace(n)`` (kept where that is None).

    >>> print(substitute(Seq((Ref("a"), Lit(b"+"), Ref("b"))), {"a": Lit(b"1")}.get))
    "1+" b
    """
    if isinstance(e, Ref):
        got = replace(e.name)
        return e if got is None else got
    if isinstance(e, (Seq, Alt)):  # a part where nothing changed is kept, with its kept hash
        items = [substitute(x, replace) for x in e.items]
        if all(map(operator.is_, items, e.items)):
            return e
        return seq(*items) if isinstance(e, Seq) else alt(*items)
    if isinstance(e, Repeat):
        item = substitute(e.item, replace)
        return e if item is e.item else Repeat(item, e.min, e.max)
    if isinstance(e, Counted):
        return Counted(substitute(e.item, replace), e.min, e.max, e.exclude)
    if isinstance(e, Unordered):  # items stay calls: renamed when replaced by a call
        items = tuple(got if isinstance(got := substitute(r, replace), Ref) else r for r in e.items)
        return Unordered(items, e.slots, substitute(e.sep, replace), e.required, e.min, e.max, e.gives, e.full)
    return e  # Lit, ByteClass, Fsm: no references


def nodes(e: Expr):
    """``e`` and every expression inside it, depth first (an unordered rule's items, which are
    calls, before its separator).

    >>> [str(x) for x in nodes(Seq((Ref("a"), Alt((Lit(b"x"), Ref("b"))))))]
    ['a ("x" | b)', 'a', '"x" | b', '"x"', 'b']
    """
    todo = [e]  # a stack, not nested generators: every schema compile walks all its IR
    while todo:
        e = todo.pop()
        yield e
        if isinstance(e, (Seq, Alt)):
            todo.extend(reversed(e.items))
        elif isinstance(e, (Repeat, Counted)):
            todo.append(e.item)
        elif isinstance(e, Unordered):
            todo.append(e.sep)
            todo.extend(reversed(e.items))


def _paren(e: Expr) -> str:
    return f"({e})" if isinstance(e, (Alt, Seq)) and len(e.items) > 1 else str(e)


def _byte(b: int) -> str:
    c = chr(b)
    if c in '\\]-^"':
        return "\\" + c
    return c if 0x20 < b < 0x7F else f"\\x{b:02x}"


def _quote(data: bytes) -> str:
    out = []
    for b in data:
        c = chr(b)
        out.append("\\" + c if c in '\\"' else c if 0x20 <= b < 0x7F else f"\\x{b:02x}")
    return '"' + "".join(out) + '"'
