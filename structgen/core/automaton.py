"""Rule automata: each IR rule becomes a small byte-level DFA whose edges read bytes or call rules.

A rule body is compiled (Thompson construction, then subset construction) into a DFA over the
alphabet *bytes + calls*: a call edge ``(callee, return_state)`` means "run rule ``callee``,
then continue at ``return_state``". The stack machine in :mod:`structgen.engine.pda` runs these
calls on a stack, which is what makes recursion and shared sub-rules free.

A :class:`~structgen.core.ir.Counted` rule compiles to the DFA of its *item* plus ``min``/``max``;
its count lives beside the state at run time. An :class:`~structgen.core.ir.Unordered` rule
compiles to the DFA of ``item (sep item)*`` whose item edges are calls; which item was read is
the rule called, and the slots written live beside the state at run time
(:class:`~structgen.core.unordered.Slots` says what may come next).

:func:`build_automaton` compiles every rule (each body once per process: :class:`_Cached`),
then derives the facts of the whole grammar the mask builder needs
(:mod:`structgen.core.grammar_facts`): dead parts pruned, ``nullable`` rules, left recursion
refused, the ``follow`` bytes of each rule and a content fingerprint of each rule and
everything it calls.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from structgen.core.budget import affordable, charge, room
from structgen.core.dfa_kernel import kernel, kernel_available
from structgen.core.grammar_facts import check_left_recursion, fingerprints, first_and_follow, nullable, prune_dead
from structgen.core.liveness import solo_live_states
from structgen.core.memo import Recent
from structgen.errors import CompileError
from structgen.core.ir import (Alt, ByteClass, Counted, Expr, Fsm, Grammar, Lit, Ref, Repeat, Seq, Shape, Unordered, alt,
                               digest, seq, shape, word_text)
from structgen.core.unordered import Slots

__all__ = ["RuleAutomaton", "GrammarAutomaton", "UnorderedItems", "build_automaton", "regular_dfa"]

#: Above this many unrolled copies a Repeat is rejected: use Counted for large bounds.
MAX_UNROLL = 4096
#: A rule whose DFA exceeds this many states is refused (subset construction can blow up, e.g.
#: an unanchored ``a.{20}``) with a CompileError instead of exhausting time and memory.
MAX_DFA_STATES = 100_000


@dataclass
class Guard:
    """Excluded item sequences of a counted rule, as a trie over item spellings.

    A guard state is ``(node, partial)``: the trie node of the items read so far and the bytes of
    the item being read; ``None`` once the items left every excluded word (then it stays free).
    """

    children: list[dict[bytes, int]]
    complete: list[bool]
    #: per node, the prefixes of its children's spellings; None until a step reaches the node
    #: (most nodes never are: a schema's excluded keys are built ahead, a few of them written)
    prefixes: "list[frozenset[bytes] | None]" = field(compare=False, repr=False)

    @staticmethod
    def build(words: "frozenset[tuple[frozenset[bytes], ...]]") -> "Guard":
        children: list[dict[bytes, int]] = [{}]
        complete = [False]
        for word in sorted(words, key=word_text):  # the same numbering in every process
            node = 0
            for spellings in word:
                # Spellings of one position share a child: they are the same character.
                child = next((children[node][s] for s in spellings if s in children[node]), None)
                if child is None:
                    child = len(children)
                    children.append({})
                    complete.append(False)
                for s in spellings:
                    children[node][s] = child
                node = child
            complete[node] = True
        return Guard(children, complete, [None] * len(children))

    def step(self, g: "tuple[int, bytes] | None", byte: int, item_done: bool) -> "tuple[int, bytes] | None":
        if g is None:
            return None
        node, partial = g
        partial += bytes((byte,))
        prefixes = self.prefixes[node]
        if prefixes is None:  # threads may race here: each writes the same set
            prefixes = self.prefixes[node] = frozenset(s[:k] for s in self.children[node] for k in range(len(s) + 1))
        if partial not in prefixes:
            return None
        if item_done:
            child = self.children[node].get(partial)
            return None if child is None else (child, b"")
        return (node, partial)

    def blocks_end(self, g: "tuple[int, bytes] | None") -> bool:
        return g is not None and not g[1] and self.complete[g[0]]


@dataclass
class UnorderedItems:
    """What an unordered rule's automaton adds: the items each callee may be (callee -> item
    indices), the states from which the rule can end only through another item (entered only
    while one may come), and the bookkeeping of slots written."""

    item_of: dict
    must_add: tuple[bool, ...]
    slots: Slots


@dataclass
class RuleAutomaton:
    """DFA of one rule. State 0 is the start state.

    For ``counted`` rules the DFA is that of one item, ``min``/``max`` bound the count, and an
    optional ``guard`` forbids ending on an excluded item sequence.
    """

    name: str
    trans: list[dict[int, int]]
    calls: list[tuple[tuple[int, int], ...]]
    accept: list[bool]
    counted: bool = False
    min: int = 0
    max: int | None = None
    guard: Guard | None = None
    item_digest: str = ""
    item_calls: bool = False  # a counted item that calls other rules (an array element)
    #: bytes that may not come right after the rule completes (a lexer's token end), or None
    lookahead: frozenset[int] | None = None
    #: compile-budget units building it took (:func:`_determinize`), charged even when cached
    units: int = 0
    #: an unordered rule's items and bookkeeping; its state is ``(written, got, count, q)``
    unordered: UnorderedItems | None = None


@dataclass
class GrammarAutomaton:
    rules: list[RuleAutomaton]
    start: int
    nullable: list[bool] = field(default_factory=list)
    follow: list[frozenset[int]] = field(default_factory=list)
    fingerprints: list[str] = field(default_factory=list)

    def index(self, name: str) -> int:
        return next(i for i, r in enumerate(self.rules) if r.name == name)


# ---------------------------------------------------------------- Thompson NFA per rule

class _NFA:
    def __init__(self, rule: str) -> None:
        self.rule = rule
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[frozenset[int], int]]] = []
        self.calls: list[list[tuple[int, int]]] = []

    def new(self) -> int:
        if not len(self.eps) & 1023:  # a huge expression (an enum of 10^5 strings) stops early
            affordable(_units(0, len(self.eps), 0), self.rule)
        self.eps.append([])
        self.edges.append([])
        self.calls.append([])
        return len(self.eps) - 1


def _build(nfa: _NFA, e: Expr, names: dict[str, int], rule: str) -> tuple[int, int]:
    """Add ``e`` to ``nfa``; return its (entry, exit) states."""
    s = nfa.new()
    if isinstance(e, Lit):
        cur = s
        for b in e.data:
            nxt = nfa.new()
            nfa.edges[cur].append((frozenset((b,)), nxt))
            cur = nxt
        return s, cur
    if isinstance(e, ByteClass):
        t = nfa.new()
        nfa.edges[s].append((e.bytes(), t))
        return s, t
    if isinstance(e, Ref):
        t = nfa.new()
        nfa.calls[s].append((e.name, t))  # type: ignore[arg-type]  # resolved to an index later
        return s, t
    if isinstance(e, Seq):
        cur = s
        for item in e.items:
            a, b = _build(nfa, item, names, rule)
            nfa.eps[cur].append(a)
            cur = b
        return s, cur
    if isinstance(e, Alt):
        t = nfa.new()
        for item in e.items:
            a, b = _build(nfa, item, names, rule)
            nfa.eps[s].append(a)
            nfa.eps[b].append(t)
        return s, t
    if isinstance(e, Fsm):
        states = [s] + [nfa.new() for _ in range(len(e.edges) - 1)]
        end = nfa.new()
        for q, edges in enumerate(e.edges):
            for cls, t in edges:
                nfa.edges[states[q]].append((cls.bytes(), states[t]))
            if q in e.accept:
                nfa.eps[states[q]].append(end)
        return s, end
    if isinstance(e, Repeat):
        hi = e.max if e.max is not None else e.min
        if hi > MAX_UNROLL:
            raise CompileError(f"rule '{rule}': repeat bound {hi} is too large to unroll "
                               f"(limit {MAX_UNROLL}); use a counted rule")
        cur = s
        for _ in range(e.min):
            a, b = _build(nfa, e.item, names, rule)
            nfa.eps[cur].append(a)
            cur = b
        if e.max is None:  # star loop
            a, b = _build(nfa, e.item, names, rule)
            nfa.eps[cur].append(a)
            nfa.eps[b].append(cur)
            return s, cur
        end = nfa.new()
        nfa.eps[cur].append(end)
        for _ in range(e.max - e.min):
            a, b = _build(nfa, e.item, names, rule)
            nfa.eps[cur].append(a)
            nfa.eps[b].append(end)
            cur = b
        return s, end
    raise CompileError(f"rule '{rule}': unexpected IR node {type(e).__name__}")


_REGULAR_DFAS: Recent[Expr, RuleAutomaton] = Recent(2048)


def regular_dfa(e: Expr, rule: str) -> RuleAutomaton:
    """DFA of a reference-free expression, cached per process (JSON characters recur a lot)."""
    got = _REGULAR_DFAS.get(e)
    if got is None:
        got = _REGULAR_DFAS[e] = _dfa_of(e, rule)
    return got


_REGULAR_ROWS: Recent[Expr, "RuleAutomaton | None"] = Recent(64)


def regular_rows(e: Expr, rule: str) -> "RuleAutomaton | None":
    """:func:`regular_dfa`'s automaton with ``trans`` as grouped rows (``dfa.grouped``'s pairs,
    in tuples) made by the kernel without the byte dicts, cached per process; None where the
    kernel does not build it. For automata only ever read as rows: the Lark lexer's union of
    all terminals (200k dict entries for a SQL database, half of its making)."""
    got = _REGULAR_ROWS.get(e, False)
    if got is False:
        got = _REGULAR_ROWS[e] = _kernel_dfa(e, rule, as_rows=True)
    return got  # type: ignore[return-value]


def _dfa_of(e: Expr, rule: str) -> RuleAutomaton:
    """The DFA of ``e`` (calls to other rules as edges): its Thompson NFA (:func:`_build`),
    determinized; in C when the kernel is there (same automaton, same work units)."""
    got = _kernel_dfa(e, rule)
    if got is not None:
        return got
    nfa = _NFA(rule)
    a, b = _build(nfa, e, {}, rule)
    return _determinize(nfa, a, b, rule)


def _kernel_dfa(e: Expr, rule: str, *, as_rows: bool = False) -> "RuleAutomaton | None":
    """:func:`_dfa_of` by compiled_dfa.compile_expr; None without the kernel, or for an
    expression nested deeper than it goes."""
    if not kernel_available():
        return None
    left = room()
    status, states, visits, trans, calls, accept, nfa_states, info = kernel.compile_expr(
        e, _IR_TYPES, MAX_UNROLL, MAX_DFA_STATES, -1 if left is None else left, as_rows)
    if status <= 2:
        return _determinized(rule, status, states, visits, trans, calls, accept, nfa_states)
    if status == 3:
        raise CompileError(f"rule '{rule}': repeat bound {info} is too large to unroll "
                           f"(limit {MAX_UNROLL}); use a counted rule")
    if status == 4:
        raise CompileError(f"rule '{rule}': unexpected IR node {info}")
    if status == 5:  # stopped where _NFA.new's check raises
        affordable(_units(0, nfa_states, 0), rule)
        raise AssertionError("compiled_dfa.compile_expr stopped within the budget")
    return None  # status 6: nested deeper than the C builder goes


#: The IR classes compiled_dfa.compile_expr reads, in the order it takes them.
_IR_TYPES = (Lit, ByteClass, Ref, Seq, Alt, Repeat, Fsm)


def _determinize(nfa: _NFA, start: int, final: int, name: str) -> RuleAutomaton:
    if kernel_available():
        return _determinize_in_c(nfa, start, final, name)
    return _determinize_in_python(nfa, start, final, name)


def _determinize_in_c(nfa: _NFA, start: int, final: int, name: str) -> RuleAutomaton:
    """compiled_dfa.determinize: the same automaton, numbering and work count as the Python."""
    left = room()
    got = kernel.determinize(nfa.eps, nfa.edges, nfa.calls, start, final, MAX_DFA_STATES,
                             -1 if left is None else left)
    return _determinized(name, *got, len(nfa.eps))


def _determinized(name: str, status: int, states: int, visits: int, trans: list, calls: list, accept: list,
                  nfa_states: int) -> RuleAutomaton:
    """What compiled_dfa's subset construction returned, as the Python returns or raises it."""
    if status == 1:  # stopped where the Python's check raises
        affordable(_units(states, nfa_states, visits), name)
        raise AssertionError("compiled_dfa stopped a subset construction within the budget")
    if status == 2:
        raise CompileError(f"rule '{name}': its automaton exceeds {MAX_DFA_STATES} states")
    return RuleAutomaton(name, trans, calls, accept, units=_units(states, nfa_states, visits))


def _determinize_in_python(nfa: _NFA, start: int, final: int, name: str) -> RuleAutomaton:
    # A DFA state is the set of *important* NFA states (those that read a byte, call a rule or
    # are final) in an epsilon closure: closures that differ only in pass-through states behave
    # alike, so they share a DFA state, and the sets stay small.
    important = [bool(nfa.edges[q] or nfa.calls[q]) for q in range(len(nfa.eps))]
    width = [sum(len(bs) for bs, _ in edges) + len(calls) for edges, calls in zip(nfa.edges, nfa.calls)]
    important[final] = True
    # Work is states built plus epsilon-closure visits (an unanchored pattern's states hold
    # many NFA states each: `(a|b){500}` builds 3,000 states but visits millions).
    visits = [0]

    def close(states) -> frozenset[int]:
        seen = set(states)
        todo = list(states)
        while todo:
            for t in nfa.eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        visits[0] += len(seen)
        return frozenset(q for q in seen if important[q])

    first = close([start])
    index = {first: 0}
    order = [first]
    reached: dict[frozenset[int], int] = {}  # target sets before closing, already placed
    trans: list[dict[int, int]] = []
    calls: list[tuple[tuple[int, int], ...]] = []
    accept: list[bool] = []

    def target(ts: frozenset[int]) -> int:
        got = reached.get(ts)
        if got is None:
            key = close(ts)
            got = index.get(key)
            if got is None:
                if len(order) >= MAX_DFA_STATES:
                    raise CompileError(f"rule '{name}': its automaton exceeds {MAX_DFA_STATES} states")
                got = index[key] = len(order)
                order.append(key)
            reached[ts] = got
        return got

    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        visits[0] += sum(width[q] for q in cur) // 4  # the byte edges read below (~4 a visit)
        if not i & 15:
            affordable(_units(len(order), len(nfa.eps), visits[0]), name)
        by_byte: dict[int, set[int]] = {}
        by_call: dict[str, set[int]] = {}
        for q in cur:
            for bs, t in nfa.edges[q]:
                for b in bs:
                    by_byte.setdefault(b, set()).add(t)
            for callee, t in nfa.calls[q]:
                by_call.setdefault(callee, set()).add(t)
        # Group bytes with equal target sets so each distinct set is closed once. New states
        # are numbered in a fixed order (byte groups by lowest byte, then calls by callee), not
        # a set's iteration order, so that the compiled kernel numbers them alike.
        groups: dict[frozenset[int], list[int]] = {}
        for b in sorted(by_byte):
            groups.setdefault(frozenset(by_byte[b]), []).append(b)
        row: dict[int, int] = {}
        for ts, bs in groups.items():
            t = target(ts)
            for b in bs:
                row[b] = t
        trans.append(row)
        calls.append(tuple((c, target(frozenset(by_call[c]))) for c in sorted(by_call)))
        accept.append(final in cur)
    return RuleAutomaton(name, trans, calls, accept, units=_units(len(order), len(nfa.eps), visits[0]))


def _units(states: int, nfa_states: int, visits: int) -> int:
    """Compile-budget units of a determinization: one per DFA state, as for every automaton,
    unless building the NFA, closing its state sets and reading their byte edges took longer
    (an unanchored `(a|b|c){200}`: 3,000 states, 4 million closure visits). Measured here: a
    unit is ~5 us, the time of ~16 closure visits or ~64 byte edges; typical rules and the SQL
    grammar's lexer stay at one unit a state."""
    return max(states, (nfa_states + visits) // 16)


class _Cached:
    """A compiled rule body as :func:`_compile_rule` keeps it: its :func:`~structgen.core.ir.shape`,
    the automaton (calls by callee name), its digest, the states that call (most states of
    most rules call nothing), and the live states when the rule calls nothing at all (then
    they depend on no other rule)."""

    __slots__ = ("shape", "automaton", "digest", "calling", "solo_live")

    def __init__(self, body_shape: Shape, automaton: RuleAutomaton, body_digest: str) -> None:
        self.shape, self.automaton, self.digest = body_shape, automaton, body_digest
        self.calling = tuple((q, qc) for q, qc in enumerate(automaton.calls) if qc)
        # a tuple: cache entries churn, and the collector stops tracking a tuple of bools
        self.solo_live = None if self.calling else tuple(solo_live_states(automaton))


#: body -> what :func:`_compile_rule` keeps of it
_RULES: Recent[Expr, _Cached] = Recent(2048)


def _compile_rule(name: str, body: Expr, names: dict[str, int], got: "_Cached | None",
                  body_shape: Shape) -> tuple[RuleAutomaton, _Cached]:
    """The rule's automaton, and what the cache keeps of its body (``got``: already there, else
    None); bodies recur across schemas (a JSON schema's strings, numbers and escapes are in
    every grammar), so their automata are cached by content."""
    if got is None:
        got = _RULES.get(body)  # an earlier rule of the same grammar may have had this body
    if got is None:
        got = _RULES[body] = _Cached(body_shape, _compile_body(name, body), digest(body))
    cached = got.automaton
    calls = cached.calls  # shared when nothing calls: no rule's lists change after it is built
    if got.calling:
        calls = [()] * len(cached.trans)
        for q, qc in got.calling:
            calls[q] = tuple((names[c], t) for c, t in qc)
    unordered = cached.unordered
    if unordered is not None:
        unordered = UnorderedItems({names[c]: ks for c, ks in unordered.item_of.items()},
                                   unordered.must_add, unordered.slots)
    return RuleAutomaton(name, cached.trans, calls, cached.accept, cached.counted, cached.min,
                         cached.max, cached.guard, cached.item_digest, cached.item_calls,
                         units=cached.units, unordered=unordered), got


def _compile_body(name: str, body: Expr) -> RuleAutomaton:
    names: dict[str, int] = {}
    if isinstance(body, Counted):
        cached = regular_dfa(body.item, name)
        item = RuleAutomaton(name, cached.trans, cached.calls, cached.accept, units=cached.units)
        if item.accept[0]:
            raise CompileError(f"counted rule '{name}': the item must not match the empty string")
        if any(item.accept[q] and (item.trans[q] or item.calls[q]) for q in range(len(item.trans))):
            raise CompileError(f"counted rule '{name}': the item must be prefix-free "
                               "(no complete item may continue into a longer one)")
        item.counted, item.min, item.max = True, body.min, body.max
        item.item_calls = any(item.calls)
        if body.exclude and item.item_calls:
            raise CompileError(f"counted rule '{name}': excluded words need an item without calls")
        item.guard = Guard.build(body.exclude) if body.exclude else None
        item.item_digest = digest(body.item)
        return item
    if isinstance(body, Unordered):
        return _compile_unordered(name, body)
    return _dfa_of(body, name)


def _compile_unordered(name: str, body: Unordered) -> RuleAutomaton:
    """``item (sep item)*`` with an item edge per callee; ``must_add[q]``: the rule cannot end
    from ``q`` without calling an item (right after a separator)."""
    callees = list(dict.fromkeys(r.name for r in body.items))
    item = alt(*(Ref(c) for c in callees))
    out = _dfa_of(seq(item, Repeat(seq(body.sep, item), 0, None)), name)
    items = set(callees)
    if any(c in items for c, _ in _sep_calls(body.sep)):
        raise CompileError(f"unordered rule '{name}': the separator calls an item")
    can_end = list(out.accept)
    changed = True
    while changed:  # reaches an accepting state by bytes and calls other than items
        changed = False
        for q in range(len(out.trans)):
            if not can_end[q] and (any(can_end[t] for t in out.trans[q].values())
                                   or any(can_end[t] for c, t in out.calls[q] if c not in items)):
                can_end[q] = changed = True
    item_of: dict[str, tuple[int, ...]] = {}
    for k, r in enumerate(body.items):
        item_of[r.name] = item_of.get(r.name, ()) + (k,)
    out.unordered = UnorderedItems(item_of, tuple(not x for x in can_end), Slots.of(body))
    return out


def _sep_calls(e: Expr):
    if isinstance(e, Ref):
        yield e.name, None
    elif isinstance(e, (Seq, Alt)):
        for x in e.items:
            yield from _sep_calls(x)
    elif isinstance(e, Repeat):
        yield from _sep_calls(e.item)


def _with_lookahead(body_digest: str, forbidden: frozenset[int]) -> str:
    """The digest of a rule with a lookahead: its body's and the bytes it forbids next (a SQL
    grammar has ~90 such rules; writing each body out again took a millisecond)."""
    return hashlib.sha1(f"{body_digest}!{sorted(forbidden)}".encode()).hexdigest()[:20]


def build_automaton(grammar: Grammar) -> GrammarAutomaton:
    """Compile every rule of ``grammar`` and run the grammar-level analyses.

    Raises
    ------
    CompileError
        For left recursion or a counted item that is empty or not prefix-free.
    """
    found = [_RULES.get(body) for _, body in grammar.rules]
    shapes = [shape(body) if got is None else got.shape for got, (_, body) in zip(found, grammar.rules)]
    grammar.checked(shapes)
    names = {n: i for i, (n, _) in enumerate(grammar.rules)}
    rules, digests, solo = [], [], []
    for (n, body), got, body_shape in zip(grammar.rules, found, shapes):
        rule, cached = _compile_rule(n, body, names, got, body_shape)
        rules.append(rule)
        digests.append(cached.digest)
        solo.append(cached.solo_live)
        charge(max(len(rule.trans), rule.units), n)
    for n, forbidden in grammar.lookahead:
        r = rules[names[n]]
        if r.counted or r.unordered is not None:
            raise CompileError(f"rule '{n}': a counted or unordered rule cannot have a lookahead")
        rules[names[n]] = RuleAutomaton(r.name, r.trans, r.calls, r.accept, lookahead=forbidden)
    start = names[grammar.start]
    rules = prune_dead(rules, start, solo)
    null = nullable(rules)
    check_left_recursion(rules, null)
    for n, forbidden in grammar.lookahead:  # what a rule's states accept depends on its lookahead
        digests[names[n]] = _with_lookahead(digests[names[n]], forbidden)
    return GrammarAutomaton(rules, start, null, first_and_follow(rules, null),
                            fingerprints(rules, digests))
