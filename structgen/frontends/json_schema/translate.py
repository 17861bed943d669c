"""JSON Schema frontend: a schema becomes a grammar IR, or an error naming what it cannot honour.

Keywords (see the README's keyword table): ``type`` (one or a list), ``properties`` with
``required`` and ``additionalProperties`` (``true``/``false``/a schema; the spec's default is
``true``), ``items``, ``enum``, ``const``, ``$ref`` into ``$defs``/``definitions`` (recursion
included), string lengths, ``pattern`` and ``format``, numeric bounds and ``multipleOf``, and
the combinators ``allOf``, ``anyOf``, ``oneOf``, ``not``, with keywords beside ``$ref`` and
``anyOf``: :mod:`structgen.frontends.json_schema.dnf` merges each conjunction into one schema per
alternative, exactly or not at all. What each keyword does is its entry in
:mod:`structgen.frontends.json_schema.keywords`. Every other JSON Schema keyword that constrains instances
(:data:`ASSERTION_KEYWORDS`) raises :class:`~structgen.errors.UnsupportedFeatureError` with its
JSON pointer: no constraint is ever dropped silently. Annotations and unknown keywords
(``title``, ``x-...``) constrain nothing and are ignored, as the spec says.

A subschema that no value satisfies (``false``, ``not: {}``, bounds that exclude each other) is
an error, except where it is one option among others: an ``anyOf`` branch, one type of a list,
an optional property (then a forbidden key), the items (then only ``[]``); such an option is
left out, and the language is unchanged.

Key order: generation (``canonical=True``) writes defined properties in schema order, then
additional ones, as every peer engine does; walking (validating, ``canonical=False``) takes an
object's members in any order, each defined key at most once (the keys written are kept beside
the parse state, see :class:`~structgen.core.ir.Unordered`), as JSON objects are unordered. When walking, keys, string literals and numbers are matched in
every JSON spelling of their value (``"\\u0061"`` is ``"a"``, ``1.0`` is ``1``); for generation
(``canonical=True``) in one spelling (``json.dumps``, non-ASCII raw or ``\\uXXXX``), which keeps
keys and enum tails forced. An additional key is any string whose *decoded* value is not a
defined key, however it is escaped.

Example
-------
>>> g = schema_to_grammar({"type": "object", "properties": {"ok": {"type": "boolean"}},
...                        "required": ["ok"], "additionalProperties": False},
...                       whitespace="compact", canonical=True)
>>> print(g.rules[0][1])  # the property's rule is the boolean one (see rule_table)
"{\\"ok\\":" boolean "}"
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable, Iterable, Literal

from structgen.core.budget import charge, describe_with
from structgen.core.depth import MAX_NESTING, recursion_room, too_deep
from structgen.core.ir import ByteClass, Counted, Expr, Grammar, Lit, Ref, Repeat, Seq, alt, seq
from structgen.core.memo import Recent
from structgen.core.merge_rules import merge_equal_rules
from structgen.errors import OptionError, SchemaError, UnsupportedFeatureError, first_error, is_no_value, no_value
from structgen.frontends.json_schema.arrays import array_expr
from structgen.frontends.json_schema.dnf import Merger
from structgen.frontends.json_schema.drafts import for_draft
from structgen.frontends.json_schema.facts import Merged
from structgen.frontends.json_schema.keywords import (ASSERTION_KEYWORDS, KEYWORDS, LENIENT_KEYWORDS,
                                                      SUPPORTED_KEYWORDS, keyword_table)
from structgen.frontends.json_schema.lowering import Relaxed
from structgen.frontends.json_schema.metaschema import check_metaschema
from structgen.frontends.json_schema.numbers import number_ir
from structgen.frontends.json_schema.objects import key_except, object_expr, object_of
from structgen.frontends.json_schema.refs import resolve_ref
from structgen.frontends.json_schema.rule_table import RuleTable, UndoOnError
from structgen.frontends.json_schema.scalars import literal, number_expr, string_expr
from structgen.frontends.json_schema.terms import Conj, Part
from structgen.frontends.json_schema.values import join_pointer
from structgen.frontends.json_text import JSON_CHAR, char_encodings, string_literal

__all__ = ["check_json_data", "schema_to_grammar", "translate_schema", "Relaxed", "SUPPORTED_KEYWORDS",
           "ASSERTION_KEYWORDS", "LENIENT_KEYWORDS", "keyword_table"]

#: Bound on whitespace characters per gap in ``flexible`` mode: enough for ``indent=2`` 16+ deep.
MAX_WHITESPACE = 128

#: Rules from which a translation's equal rules are merged (:mod:`structgen.core.merge_rules`):
#: below it the pass cost more than it saved (MaskBench's median schema has ~50 rules, 15% of
#: them merged; a Github_ultra schema 1,000-7,000 rules, two thirds merged).
MERGE_FROM_RULES = 200

#: ``$schema`` values read as JSON Schema (drafts 3 to 2020-12), after :func:`_dialect`.
KNOWN_DIALECTS = frozenset({
    "json-schema.org/schema", "json-schema.org/draft-03/schema", "json-schema.org/draft-04/schema",
    "json-schema.org/draft-06/schema", "json-schema.org/draft-07/schema",
    "json-schema.org/draft/2019-09/schema", "json-schema.org/draft/2020-12/schema",
})


def _dialect(uri: Any) -> str:
    """A ``$schema`` URI without scheme and empty fragment (``http://…/schema#`` = ``https://…/schema``)."""
    if not isinstance(uri, str):
        return ""
    return re.sub(r"^https?://", "", uri).removesuffix("#")


class _Converter:
    """One translation: the rules built so far, by name, and the options; it is the
    :class:`~structgen.frontends.json_schema.lowering.Lowering` the lowering by kind builds with."""

    def __init__(self, root: Any, whitespace: Literal["flexible", "compact", "spaced"], strict: bool = False,
                 canonical: bool = False, lenient: bool = False, python: bool = False) -> None:
        if whitespace not in ("flexible", "compact", "spaced"):
            raise OptionError(f"whitespace must be 'flexible', 'compact' or 'spaced', not {whitespace!r}")
        self.root = root
        self.flexible = whitespace == "flexible"
        self.spaced = whitespace == "spaced"
        self.strict = strict
        self.canonical = canonical
        self.lenient = lenient
        self.python = python
        # drafts 3 and 4: an integer has no fraction or exponent part (1.0 is a number only)
        dialect = _dialect(root.get("$schema")) if isinstance(root, dict) else ""
        self.integral_spellings = dialect not in ("json-schema.org/draft-03/schema",
                                                  "json-schema.org/draft-04/schema")
        self.relaxed: list[Relaxed] = []
        self.table = RuleTable()
        self.rules, self.by_pointer = self.table.rules, self.table.by_pointer
        self.merger = Merger(root, KEYWORDS, check=self.check, refuse=self.refuse, ref_siblings_always=strict)

    # -- rule plumbing

    def refuse(self, keyword: str, pointer: str, hint: str) -> None:
        """Raise UnsupportedFeatureError, or under ``lenient`` record the keyword as dropped."""
        if self.lenient and keyword in LENIENT_KEYWORDS:
            self.note(Relaxed(keyword, pointer, hint))
            return
        raise UnsupportedFeatureError(keyword, pointer=pointer, hint=hint)

    def note(self, relaxed: Relaxed) -> None:
        """Record a constraint left unchecked (once: a subschema may be merged into several places)."""
        if relaxed not in self.relaxed:
            self.relaxed.append(relaxed)

    def check(self, schema: dict, ptr: str) -> None:
        """Refuse (``lenient``: record) the assertion keywords structgen does not support, and
        metaschemas other than the JSON Schema drafts (their vocabularies are unknown)."""
        dialect = schema.get("$schema")
        if dialect is not None and _dialect(dialect) not in KNOWN_DIALECTS:
            raise UnsupportedFeatureError("$schema", pointer=join_pointer(ptr, "$schema"),
                                          hint=f"{dialect!r} is not a JSON Schema draft's metaschema; "
                                               "its vocabularies (which keywords assert) are unknown")
        for kw in schema:
            if kw in ASSERTION_KEYWORDS and kw not in SUPPORTED_KEYWORDS:
                self.refuse(kw, join_pointer(ptr, kw), "not in structgen's supported keywords yet")

    def key_literal(self, key: str) -> Expr:
        """A string literal: canonical when generating, any JSON spelling when walking."""
        # Charged before the automaton is built, which would take ~20 s on an enum of 50,000
        # strings (measured: ~2 units of build time per character, ~4 when walking)
        charge(2 * len(key) if self.canonical else 4 * len(key))
        if self.canonical:
            return string_literal(key)
        got = _WALKED_KEYS.get(key)
        if got is None:  # keys recur, within a schema ("type", "description") and across them
            got = _WALKED_KEYS[key] = _walked_key(key)
        expr, escapes = got
        for name, ch in escapes:
            if name not in self.rules:  # the escaped spellings, after their backslash
                options = char_encodings(ch)
                self.rule(name, alt(*(Lit(x[1:]) for x in options if x.startswith(b"\\"))))
        return expr

    def rule(self, name: str, body: Expr, *, mergeable: bool = False) -> Ref:
        return self.table.helper(name, body, mergeable=mergeable)

    def uid(self) -> int:
        return self.table.uid()

    def undo_on_error(self) -> UndoOnError:
        """Rules and names made inside are forgotten when it raises (see :class:`RuleTable`)."""
        return self.table.undo_on_error()

    @property
    def ws(self) -> Expr:
        """The gap inside brackets and around separators: any whitespace (flexible), else none."""
        if not self.flexible:
            return Seq(())
        return self.rule("ws", Counted(ByteClass.of(" \t\n\r"), 0, MAX_WHITESPACE))

    @property
    def comma(self) -> Expr:
        """The separator of items and members (``", "`` when spaced, as ``json.dumps`` writes it)."""
        return Lit(b", ") if self.spaced else seq(self.ws, Lit(b","), self.ws)

    @property
    def colon(self) -> Expr:
        """The separator of a key and its value (``": "`` when spaced)."""
        return Lit(b": ") if self.spaced else seq(self.ws, Lit(b":"), self.ws)

    def keyword(self, value: "bool | None") -> Expr:
        """``true``, ``false`` or ``null`` (``True``, ``False``, ``None`` as Python literals)."""
        return Lit((repr(value) if self.python else json.dumps(value)).encode())

    def primitive(self, name: str) -> Ref:
        if name == "string":
            return self.string_rule(0, None)
        if name not in self.rules:
            bodies = {"null": self.keyword(None), "boolean": alt(self.keyword(True), self.keyword(False))}
            if name in bodies:
                return self.rule(name, bodies[name])
            if name in ("number", "integer"):
                self.rules[name] = number_ir(integer=name == "integer", forms="plain" if self.canonical else "any",
                                             integral_spellings=self.integral_spellings)
                return Ref(name)
            if name == "value":
                self.rules["value"] = Seq(())  # reserve the name (recursive)
                scalars = [self.primitive(t) for t in ("string", "number", "boolean", "null")]
                member = seq(key_except(self, set()), self.colon, Ref("value"))
                self.rules["value"] = alt(*scalars, object_of(self, [], member), self.array_of(Ref("value")))
                return Ref("value")
        return Ref(name)

    def string_rule(self, lo: int, hi: int | None) -> Ref:
        chars = "chars" if (lo, hi) == (0, None) else f"chars_{lo}_{'' if hi is None else hi}"
        self.rule(chars, Counted(JSON_CHAR, lo, hi))
        name = "string" if chars == "chars" else f"string_{lo}_{'' if hi is None else hi}"
        return self.rule(name, seq(Lit(b'"'), Ref(chars), Lit(b'"')))

    # -- schemas

    def convert(self, schema: Any, pointer: str) -> Ref:
        """The rule for the subschema at ``pointer`` (one rule per pointer)."""
        return self.named(pointer, lambda: self.body(schema, pointer))

    def position(self, conj: Conj) -> Ref:
        """The rule for one place (a property's value, the items): its subschemas together."""
        if not conj.parts:
            return self.primitive("value")
        if len(conj.parts) == 1:
            return self.convert(conj.parts[0].schema, conj.parts[0].pointer)
        return self.named(conj.key, lambda: self.conjunction(conj))

    def position_or_none(self, conj: Conj) -> Ref | None:
        """:meth:`position`, or None when no value can be there (a property that must be left
        out, an array position past the end)."""
        try:
            with self.undo_on_error():
                return self.position(conj)
        except SchemaError as err:
            if not is_no_value(err):
                raise
            return None

    def named(self, key: str | tuple[str, ...], build: Callable[[], Expr]) -> Ref:
        """The rule for ``key`` (a pointer, or the pointers of a conjunction), built once, or an
        equal earlier rule (:meth:`RuleTable.named`)."""
        return self.table.named(key, build)

    def ref_alone(self, schema: Any) -> bool:
        """``schema`` is a ``$ref`` alone (or beside keywords its draft ignores)."""
        if not isinstance(schema, dict) or "$ref" not in schema:
            return False
        constraints = [k for k in schema if k in SUPPORTED_KEYWORDS]
        return constraints == ["$ref"] or ("$ref" in constraints and self.merger.ref_alone)

    def body(self, schema: Any, ptr: str) -> Expr:
        if schema is True or schema == {}:
            return self.primitive("value")
        if schema is False:
            raise no_value(UnsupportedFeatureError("false", pointer=ptr,
                                                   hint="a false schema matches nothing, so no value can be generated"))
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}",
                              pointer=ptr)
        self.check(schema, ptr)
        constraints = [k for k in schema if k in SUPPORTED_KEYWORDS]
        if self.ref_alone(schema):
            # alone (or beside keywords its draft ignores): the target's rule, shared
            target = resolve_ref(self.root, schema["$ref"], ptr)
            chain = []  # a chain of such references is followed here, not by recursion (300 $defs)
            seen = {ptr}
            while self.ref_alone(target.schema) and target.pointer not in self.by_pointer \
                    and target.pointer not in seen:
                seen.add(target.pointer)
                chain.append(target)
                target = resolve_ref(self.root, target.schema["$ref"], target.pointer)
            got = self.convert(target.schema, target.pointer)
            for link in reversed(chain):  # each link's target has its rule now: no recursion
                got = self.convert(link.schema, link.pointer)
            return got
        if constraints == ["type"] and isinstance(schema["type"], str) and schema["type"] in _SCALAR_TYPES:
            return self.scalar(schema["type"])
        if constraints == ["allOf"] and isinstance(schema["allOf"], list) and len(schema["allOf"]) == 1:
            return self.convert(schema["allOf"][0], join_pointer(ptr, "allOf", 0))  # one branch: its rule, shared
        if constraints == ["anyOf"]:  # alone: the branches' rules; a branch matching nothing is dropped
            branches = schema["anyOf"]
            if not isinstance(branches, list) or not branches:
                raise SchemaError("anyOf must be a non-empty array", pointer=join_pointer(ptr, "anyOf"))
            return self.first_of(lambda b: self.convert(b[1], join_pointer(ptr, "anyOf", b[0])), enumerate(branches))
        return self.conjunction(Conj((Part(schema, ptr),)))

    def scalar(self, t: str) -> Ref:
        """A scalar type's rule, as the merge path (:meth:`conjunction`) makes it for a schema that
        says only ``{"type": t}``: a third of MaskBench's subschemas (a property's type beside
        its description), each of which took a merge, a term and a resolve."""
        return self.string_rule(0, None) if t == "string" else self.primitive(t)

    def first_of(self, build: Callable[[Any], Expr], options: Iterable[Any]) -> Expr:
        """The alternative of what ``build`` makes of each option, leaving out options no value
        satisfies (a marked error); when none is left, the first such error."""
        exprs: list[Expr] = []
        errors: list[SchemaError] = []
        for option in options:
            try:
                with self.undo_on_error():
                    exprs.append(build(option))
            except SchemaError as err:
                if not is_no_value(err):
                    raise
                errors.append(err)
        if not exprs:
            raise first_error(errors)
        errors.clear()  # see first_error
        return alt(*exprs)

    def conjunction(self, conj: Conj) -> Expr:
        """Subschemas that all apply: the union of their merged alternatives (the dnf module)."""
        return self.first_of(self.alternative, self.merger.alternatives(conj))

    def alternative(self, m: Merged) -> Expr:
        if m.enum is not None:  # the values valid under every conjunct
            return alt(*(literal(self, v, m.pointer) for v in m.enum))
        return self.first_of(lambda t: self.typed(t, m), m.types())

    def typed(self, t: str, m: Merged) -> Expr:
        if t == "string":
            return string_expr(self, m)
        if t == "object":
            return object_expr(self, m)
        if t == "array":
            return array_expr(self, m)
        if t in ("number", "integer", "fraction"):
            return number_expr(self, t, m)
        if t == "boolean":
            left = [v for v in (True, False) if not any(x is v for x, _ in m.excluded)]
            return self.primitive("boolean") if len(left) == 2 else self.keyword(left[0])
        return self.primitive(t)

    def array_of(self, item: Ref) -> Expr:
        ws = self.ws
        return alt(
            seq(Lit(b"["), ws, Lit(b"]")),
            seq(Lit(b"["), ws, item, Repeat(seq(self.comma, item), 0, None), ws, Lit(b"]")),
        )


def schema_to_grammar(schema: Any, *, whitespace: Literal["flexible", "compact", "spaced"] = "flexible",
                      strict: bool = False, canonical: bool = False, lenient: bool = False) -> Grammar:
    """Translate a JSON schema into a :class:`~structgen.core.ir.Grammar` whose start rule is ``root``.

    See :func:`translate_schema`, which also returns what ``lenient`` dropped.
    """
    return translate_schema(schema, whitespace=whitespace, strict=strict, canonical=canonical,
                            lenient=lenient)[0]


def translate_schema(schema: Any, *, whitespace: Literal["flexible", "compact", "spaced"] = "flexible",
                     strict: bool = False, canonical: bool = False, lenient: bool = False,
                     lists_only: "bool | None" = None, python: bool = False) -> tuple[Grammar, tuple[Relaxed, ...]]:
    """The grammar of a JSON schema, and the constraints ``lenient`` dropped (empty otherwise).

    ``strict=True`` closes objects whose schema does not mention ``additionalProperties`` (the
    spec's default is open); an explicit ``true`` or subschema still opens them.
    ``canonical=True`` (generation) spells values one way: keys and strings as ``json.dumps``
    writes them (non-ASCII raw or escaped), integers without fraction, no exponents, no ``-0``;
    ``False`` (walking, validating) accepts every JSON spelling of an allowed value.
    ``lenient=True`` drops keywords of :data:`LENIENT_KEYWORDS` that cannot be honoured,
    instead of raising; each is recorded. ``lists_only``: what :func:`check_json_data`
    returned for this very schema, when the caller has just run it (then it is not run again).
    ``python=True`` writes values as Python literals (``True``, ``False``, ``None``; the rest of
    canonical JSON is Python already): a pythonic call's arguments.

    Raises
    ------
    SchemaError
        The schema is malformed (bad ``type``, unresolvable ``$ref`` …).
    UnsupportedFeatureError
        A keyword the compiler cannot honour yet; the message names it and its JSON pointer.
    """
    if lists_only is None:
        lists_only = check_json_data(schema)
    deep = too_deep(schema)
    if deep is not None:
        raise SchemaError(f"the schema nests more than {MAX_NESTING} objects and arrays deep here; "
                          "use \"$ref\" to definitions to flatten it", pointer=deep)
    _check_surrogates(schema)
    check_metaschema(schema, lists_only=lists_only)  # a malformed keyword value is refused, never skipped
    # a declared draft: its keywords only (draft 3's as draft 4 spells them)
    conv = _Converter(for_draft(schema), whitespace, strict, canonical, lenient, python)
    try:
        with recursion_room():  # the walk recurses per level of nesting (bounded just above)
            conv.convert(conv.root, "")
    finally:  # the merger calls back into the converter: a reference cycle, with all it made
        conv.merger = None  # type: ignore[assignment]
    describe_with(conv.table.describer())
    rules = [("root", conv.rules.pop("root"))] + list(conv.rules.items())
    grammar = Grammar(tuple(rules), "root")  # checked when compiled
    if len(rules) >= MERGE_FROM_RULES:  # a large schema repeats itself (one member in many objects)
        grammar = merge_equal_rules(grammar)
    return grammar, tuple(conv.relaxed)


def _walked_key(key: str) -> tuple[Expr, tuple[tuple[str, str], ...]]:
    """A key in any JSON spelling, and the escape rules it calls (``(name, character)``): the
    escaped spellings of a character (up to 16 for one letter) are one shared rule per
    character, so a key costs two states per character, not six, in every rule it is in.

    The rule is called after the backslash, not in its place: a state inside a key then
    calls nothing, so a walk along the key steps one frame, from its rule's table
    (:class:`structgen.engine.walk_kernel.FrameRows`), not a frame and a call per character."""
    parts: list[Expr] = [Lit(b'"')]
    escapes: dict[str, str] = {}
    for ch in key:
        part, name = _key_char(ch)
        parts += part
        if name is not None:
            escapes.setdefault(name, ch)
    return seq(*parts, Lit(b'"')), tuple(escapes.items())


@functools.lru_cache(maxsize=4096)
def _key_char(ch: str) -> tuple[tuple[Expr, ...], "str | None"]:
    """A key's character in any spelling, and the name of its escape rule (None: it has no
    escaped spelling); one node per character shared by every key, so its hash and digest
    text are made once (:func:`structgen.core.ir.digest`)."""
    options = char_encodings(ch)
    raw = tuple(Lit(x) for x in options if not x.startswith(b"\\"))
    if len(raw) == len(options):
        return raw, None
    name = f"esc_{ord(ch):x}"
    return (alt(*raw, Seq((Lit(b"\\"), Ref(name)))),), name


#: key -> :func:`_walked_key` of it (IR nodes are immutable: one copy serves every schema).
_WALKED_KEYS: Recent[str, tuple[Expr, tuple[tuple[str, str], ...]]] = Recent(2048)


#: types whose unconstrained rule :meth:`_Converter.scalar` names directly
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean", "null"})

_TEXT_KEYWORDS = ("const", "enum", "required")
_NAME_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependentRequired")


def _check_surrogates(schema: Any) -> None:
    """A property name, ``required`` entry or ``const``/``enum`` string holding a lone surrogate
    (``"\\ud800"`` in JSON text, which ``json.loads`` accepts) is a SchemaError naming where: a
    generated value is UTF-8 text, which cannot hold one. Elsewhere (descriptions) it is left be."""
    todo: list[tuple[Any, str, bool]] = [(schema, "", False)]  # (node, pointer, a value's text)
    seen: set[int] = set()
    while todo:
        node, ptr, text = todo.pop()
        if isinstance(node, str):
            if text and not node.isascii():
                _refuse_surrogate(node, ptr)
            continue
        if not isinstance(node, (dict, list)) or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, list):
            todo.extend((v, join_pointer(ptr, i), text) for i, v in enumerate(node))
            continue
        names = ptr.rpartition("/")[2] in _NAME_MAPS  # keys here are names, not keywords
        for key, value in node.items():
            if isinstance(key, str) and (text or (names and ptr.endswith("/properties"))) \
                    and not key.isascii():
                _refuse_surrogate(key, join_pointer(ptr, key))
            todo.append((value, join_pointer(ptr, key), text or (key in _TEXT_KEYWORDS and not names)))


def _refuse_surrogate(text: str, ptr: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise SchemaError(f"the string {text!r:.60} holds a lone surrogate ({text[err.start]!r} at "
                          f"character {err.start}), which UTF-8 text cannot hold, so no generated "
                          "value can spell it; use a whole character or a pair", pointer=ptr) from err


#: At most this many JSON values in a schema, counting a container shared by several places
#: (Python data can share one; JSON text spells it out at each) once per place.
MAX_SCHEMA_VALUES = 2_000_000


def check_json_data(schema: Any) -> bool:
    """Check that a schema given as Python data is JSON data, in time linear in its objects;
    return whether every array in it is a list (a tuple is JSON data too).

    An object key that is not a string, a value JSON has no spelling for (a set, an object), a
    container that contains itself, or more than :data:`MAX_SCHEMA_VALUES` values once shared
    containers are spelled out (40 levels of ``{"anyOf": [x, x]}`` are 2**40) is a SchemaError
    naming where it is.

    Example
    -------
    >>> loop = {"type": "object"}
    >>> loop["properties"] = {"a": loop}
    >>> try:
    ...     check_json_data(loop)
    ... except SchemaError as err:
    ...     print(err.pointer)
    /properties/a
    """
    size: dict[int, int] = {}  # containers walked completely -> values inside, shared ones spelled out
    open_: set[int] = set()  # containers on the current path: meeting one again is a cycle
    # where a value is: "" (the root) or (where its container is, its key or index), made into
    # a JSON pointer only for an error (joining one per value was half of this walk)
    todo: list[tuple[Any, Any, bool]] = [(schema, "", False)]
    lists_only = True
    while todo:
        node, where, leaving = todo.pop()
        if leaving:
            children = node.values() if isinstance(node, dict) else node
            n = 1 + sum(size.get(id(v), 1) for v in children)
            if n > MAX_SCHEMA_VALUES:
                raise SchemaError(f"the schema spells out more than {MAX_SCHEMA_VALUES} JSON values here "
                                  "(a container shared by several places counts at each); "
                                  "use \"$ref\" to share a subschema", pointer=_pointer(where))
            open_.discard(id(node))
            size[id(node)] = n
            continue
        if isinstance(node, (dict, list, tuple)):
            if id(node) in open_:
                raise SchemaError("the schema contains itself here (a cycle in the Python "
                                  "objects): JSON cannot spell it; use \"$ref\" for recursion",
                                  pointer=_pointer(where))
            if id(node) in size:
                continue
            open_.add(id(node))
            todo.append((node, where, True))
            if isinstance(node, dict):
                for key, value in node.items():
                    if not isinstance(key, str):
                        raise SchemaError(f"object keys must be strings, not {key!r}", pointer=_pointer(where))
                    todo.append((value, (where, key), False))
            else:
                lists_only = lists_only and type(node) is list
                todo.extend((v, (where, i), False) for i, v in enumerate(node))
        elif node is not None and not isinstance(node, (str, int, float)):  # bool is an int
            raise SchemaError(f"{type(node).__name__} is not JSON data: {node!r:.80}", pointer=_pointer(where))
    return lists_only


def _pointer(where: Any) -> str:
    """The JSON pointer of a place :func:`check_json_data` wrote as nested (container, key)."""
    keys = []
    while where != "":
        where, key = where
        keys.append(key)
    ptr = ""
    for key in reversed(keys):
        ptr = join_pointer(ptr, key)
    return ptr
