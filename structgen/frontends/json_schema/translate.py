"""JSON Schema frontend: a schema becomes a grammar IR, or an error naming what it cannot honour.

Keywords (see the README's keyword table): ``type`` (one or a list), ``properties`` with
``required`` and ``additionalProperties`` (``true``/``false``/a schema; the spec's default is
``true``), ``items``, ``enum``, ``const``, ``$ref`` into ``$defs``/``definitions`` (recursion
included), string lengths, ``pattern`` and ``format``, numeric bounds and ``multipleOf``, and
the combinators ``allOf``, ``anyOf``, ``oneOf``, ``not``, with keywords beside ``$ref`` and
``anyOf``: :mod:`structgen.frontends.json_schema.merge` merges each conjunction into one schema per
alternative, exactly or not at all. Every other JSON Schema keyword that constrains instances
(:data:`ASSERTION_KEYWORDS`) raises :class:`~structgen.errors.UnsupportedFeatureError` with its
JSON pointer: no constraint is ever dropped silently. Annotations and unknown keywords
(``title``, ``x-...``) constrain nothing and are ignored, as the spec says.

A subschema that no value satisfies (``false``, ``not: {}``, bounds that exclude each other) is
an error, except where it is one option among others: an ``anyOf`` branch, one type of a list,
an optional property (then a forbidden key), the items (then only ``[]``); such an option is
left out, and the language is unchanged.

Key order is fixed: defined properties in schema order, then additional ones, as every peer
engine does; only an object whose ``properties`` were merged from several subschemas, or that
requires keys its ``properties`` do not list (the schema gives such keys no order), takes its
keys in any order when walking, up to :data:`MAX_ANY_ORDER_KEYS` keys. When walking, keys, string literals and numbers are matched in
every JSON spelling of their value (``"\\u0061"`` is ``"a"``, ``1.0`` is ``1``); for generation
(``canonical=True``) in one spelling (``json.dumps``, non-ASCII raw or ``\\uXXXX``), which keeps
keys and enum tails forced. An additional key is any string whose *decoded* value is not a
defined key, however it is escaped.

Example
-------
>>> g = schema_to_grammar({"type": "object", "properties": {"ok": {"type": "boolean"}},
...                        "required": ["ok"], "additionalProperties": False},
...                       whitespace="compact", canonical=True)
>>> print(g.rules[0][1])
"{\\"ok\\":" s_properties_ok "}"
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable, Iterator, Literal

from structgen.core.budget import BudgetExceededError, describe_with, place
from structgen.errors import CompileError, SchemaError, UnsupportedFeatureError, is_no_value, no_value
from structgen.core.ir import ByteClass, Counted, Expr, Fsm, Grammar, Lit, Ref, Repeat, Seq, nodes, alt, seq
from structgen.frontends.json_text import JSON_CHAR, char_encodings, spellings, string_literal
from structgen.frontends.json_schema.formats import DEFINED_FORMATS, FORMAT_ALIASES, FORMAT_PATTERNS, GENERATION_PATTERNS
from structgen.frontends.json_schema.numbers import Bounds, bounded_number_ir, number_ir
from structgen.frontends.regex.ecma import char_set_ir, pattern_to_ir
from structgen.core import regular
from structgen.core.regular import difference, intersect
from structgen.frontends.json_schema.arrays import array_expr
from structgen.frontends.json_schema.objects import MAX_ANY_ORDER_KEYS, MAX_KEY_REGIONS, key_except, object_expr, object_of
from structgen.frontends.json_schema.merge import Conj, Merged, Merger, Part, join_pointer as _join, resolve_ref

__all__ = ["schema_to_grammar", "translate_schema", "Relaxed", "SUPPORTED_KEYWORDS",
           "ASSERTION_KEYWORDS", "LENIENT_KEYWORDS", "keyword_table"]

#: Bound on whitespace characters per gap in ``flexible`` mode: enough for ``indent=2`` 16+ deep.
MAX_WHITESPACE = 128

SUPPORTED_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "additionalItems", "minItems", "maxItems", "contains", "minContains", "maxContains",
    "uniqueItems", "if", "then", "else", "dependentRequired", "dependentSchemas", "dependencies",
    "patternProperties", "propertyNames", "minProperties", "maxProperties",
    "enum", "const",
    "anyOf", "allOf", "oneOf", "not", "$ref", "minLength", "maxLength",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "pattern", "format",
})

#: How each supported keyword is read; the README's keyword table is generated from these.
KEYWORD_NOTES = {
    "type": "one type or a list (`[\"string\", \"null\"]`); `integer` is a number with a zero "
            "fraction (`1.0` accepted when walking; generation writes `1`)",
    "enum": "any JSON values, compared by JSON equality (`1` = `1.0`; objects in any key order "
            f"up to {MAX_ANY_ORDER_KEYS} keys when walking); values failing sibling keywords are dropped",
    "const": "as `enum` with one value",
    "properties": "defined keys in schema order, then additional ones (every peer fixes order); "
                  "a property whose schema matches nothing (`false`, `not: {}`) is a forbidden key",
    "required": "any key; one not listed in `properties` takes the `additionalProperties` schema "
                "(any value when there is none), and the object's keys then match in any order when "
                f"walking (up to {MAX_ANY_ORDER_KEYS} keys); only binds objects",
    "additionalProperties": "true / false / a schema; spec default true (generation closes "
                            "objects unless the schema opens them)",
    "patternProperties": "additional keys split by the patterns they match (key automata: "
                         "patterns intersected, the others subtracted), each region valued by its "
                         "patterns' subschemas; a defined key matching a pattern answers to both; "
                         f"up to {MAX_KEY_REGIONS} regions (sets of patterns one key matches) per object",
    "propertyNames": "every key automaton intersected with the string language of its schema; "
                     "a defined key it rejects is forbidden",
    "minProperties": "members counted in the object's rules (per member position and count "
                     "written); a member is offered only while the count can still end in range",
    "maxProperties": "as `minProperties`",
    "items": "one schema for every item (after `prefixItems`); `false`: no more items. The "
             "array form of drafts 4 to 2019-09 reads as `prefixItems`, with `additionalItems`",
    "prefixItems": "a schema per position; items past the array's end are not required",
    "additionalItems": "the items after an array-form `items` (ignored otherwise, as the spec says)",
    "minItems": "a counter beside the array rule's state, any size (beside `contains` or "
                "`uniqueItems`: in the counting automaton's states, up to 4096)",
    "maxItems": "as `minItems`",
    "contains": "each item either matches it or not (the `not` of its schema, which must be exact "
                "as for `not`), the matches counted; `minContains`/`maxContains` bound the count; "
                "up to 3 `contains` on one array (from `allOf` or negations), each element classed "
                "by the subset it matches",
    "minContains": "with `contains`",
    "maxContains": "with `contains`",
    "uniqueItems": "exact where every item is one of a finite set of values (`enum`, `const`, "
                   "booleans, null; at most 12): the rule tracks the set written. Otherwise "
                   "refused (`lenient=True`: dropped)",
    "anyOf": "branches that match nothing are dropped; beside other keywords, those are merged "
             "into each branch (as `allOf`)",
    "allOf": "merged into one schema, exactly: types intersected, `properties` key by key (a "
             "branch's `additionalProperties` governs the keys that branch does not list), "
             "`required` united, bounds and lengths the tightest, `multipleOf` the least common "
             "multiple, every `pattern`/`format` intersected, `enum` values kept when valid under "
             "every branch; no common type is a `SchemaError` naming both pointers. An object "
             f"merged from several `properties` takes its keys in any order when walking (up to "
             f"{MAX_ANY_ORDER_KEYS} keys)",
    "oneOf": "an `anyOf` when the branches (siblings merged in) are provably disjoint: by type, "
             "`enum`/`const` values, numeric or length ranges, or a property required on both sides "
             "whose values are disjoint (a discriminator); otherwise each branch and the `not` of "
             "those it may overlap, where that negation is exact (see `not`); otherwise refused "
             "(`lenient=True`: read as `anyOf`, recorded)",
    "if": "read as `(if and then) or (not if and else)`: exact where `not if` is (see `not`); "
          "otherwise refused (`lenient=True`: the negation dropped, recorded)",
    "then": "with `if`",
    "else": "with `if`",
    "dependentRequired": "per key: the key absent, or present with the keys it requires (a "
                         "disjunction merged like `anyOf`)",
    "dependentSchemas": "per key: the key absent, or present and the schema holds",
    "dependencies": "draft 4 to 7: an array value as `dependentRequired`, a schema as `dependentSchemas`",
    "not": "of `type` (`not: {type: integer}`: numbers with a non-zero fraction), of `enum`/`const` "
           "over strings, numbers, booleans, null (each value out in every spelling; numbers then "
           "without exponents), `false`; of `required` (a key absent), `properties` (a key present "
           "whose value is `not` its schema), `items` of one schema (some item `not` it, as "
           "`contains`), `pattern` and known `format`s (strings outside the automaton: its "
           "complement), `multipleOf` (numbers spelt without exponent, the multiples taken out), "
           "`additionalProperties`, `patternProperties` and `propertyNames` (the object must have "
           "a member that breaks them: up to 4 such members, tracked as bits beside the member "
           "count), numeric bounds, lengths and item counts (the bound flipped, or another type); "
           "through `not`, `anyOf`, `allOf`, `$ref` by De Morgan. "
           "`not: {}` matches nothing (dropped inside `anyOf`, as an optional property: a "
           "forbidden key); any other form refused",
    "$ref": "inside the document: resolved against the `$id` base URIs around it (relative paths, "
            "URNs), then a JSON pointer (`~0`/`~1`, percent-encoding) or an anchor (`$anchor`, "
            "draft 6/7 `$id: \"#name\"`) in that resource; remote references refused; "
            "recursion without depth limit; keywords beside it apply too (merged as `allOf`, the "
            "2019-09+ reading). A document declaring drafts 3 to 7 is read as its draft says "
            "(keywords beside `$ref` ignored), except under `strict=True` (generation's default), "
            "where they apply: what is generated then meets both readings",
    "minLength": "code points, whatever their JSON spelling; beside `pattern`/`format` a "
                 "product automaton, refused when too large",
    "maxLength": "as `minLength`",
    "minimum": "exact digit-by-digit automaton, integers and decimals, as written in the schema",
    "maximum": "as `minimum`",
    "exclusiveMinimum": "as `minimum` (draft-4 boolean form too)",
    "exclusiveMaximum": "as `minimum` (draft-4 boolean form too)",
    "multipleOf": "remainder counter intersected with the range; integers and decimals; refused "
                  "above 4096 counter states",
    "pattern": "ECMA-262 (`u` flag) on the decoded string, unanchored search; lookaround, "
               "backreferences, `\\b`, `\\p{..}` refused",
    "format": "exact regular languages, see the format table; other formats JSON Schema defines "
              "refused; custom formats (`byte`, `int32`, ...) are annotations: not checked, "
              "recorded in `relaxed`",
}

#: Keywords that ``lenient=True`` may drop when structgen cannot honour them, recording each on
#: the compiled grammar (``CompiledGrammar.relaxed``). Each only narrows what is valid, so
#: dropping one widens the language: outputs may then fail the schema. Off by default.
LENIENT_KEYWORDS = frozenset({
    "format", "pattern", "minLength", "maxLength", "multipleOf", "uniqueItems", "contains", "minContains",
    "maxContains", "minItems", "maxItems",
    "not", "if", "then", "else", "propertyNames", "minProperties", "maxProperties",
    "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties",
    "unevaluatedItems", "oneOf",
})


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


@dataclass(frozen=True)
class Relaxed:
    """A constraint left unchecked: the keyword, where, and why. ``lenient=True`` drops what
    cannot be honoured; a custom ``format`` is never checked (the spec makes it an annotation)."""

    keyword: str
    pointer: str
    reason: str

#: Keywords of JSON Schema (drafts 4 to 2020-12) that constrain instances. Of these, any that
#: structgen does not support raises UnsupportedFeatureError. Keywords outside this list and
#: outside the supported ones are not constraints (annotations, vendor extensions such as
#: ``x-kubernetes-*``, draft-4 ``id``): the spec says to ignore them, and so do we.
ASSERTION_KEYWORDS = frozenset({
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "format", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "contains", "maxProperties", "minProperties",
    "required", "dependentRequired", "dependentSchemas", "dependencies", "properties",
    "patternProperties", "additionalProperties", "propertyNames", "items", "prefixItems",
    "additionalItems", "unevaluatedItems", "unevaluatedProperties", "allOf", "anyOf", "oneOf",
    "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef",
})

# ---------------------------------------------------------------- the converter


class _Converter:
    def __init__(self, root: Any, whitespace: Literal["flexible", "compact"], strict: bool = False,
                 canonical: bool = False, lenient: bool = False) -> None:
        if whitespace not in ("flexible", "compact"):
            raise ValueError(f"whitespace must be 'flexible' or 'compact', not {whitespace!r}")
        self.root = root
        self.flexible = whitespace == "flexible"
        self.strict = strict
        self.canonical = canonical
        self.lenient = lenient
        # drafts 3 and 4: an integer has no fraction or exponent part (1.0 is a number only)
        dialect = _dialect(root.get("$schema")) if isinstance(root, dict) else ""
        self.integral_spellings = dialect not in ("json-schema.org/draft-03/schema",
                                                  "json-schema.org/draft-04/schema")
        self.relaxed: list[Relaxed] = []
        self.rules: dict[str, Expr] = {}
        self.by_pointer: dict[str | tuple[str, ...], str] = {}
        self.merger = Merger(root, check=self.check, refuse=self.refuse, ref_siblings_always=strict)

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
            raise UnsupportedFeatureError("$schema", pointer=_join(ptr, "$schema"),
                                          hint=f"{dialect!r} is not a JSON Schema draft's metaschema; "
                                               "its vocabularies (which keywords assert) are unknown")
        for kw in schema:
            if kw in ASSERTION_KEYWORDS and kw not in SUPPORTED_KEYWORDS:
                self.refuse(kw, _join(ptr, kw), "not in structgen's supported keywords yet")

    def key_literal(self, key: str) -> Expr:
        """A string literal: canonical when generating, any JSON spelling when walking."""
        if self.canonical:
            return string_literal(key)
        parts: list[Expr] = [Lit(b'"')]
        for ch in key:
            options = char_encodings(ch)
            raw = [Lit(x) for x in options if not x.startswith(b"\\")]
            if len(raw) == len(options):
                parts += raw
                continue
            # The escaped spellings (up to 16 for one letter) are one shared rule per
            # character: a key costs a state per character, not six, in every rule it is in.
            escaped = alt(*(Lit(x) for x in options if x.startswith(b"\\")))
            parts.append(alt(*raw, self.rule(f"esc_{ord(ch):x}", escaped)))
        return seq(*parts, Lit(b'"'))

    def rule(self, name: str, body: Expr) -> Ref:
        self.rules.setdefault(name, body)
        return Ref(name)

    @contextlib.contextmanager
    def undo_on_error(self) -> Iterator[None]:
        """Rules and names made inside are forgotten when it raises: a dropped alternative
        leaves no half-built rule behind for a later reference to find."""
        rules, names = len(self.rules), len(self.by_pointer)
        try:
            yield
        except BaseException:
            for name in list(self.rules)[rules:]:
                del self.rules[name]
            for key in list(self.by_pointer)[names:]:
                del self.by_pointer[key]
            raise

    @property
    def ws(self) -> Expr:
        if not self.flexible:
            return Seq(())
        return self.rule("ws", Counted(ByteClass.of(" \t\n\r"), 0, MAX_WHITESPACE))

    def primitive(self, name: str) -> Ref:
        if name == "string":
            return self.string_rule(0, None)
        if name not in self.rules:
            bodies = {"null": Lit(b"null"), "boolean": alt(Lit(b"true"), Lit(b"false"))}
            if name in bodies:
                return self.rule(name, bodies[name])
            if name in ("number", "integer"):
                self.rules[name] = number_ir(integer=name == "integer", forms="plain" if self.canonical else "any",
                                             integral_spellings=self.integral_spellings)
                return Ref(name)
            if name == "value":
                self.rules["value"] = Seq(())  # reserve the name (recursive)
                scalars = [self.primitive(t) for t in ("string", "number", "boolean", "null")]
                member = seq(key_except(self, set()), self.ws, Lit(b":"), self.ws, Ref("value"))
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
        name = self.by_pointer.get(key)
        if name is not None:
            return Ref(name)
        text = key if isinstance(key, str) else "&".join(key)
        name = "root" if key == "" else "s" + re.sub(r"[^A-Za-z0-9_]+", "_", text)
        if not isinstance(key, str) and len(name) > 64:  # several pointers: shortened
            name = name[:48] + "_" + hashlib.sha1(text.encode()).hexdigest()[:10]
        while name in self.rules:
            name += "_"
        with self.undo_on_error(), place(f"'{text or '/'}'"):
            self.by_pointer[key] = name
            self.rules[name] = Seq(())  # reserved: recursion may refer to it before it is built
            self.rules[name] = build()
        return Ref(name)

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
        if constraints == ["$ref"] or ("$ref" in constraints and self.merger.ref_alone):
            # alone (or beside keywords its draft ignores): the target's rule, shared
            target = resolve_ref(self.root, schema["$ref"], ptr)
            return self.convert(target.schema, target.pointer)
        if constraints == ["allOf"] and isinstance(schema["allOf"], list) and len(schema["allOf"]) == 1:
            return self.convert(schema["allOf"][0], _join(ptr, "allOf", 0))  # one branch: its rule, shared
        if constraints == ["anyOf"]:  # alone: the branches' rules; a branch matching nothing is dropped
            branches = schema["anyOf"]
            if not isinstance(branches, list) or not branches:
                raise SchemaError("anyOf must be a non-empty array", pointer=_join(ptr, "anyOf"))
            return self.first_of(lambda b: self.convert(b[1], _join(ptr, "anyOf", b[0])), enumerate(branches))
        return self.conjunction(Conj((Part(schema, ptr),)))

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
            raise errors[0]
        return alt(*exprs)

    def conjunction(self, conj: Conj) -> Expr:
        """Subschemas that all apply: the union of their merged alternatives (schema_merge)."""
        return self.first_of(self.alternative, self.merger.alternatives(conj))

    def alternative(self, m: Merged) -> Expr:
        if m.enum is not None:  # the values valid under every conjunct
            return alt(*(self.literal(v, m.pointer) for v in m.enum))
        return self.first_of(lambda t: self.typed(t, m), m.types())

    def typed(self, t: str, m: Merged) -> Expr:
        if t == "string":
            return self.string(m)
        if t == "object":
            return self.object(m)
        if t == "array":
            return self.array(m)
        if t in ("number", "integer", "fraction"):
            return self.number(t, m)
        if t == "boolean":
            left = [v for v in (True, False) if not any(x is v for x, _ in m.excluded)]
            return self.primitive("boolean") if len(left) == 2 else Lit(json.dumps(left[0]).encode())
        return self.primitive(t)

    def number(self, t: str, m: Merged) -> Expr:
        """``number``, ``integer``, or ``fraction`` (a number that is no integer: ``not`` integer)."""
        forms = "plain" if self.canonical else "any"
        integer, fractional = t == "integer", t == "fraction"
        excluded = [(v, p) for v, p in m.excluded if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not fractional and not excluded and not m.non_divisors and m.bounds == Bounds() and m.divisor is None:
            return self.primitive(t)
        ptr = m.number_pointer or m.pointer
        # values taken out (not enum, not multipleOf) leave exponent spellings out: 2e0 is 2
        exponents = not excluded and not m.non_divisors

        def build(divisor: Fraction | None) -> Expr:
            return bounded_number_ir(m.bounds, divisor, integer=integer, forms=forms, pointer=ptr,
                                     exponents=exponents, fractional=fractional,
                                     integral_spellings=self.integral_spellings)

        try:
            expr = build(m.divisor)
        except UnsupportedFeatureError as err:
            if err.keyword != "multipleOf" or not self.lenient or is_no_value(err):
                raise
            self.refuse("multipleOf", err.pointer, err.hint)
            expr = build(None)
        if m.non_divisors:  # every multiple taken out, however spelt (without exponent)
            multiples = alt(*(bounded_number_ir(Bounds(), d, integer=False, forms=forms, pointer=where,
                                                exponents=False) for d, where in m.non_divisors))
            expr = difference(expr, multiples, what=f"the numbers at {ptr or '/'}")
            if not expr.accept:
                raise no_value(UnsupportedFeatureError("not", pointer=m.non_divisors[0][1],
                                                       hint="every number left is a multiple `not` excludes"))
        if excluded:  # every spelling of each value taken out (1, 1.0, 1.00 ...)
            expr = difference(expr, alt(*(number_ir(integer=False, minimum=v, maximum=v) for v, _ in excluded)),
                              what=f"the numbers at {ptr or '/'}")
            if not expr.accept:
                raise no_value(UnsupportedFeatureError("not", pointer=excluded[0][1],
                                                       hint="no number is left once the excluded values are out"))
        return expr

    def string(self, m: Merged) -> Expr:
        lo, hi = m.min_length, m.max_length
        if hi is not None and hi < lo:
            raise no_value(SchemaError("maxLength is below minLength: no string fits",
                                       pointer=m.max_length_pointer))
        excluded = sorted({v for v, _ in m.excluded if isinstance(v, str)})
        if m.patterns or m.formats or m.avoided:
            return self.constrained_string(m, lo, hi, excluded)
        return self.plain_string(lo, hi, excluded, m)

    def plain_string(self, lo: int, hi: int | None, excluded: list[str], m: Merged) -> Expr:
        """Strings of ``lo``..``hi`` characters but the ``excluded`` ones (in every spelling)."""
        if not excluded:
            return self.string_rule(lo, hi)
        if hi == 0 and "" in excluded:
            raise no_value(UnsupportedFeatureError("not", pointer=m.excluded[0][1],
                                                   hint="the only string the lengths allow is excluded"))
        words = frozenset(tuple(frozenset(char_encodings(ch)) for ch in v) for v in excluded)
        digest = hashlib.sha1(json.dumps(excluded).encode()).hexdigest()[:10]
        suffix = f"{lo}_{'' if hi is None else hi}_except_{digest}"
        chars = self.rule(f"chars_{suffix}", Counted(JSON_CHAR, lo, hi, words))
        return self.rule(f"string_{suffix}", seq(Lit(b'"'), chars, Lit(b'"')))

    def constrained_string(self, m: Merged, lo: int, hi: int | None, excluded: list[str]) -> Expr:
        """A string under patterns and/or formats, lengths and excluded values: one automaton,
        the intersection of each (lengths count characters, whatever their spelling)."""
        pieces = self.string_pieces(m)
        if not pieces and not m.avoided:  # all relaxed
            return self.plain_string(lo, hi, excluded, m)
        content = self.string_content(m, pieces)
        digest = hashlib.sha1(repr(content).encode()).hexdigest()[:10]
        return self.rule(f"string_{digest}", seq(Lit(b'"'), content, Lit(b'"')))

    def string_pieces(self, m: Merged) -> list[Expr]:
        """The automata of ``m``'s patterns and formats (those ``lenient`` keeps)."""
        pieces = [self.string_piece("pattern", pattern, where) for pattern, where in m.patterns]
        pieces += [self.string_piece("format", fmt, where) for fmt, where in m.formats]
        return [p for p in pieces if p is not None]

    def string_piece(self, kind: str, value: str, where: str) -> Expr | None:
        """The automaton of one pattern or format; None where ``lenient`` dropped it."""
        if kind == "pattern":
            try:
                return pattern_to_ir(value, pointer=where, canonical=self.canonical)
            except UnsupportedFeatureError as err:
                self.refuse("pattern", err.pointer, err.hint)
                return None
        patterns = GENERATION_PATTERNS if self.canonical else FORMAT_PATTERNS
        value = FORMAT_ALIASES.get(value, value)
        if value in patterns:
            return pattern_to_ir(patterns[value], canonical=self.canonical)
        if value not in DEFINED_FORMATS:  # an annotation: no constraint, but said so
            self.note(Relaxed("format", where, f"custom format {value!r}: JSON Schema defines no such "
                                                 "format, so it is an annotation, not checked"))
            return None
        self.refuse("format", where, f"format {value!r} is not supported "
                                     f"(supported: {', '.join(sorted(FORMAT_PATTERNS))})")
        return None

    def string_content(self, m: Merged, pieces: list[Expr] | None = None) -> Expr:
        """The contents (between the quotes) of the strings ``m`` allows, as one regular
        automaton: patterns, formats, lengths and excluded values intersected."""
        if pieces is None:
            pieces = self.string_pieces(m)
        lo, hi = m.min_length, m.max_length
        if hi is not None and hi < lo:
            raise no_value(SchemaError("maxLength is below minLength: no string fits",
                                       pointer=m.max_length_pointer))
        excluded = sorted({v for v, _ in m.excluded if isinstance(v, str)})
        ptr = m.pointer
        keyword = "pattern" if m.patterns else "format" if m.formats else "maxLength"
        what = f"the string constraints at {ptr or '/'}"
        char = char_set_ir([(0, 0x10FFFF)], canonical=True) if self.canonical else JSON_CHAR

        def checked(operation, *exprs: Expr) -> Expr:  # regular.intersect or regular.difference
            try:
                return operation(*exprs, what=what)
            except BudgetExceededError:
                raise
            except CompileError as err:
                raise UnsupportedFeatureError(keyword, pointer=ptr,
                                              hint=f"{err}: the pattern, format and lengths together "
                                                   "are too large an automaton") from err

        content = Repeat(char, 0, None) if not pieces else pieces[0] if len(pieces) == 1 else checked(intersect, *pieces)
        for kind, value, where in m.avoided:  # under not: the strings it matches are taken out
            # A format's full reading, even when generating (whose own format patterns are
            # narrower): every string the format accepts is taken out.
            if kind == "format":
                value = FORMAT_ALIASES.get(value, value)
                if value not in DEFINED_FORMATS:
                    raise UnsupportedFeatureError("format", pointer=where, hint=f"custom format {value!r} under "
                                                  "not: as an annotation it would exclude every string")
            avoided = (pattern_to_ir(FORMAT_PATTERNS[value], canonical=self.canonical)
                       if kind == "format" and value in FORMAT_PATTERNS else self.string_piece(kind, value, where))
            if avoided is None:
                raise UnsupportedFeatureError(kind, pointer=where, hint=f"{kind} under not cannot be dropped: "
                                                                       "dropping it would widen the schema")
            content = checked(difference, content, avoided)
        if lo or hi is not None:
            # Lengths the pattern implies anyway need no counter (a char takes 1+ bytes).
            shortest, longest = regular.length_range(content)
            if lo <= min(shortest, 1) and hi is not None and longest is not None and longest <= hi:
                lo, hi = 0, None
        if lo or hi is not None:
            # Lengths run beside the pattern as a product automaton (states x count): exact, but
            # refused when that product would be too large (e.g. an email format with a
            # maxLength of 255); lenient=True then drops the length and records it.
            length_kw, where = (("maxLength", m.max_length_pointer) if hi is not None
                                else ("minLength", m.min_length_pointer))
            size = regular.state_count(content) * (max(lo, hi or 0) + 1)
            if size > regular.DEFAULT_STATE_LIMIT:
                self.refuse(length_kw, _join(where, length_kw),
                            f"a length of {max(lo, hi or 0)} beside a pattern or format would need an "
                            f"automaton of about {size} states (limit {regular.DEFAULT_STATE_LIMIT})")
            else:
                content = checked(lambda e, what: regular.with_length(e, char, lo, hi, what=what), content)
        if excluded:
            content = checked(difference, content, alt(*(spellings(v) for v in excluded)))
        if isinstance(content, Fsm) and not content.accept:
            raise no_value(UnsupportedFeatureError(
                keyword, pointer=ptr, hint="no string satisfies the pattern, format and lengths together"))
        return content

    # -- objects and arrays

    def object(self, m: Merged) -> Expr:
        return object_expr(self, m)

    def array(self, m: Merged) -> Expr:
        return array_expr(self, m)

    def array_of(self, item: Ref) -> Expr:
        ws = self.ws
        return alt(
            seq(Lit(b"["), ws, Lit(b"]")),
            seq(Lit(b"["), ws, item, Repeat(seq(ws, Lit(b","), ws, item), 0, None), ws, Lit(b"]")),
        )

    # -- enum / const

    def object_literal_any_order(self, value: dict, ptr: str) -> Expr:
        """An object value with its members in any order (JSON objects are unordered).

        One rule per set of members still to write: 2**n rules for n keys, hence the bound.
        """
        ws = self.ws
        members = [seq(self.key_literal(k), ws, Lit(b":"), ws, self.literal(v, ptr)) for k, v in value.items()]
        uid = len(self.rules)

        def rest(left: int) -> Expr:
            if not left:
                return seq(ws, Lit(b"}"))
            name = f"lit{uid}_{left}"
            if name not in self.rules:
                self.rules[name] = Seq(())  # reserved while its alternatives are built
                self.rules[name] = alt(*(seq(ws, Lit(b","), ws, members[i], rest(left & ~(1 << i)))
                                         for i in range(len(members)) if left >> i & 1))
            return Ref(name)

        full = (1 << len(members)) - 1
        return seq(Lit(b"{"), ws, alt(*(seq(members[i], rest(full & ~(1 << i))) for i in range(len(members)))))

    def literal(self, value: Any, ptr: str) -> Expr:
        ws = self.ws
        if isinstance(value, str):
            return self.key_literal(value)
        if value is None or isinstance(value, bool):
            return Lit(json.dumps(value).encode())
        if isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise SchemaError(f"enum value {value!r} is not JSON", pointer=ptr)
            if self.canonical:
                return Lit(json.dumps(value).encode())
            # walking: every spelling of the value (1 == 1.0 == 1.00 in JSON), exponents aside
            return number_ir(integer=False, minimum=value, maximum=value, pointer=ptr)
        if isinstance(value, list):
            if not value:
                return seq(Lit(b"["), ws, Lit(b"]"))
            parts: list[Expr] = [Lit(b"["), ws]
            for i, v in enumerate(value):
                if i:
                    parts += [ws, Lit(b","), ws]
                parts.append(self.literal(v, ptr))
            return seq(*parts, ws, Lit(b"]"))
        if isinstance(value, dict):
            if not value:
                return seq(Lit(b"{"), ws, Lit(b"}"))
            if not self.canonical and 1 < len(value) <= MAX_ANY_ORDER_KEYS:
                return self.object_literal_any_order(value, ptr)
            parts = [Lit(b"{"), ws]
            for i, (k, v) in enumerate(value.items()):
                if i:
                    parts += [ws, Lit(b","), ws]
                parts += [self.key_literal(k), ws, Lit(b":"), ws, self.literal(v, ptr)]
            return seq(*parts, ws, Lit(b"}"))
        raise SchemaError(f"enum value {value!r} is not JSON", pointer=ptr)


def schema_to_grammar(schema: Any, *, whitespace: Literal["flexible", "compact"] = "flexible",
                      strict: bool = False, canonical: bool = False, lenient: bool = False) -> Grammar:
    """Translate a JSON schema into a :class:`~structgen.core.ir.Grammar` whose start rule is ``root``.

    See :func:`translate_schema`, which also returns what ``lenient`` dropped.
    """
    return translate_schema(schema, whitespace=whitespace, strict=strict, canonical=canonical,
                            lenient=lenient)[0]


def translate_schema(schema: Any, *, whitespace: Literal["flexible", "compact"] = "flexible",
                     strict: bool = False, canonical: bool = False,
                     lenient: bool = False) -> tuple[Grammar, tuple[Relaxed, ...]]:
    """The grammar of a JSON schema, and the constraints ``lenient`` dropped (empty otherwise).

    ``strict=True`` closes objects whose schema does not mention ``additionalProperties`` (the
    spec's default is open); an explicit ``true`` or subschema still opens them.
    ``canonical=True`` (generation) spells values one way: keys and strings as ``json.dumps``
    writes them (non-ASCII raw or escaped), integers without fraction, no exponents, no ``-0``;
    ``False`` (walking, validating) accepts every JSON spelling of an allowed value.
    ``lenient=True`` drops keywords of :data:`LENIENT_KEYWORDS` that cannot be honoured,
    instead of raising; each is recorded.

    Raises
    ------
    SchemaError
        The schema is malformed (bad ``type``, unresolvable ``$ref`` …).
    UnsupportedFeatureError
        A keyword the compiler cannot honour yet; the message names it and its JSON pointer.
    """
    _check_keys(schema)
    conv = _Converter(schema, whitespace, strict, canonical, lenient)
    conv.convert(schema, "")
    describe_with(_rule_places(conv))
    rules = [("root", conv.rules.pop("root"))] + list(conv.rules.items())
    return Grammar(tuple(rules), "root"), tuple(conv.relaxed)  # checked when compiled


def _check_keys(schema: Any) -> None:
    """A schema given as Python data must be JSON: an object key that is not a string is a
    SchemaError naming where it is (JSON text can only spell string keys)."""
    todo = [(schema, "")]
    while todo:
        node, ptr = todo.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise SchemaError(f"object keys must be strings, not {key!r}", pointer=ptr)
                todo.append((value, _join(ptr, key)))
        elif isinstance(node, (list, tuple)):
            todo.extend((v, _join(ptr, i)) for i, v in enumerate(node))


def _rule_places(conv: _Converter) -> Callable[[str], str]:
    """How a compile budget names a rule: the schema path it was built for, or for a helper
    rule (an object's tails, a string automaton) the path of the first schema rule using it."""
    places = {name: key if isinstance(key, str) else " & ".join(key) for key, name in conv.by_pointer.items()}
    todo = list(places)
    while todo:
        name = todo.pop(0)
        for node in nodes(conv.rules.get(name, Seq(()))):
            if isinstance(node, Ref) and node.name not in places:
                places[node.name] = places[name]
                todo.append(node.name)
    return lambda name: f"'{places[name] or '/'}'" if name in places else name


def keyword_table() -> str:
    """The README's keyword tables (markdown), generated from this module and the formats."""
    from structgen.frontends.json_schema.formats import FORMAT_NOTES

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| keyword | status | reading |", "|---|---|---|"]
    for kw in sorted(SUPPORTED_KEYWORDS, key=str.lower):
        status = "supported (where refused, `lenient=True` drops it)" if kw in LENIENT_KEYWORDS else "supported"
        rows.append(f"| `{kw}` | {status} | {cell(KEYWORD_NOTES[kw])} |")
    for kw in sorted(ASSERTION_KEYWORDS - SUPPORTED_KEYWORDS, key=str.lower):
        status = "refused (`lenient=True` drops it, recorded)" if kw in LENIENT_KEYWORDS else "refused"
        rows.append(f"| `{kw}` | {status} | `UnsupportedFeatureError` naming the keyword and its JSON pointer |")
    rows.append("| `$schema` | read | a JSON Schema draft (3 to 2020-12) is read as above; any other "
                "metaschema is refused (its vocabularies are unknown) |")
    rows.append("| annotations, unknown keywords | ignored | `title`, `description`, `default`, `x-…`, "
                "draft-4 `id`, …: they constrain nothing, as the spec says |")
    formats = ["| format | reading |", "|---|---|"]
    formats += [f"| `{name}` | {cell(note)} |" for name, note in FORMAT_NOTES.items()]
    formats.append("| (generation) | `date`, `time`, `date-time` are generated without leap seconds "
                   "and year 0000, which common validators refuse though the RFC allows them |")
    return "\n".join(rows) + "\n\n" + "\n".join(formats) + "\n"
