"""JSON Schema frontend: a schema becomes a grammar IR, or an error naming what it cannot honour.

First cut (see the README's keyword table): ``type`` (one or a list), ``properties`` with
``required`` and ``additionalProperties`` (``true``/``false``/a schema; the spec's default is
``true``), ``items``, ``enum``, ``const``, ``anyOf``, ``$ref`` into ``$defs``/``definitions``
(recursion included), ``minLength``/``maxLength``. Every other JSON Schema keyword that
constrains instances (:data:`ASSERTION_KEYWORDS`) raises
:class:`~structgen.errors.UnsupportedFeatureError` with its JSON pointer: no constraint is ever
dropped silently. Annotations and unknown keywords (``title``, ``x-...``) constrain nothing
and are ignored, as the spec says.

Key order is fixed: defined properties in schema order, then additional ones, as every peer
engine does. When walking, keys, string literals and numbers are matched in every JSON
spelling of their value (``"\\u0061"`` is ``"a"``, ``1.0`` is ``1``); for generation
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

import hashlib
import json
import math
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Literal

from .errors import CompileError, SchemaError, UnsupportedFeatureError
from .ir import ByteClass, Counted, Expr, Fsm, Grammar, Lit, Ref, Repeat, Seq, alt, seq
from .json_text import JSON_CHAR, char_encodings, string_literal
from .automaton import MAX_UNROLL
from .formats import FORMAT_PATTERNS, GENERATION_PATTERNS
from .numbers import bounded_number_ir, number_ir, read_bounds
from .regex import char_set_ir, pattern_to_ir
from . import regular
from .regular import intersect

__all__ = ["schema_to_grammar", "translate_schema", "Relaxed", "SUPPORTED_KEYWORDS",
           "ASSERTION_KEYWORDS", "LENIENT_KEYWORDS", "keyword_table"]

#: Bound on whitespace characters per gap in ``flexible`` mode: enough for ``indent=2`` 16+ deep.
MAX_WHITESPACE = 128

#: An enum/const object of up to this many keys matches in any key order when walking; a larger
#: one in the schema's order only (the any-order automaton grows as 2**keys).
MAX_ANY_ORDER_KEYS = 6

SUPPORTED_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "$ref", "minLength", "maxLength",
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
    "properties": "defined keys in schema order, then additional ones (every peer fixes order)",
    "required": "keys listed in `properties`",
    "additionalProperties": "true / false / a schema; spec default true (generation closes "
                            "objects unless the schema opens them)",
    "items": "one schema for every item",
    "anyOf": "alone (sibling keywords: structures issue)",
    "$ref": "`#/json/pointer` (`~0`/`~1`, percent-encoding) and `#anchor` inside the document; "
            "recursion without depth limit",
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
    "format": "exact regular languages, see the format table; unknown formats refused",
}

#: Keywords that ``lenient=True`` may drop when structgen cannot honour them, recording each on
#: the compiled grammar (``CompiledGrammar.relaxed``). Each only narrows what is valid, so
#: dropping one widens the language: outputs may then fail the schema. Off by default.
LENIENT_KEYWORDS = frozenset({
    "format", "pattern", "minLength", "maxLength", "multipleOf", "uniqueItems", "contains", "minContains", "maxContains",
    "not", "if", "then", "else", "propertyNames", "minProperties", "maxProperties",
    "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties",
    "unevaluatedItems", "oneOf",
})


@dataclass(frozen=True)
class Relaxed:
    """A constraint ``lenient=True`` dropped: the keyword, where, and why it could not be kept."""

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

_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_NUMBER_KW = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
_OBJECT_KW = {"properties", "required", "additionalProperties"}
_ARRAY_KW = {"items"}
_STRING_KW = {"minLength", "maxLength"}

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
        self.relaxed: list[Relaxed] = []
        self.rules: dict[str, Expr] = {}
        self.by_pointer: dict[str, str] = {}
        self._validator_cls: Any = None

    # -- rule plumbing

    def refuse(self, keyword: str, pointer: str, hint: str) -> None:
        """Raise UnsupportedFeatureError, or under ``lenient`` record the keyword as dropped."""
        if self.lenient and keyword in LENIENT_KEYWORDS:
            self.relaxed.append(Relaxed(keyword, pointer, hint))
            return
        raise UnsupportedFeatureError(keyword, pointer=pointer, hint=hint)

    def key_literal(self, key: str) -> Expr:
        """A string literal: canonical when generating, any JSON spelling when walking."""
        if self.canonical:
            return string_literal(key)
        parts: list[Expr] = [Lit(b'"')]
        for ch in key:
            spellings = char_encodings(ch)
            parts.append(Lit(spellings[0]) if len(spellings) == 1 else alt(*(Lit(x) for x in spellings)))
        return seq(*parts, Lit(b'"'))

    def number(self, integer: bool, schema: dict, ptr: str) -> Expr:
        forms = "plain" if self.canonical else "any"
        if not any(k in schema for k in _NUMBER_KW):
            name = "integer" if integer else "number"
            if name not in self.rules:
                self.rules[name] = number_ir(integer=integer, forms=forms)
            return Ref(name)
        bounds, divisor = read_bounds(schema, ptr)
        try:
            return bounded_number_ir(bounds, divisor, integer=integer, forms=forms, pointer=ptr)
        except UnsupportedFeatureError as err:
            if err.keyword != "multipleOf" or not self.lenient:
                raise
            self.refuse("multipleOf", err.pointer, err.hint)
            return bounded_number_ir(bounds, None, integer=integer, forms=forms, pointer=ptr)

    def rule(self, name: str, body: Expr) -> Ref:
        self.rules.setdefault(name, body)
        return Ref(name)

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
                return self.number(name == "integer", {}, "")
            if name == "value":
                self.rules["value"] = Seq(())  # reserve the name (recursive)
                scalars = [self.primitive(t) for t in ("string", "number", "boolean", "null")]
                self.rules["value"] = alt(*scalars, self.object_of([], set(), Ref("value")),
                                          self.array_of(Ref("value")))
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
        name = self.by_pointer.get(pointer)
        if name is not None:
            return Ref(name)
        name = "root" if pointer == "" else "s" + re.sub(r"[^A-Za-z0-9_]+", "_", pointer)
        while name in self.rules:
            name += "_"
        self.by_pointer[pointer] = name
        self.rules[name] = Seq(())  # reserved: recursion may refer to it before it is built
        self.rules[name] = self.body(schema, pointer)
        return Ref(name)

    def body(self, schema: Any, ptr: str) -> Expr:
        if schema is True or schema == {}:
            return self.primitive("value")
        if schema is False:
            raise UnsupportedFeatureError("false", pointer=ptr,
                                          hint="a false schema matches nothing, so no value can be generated")
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}",
                              pointer=ptr)
        for kw in schema:
            if kw in ASSERTION_KEYWORDS and kw not in SUPPORTED_KEYWORDS:
                self.refuse(kw, _join(ptr, kw), "not in structgen's supported keywords yet")
        if "enum" in schema or "const" in schema:
            return self.enum(schema, ptr)
        if "$ref" in schema:
            if any(k in schema for k in SUPPORTED_KEYWORDS - {"$ref"}):
                raise UnsupportedFeatureError("$ref", pointer=ptr,
                                              hint="keywords beside $ref are not supported yet")
            return self.ref(schema["$ref"], ptr)
        if "anyOf" in schema:
            if any(k in schema for k in SUPPORTED_KEYWORDS - {"anyOf"}):
                raise UnsupportedFeatureError("anyOf", pointer=ptr,
                                              hint="keywords beside anyOf are not supported yet")
            branches = schema["anyOf"]
            if not isinstance(branches, list) or not branches:
                raise SchemaError("anyOf must be a non-empty array", pointer=_join(ptr, "anyOf"))
            return alt(*(self.convert(b, _join(ptr, "anyOf", i)) for i, b in enumerate(branches)))
        types = schema.get("type", list(_TYPES))
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not types or any(t not in _TYPES for t in types):
            raise SchemaError(f"invalid type {schema.get('type')!r}", pointer=_join(ptr, "type"))
        if "number" in types and "integer" in types:
            types = [t for t in types if t != "integer"]
        return alt(*(self.typed(t, schema, ptr) for t in dict.fromkeys(types)))

    def typed(self, t: str, schema: dict, ptr: str) -> Expr:
        if t == "string":
            lo = _non_negative_int(schema, "minLength", ptr, 0)
            hi = _non_negative_int(schema, "maxLength", ptr, None)
            if hi is not None and hi < lo:
                raise SchemaError("maxLength is below minLength: no string fits", pointer=ptr)
            if "pattern" in schema or "format" in schema:
                return self.constrained_string(schema, lo, hi, ptr)
            return self.string_rule(lo, hi)
        if t == "object":
            return self.object(schema, ptr)
        if t == "array":
            items = schema.get("items", True)
            if isinstance(items, list):
                raise UnsupportedFeatureError("items", pointer=_join(ptr, "items"),
                                              hint="the array form of items (tuples) is not supported yet")
            return self.array_of(self.convert(items, _join(ptr, "items")))
        if t in ("number", "integer"):
            return self.number(t == "integer", schema, ptr)
        return self.primitive(t)

    def constrained_string(self, schema: dict, lo: int, hi: int | None, ptr: str) -> Expr:
        """A string under ``pattern`` and/or ``format``, and lengths: one automaton, the
        intersection of each (lengths count characters, whatever their spelling)."""
        pieces: list[Expr] = []
        if "pattern" in schema:
            try:
                pieces.append(pattern_to_ir(schema["pattern"], pointer=_join(ptr, "pattern"),
                                            canonical=self.canonical))
            except UnsupportedFeatureError as err:
                self.refuse("pattern", err.pointer, err.hint)
        fmt = schema.get("format")
        if fmt is not None:
            if not isinstance(fmt, str):
                raise SchemaError(f"format must be a string, not {fmt!r}", pointer=_join(ptr, "format"))
            patterns = GENERATION_PATTERNS if self.canonical else FORMAT_PATTERNS
            if fmt in patterns:
                pieces.append(pattern_to_ir(patterns[fmt], canonical=self.canonical))
            else:
                self.refuse("format", _join(ptr, "format"),
                            f"unknown format {fmt!r} (known: {', '.join(sorted(FORMAT_PATTERNS))})")
        if not pieces:  # all relaxed
            return self.string_rule(lo, hi)
        keyword = "pattern" if "pattern" in schema else "format"

        def combined(*exprs: Expr) -> Expr:
            try:
                return exprs[0] if len(exprs) == 1 else intersect(
                    *exprs, what=f"the string constraints at {ptr or '/'}")
            except CompileError as err:
                raise UnsupportedFeatureError(keyword, pointer=ptr,
                                              hint=f"{err}: the pattern, format and lengths together "
                                                   "are too large an automaton") from err

        content = combined(*pieces)
        if lo or hi is not None:
            # Lengths the pattern implies anyway need no counter (a char takes 1+ bytes).
            shortest, longest = regular.length_range(content)
            if lo <= min(shortest, 1) and hi is not None and longest is not None and longest <= hi:
                lo, hi = 0, None
        if lo or hi is not None:
            # Lengths run beside the pattern as a product automaton (states x count): exact, but
            # refused when that product would be too large (e.g. an email format with a
            # maxLength of 255); lenient=True then drops the length and records it.
            length_kw = "maxLength" if hi is not None else "minLength"
            size = regular.state_count(content) * (max(lo, hi or 0) + 1)
            if size > regular.DEFAULT_STATE_LIMIT:
                self.refuse(length_kw, _join(ptr, length_kw),
                            f"a length of {max(lo, hi or 0)} beside a pattern or format would need an "
                            f"automaton of about {size} states (limit {regular.DEFAULT_STATE_LIMIT})")
            else:
                char = char_set_ir([(0, 0x10FFFF)], canonical=True) if self.canonical else JSON_CHAR
                content = combined(content, Repeat(char, lo, hi))
        if isinstance(content, Fsm) and not content.accept:
            raise UnsupportedFeatureError(keyword, pointer=ptr,
                                          hint="no string satisfies the pattern, format and lengths together")
        digest = hashlib.sha1(repr(content).encode()).hexdigest()[:10]
        return self.rule(f"string_{digest}", seq(Lit(b'"'), content, Lit(b'"')))

    def ref(self, ref: Any, ptr: str) -> Ref:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedFeatureError("$ref", pointer=_join(ptr, "$ref"),
                                          hint=f"only references inside the document ('#...') are "
                                               f"supported, not {ref!r}")
        target_ptr = urllib.parse.unquote(ref[1:])  # a URI fragment: %25 is "%"
        if target_ptr and not target_ptr.startswith("/"):  # "#name": an anchor, not a pointer
            found = _find_anchor(self.root, target_ptr, "")
            if found is None:
                raise SchemaError(f"$ref {ref!r}: no $anchor named {target_ptr!r} in the document",
                                  pointer=_join(ptr, "$ref"))
            return self.convert(*found)
        node = self.root
        try:
            for part in [p for p in target_ptr.split("/")[1:]]:
                part = part.replace("~1", "/").replace("~0", "~")
                node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError) as err:
            raise SchemaError(f"$ref {ref!r} does not resolve", pointer=_join(ptr, "$ref")) from err
        return self.convert(node, target_ptr)

    # -- objects and arrays

    def object(self, schema: dict, ptr: str) -> Expr:
        props = schema.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", pointer=_join(ptr, "properties"))
        required = schema.get("required", [])
        if not isinstance(required, list):
            raise SchemaError("required must be an array", pointer=_join(ptr, "required"))
        missing = [r for r in required if r not in props]
        if missing:
            raise UnsupportedFeatureError("required", pointer=_join(ptr, "required"),
                                          hint=f"required keys not listed in properties: {missing}")
        members = [(k, self.convert(v, _join(ptr, "properties", k)), k in required)
                   for k, v in props.items()]
        # Strict (the generation default): an object takes only the keys its schema names unless
        # the schema says otherwise; the spec's default is open.
        extra = schema.get("additionalProperties", not self.strict)
        extra_ref = None if extra is False else self.convert(extra, _join(ptr, "additionalProperties"))
        return self.object_of(members, set(props), extra_ref)

    def object_of(self, members: list[tuple[str, Ref, bool]], defined: set[str],
                  extra: Ref | None) -> Expr:
        """``{`` members in order (optional ones may be left out), then additional ones ``}``."""
        ws = self.ws
        comma = seq(ws, Lit(b","), ws)
        colon = seq(ws, Lit(b":"), ws)

        def member(key: str, value: Ref) -> Expr:
            return seq(self.key_literal(key), colon, value)

        extra_member = None
        if extra is not None:
            extra_member = seq(self.key_except(defined), colon, extra)
        # tail(i): what may follow once something was written, from member i on (shared rules,
        # so the object stays linear in its number of properties).
        tail_names: list[str] = []
        uid = len(self.rules)
        tail: Expr = Repeat(seq(comma, extra_member), 0, None) if extra_member else Seq(())
        for i in range(len(members), 0, -1):
            key, value, req = members[i - 1]
            item = seq(comma, member(key, value))
            body = seq(item if req else Repeat(item, 0, 1), tail)
            tail = self.rule(f"obj{uid}_tail{i}", body) if i > 1 else body
            tail_names.append(f"obj{uid}_tail{i}")
        # first(i): the first written member is member i (earlier optional ones left out)
        firsts: list[Expr] = []
        for i, (key, value, req) in enumerate(members):
            rest = Ref(f"obj{uid}_tail{i + 2}") if i + 1 < len(members) else (
                Repeat(seq(comma, extra_member), 0, None) if extra_member else Seq(()))
            firsts.append(seq(member(key, value), rest))
            if req:
                break
        else:
            if extra_member is not None:
                firsts.append(seq(extra_member, Repeat(seq(comma, extra_member), 0, None)))
        can_be_empty = not any(req for _, _, req in members)
        options: list[Expr] = []
        if can_be_empty:
            options.append(seq(Lit(b"{"), ws, Lit(b"}")))
        if firsts:
            options.append(seq(Lit(b"{"), ws, alt(*firsts), ws, Lit(b"}")))
        return alt(*options)

    def key_except(self, defined: set[str]) -> Expr:
        """A JSON string whose decoded value is none of ``defined``, however it is spelt.

        The body is the shared JSON-string counter with the defined keys excluded (every
        spelling of every character), so masks inside the key stay the shared string masks.
        """
        if not defined:
            return self.primitive("string")
        digest = hashlib.sha1(json.dumps(sorted(defined)).encode()).hexdigest()[:10]
        words = frozenset(tuple(frozenset(char_encodings(ch)) for ch in key) for key in defined)
        chars = self.rule(f"chars_except_{digest}", Counted(JSON_CHAR, 0, None, words))
        return self.rule(f"key_except_{digest}", seq(Lit(b'"'), chars, Lit(b'"')))

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

    def enum(self, schema: dict, ptr: str) -> Expr:
        if "const" in schema:
            values = [schema["const"]]
        else:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                raise SchemaError("enum must be a non-empty array", pointer=_join(ptr, "enum"))
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        if any(k in SUPPORTED_KEYWORDS for k in rest):
            values = [v for v in values if self._valid(v, rest)]
            if not values:
                raise UnsupportedFeatureError("enum", pointer=ptr,
                                              hint="no enum value satisfies the other keywords")
        unique: list[Any] = []
        for v in values:
            if not any(_json_equal(v, u) for u in unique):
                unique.append(v)
        return alt(*(self.literal(v, ptr) for v in unique))

    def _valid(self, value: Any, schema: dict) -> bool:
        from jsonschema import validators

        if self._validator_cls is None:
            self._validator_cls = validators.validator_for(self.root if isinstance(self.root, dict) else {})
        return self._validator_cls(schema).is_valid(value) if "$ref" not in schema else \
            self._validator_cls(self.root).evolve(schema=schema).is_valid(value)

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


def _find_anchor(node: Any, name: str, pointer: str) -> tuple[Any, str] | None:
    """The subschema declaring ``$anchor`` (or ``$dynamicAnchor``) ``name``, and its pointer."""
    if isinstance(node, dict):
        if name in (node.get("$anchor"), node.get("$dynamicAnchor")):
            return node, pointer
        children = node.items()
    elif isinstance(node, list):
        children = enumerate(node)
    else:
        return None
    for key, child in children:
        if key in ("enum", "const"):
            continue  # values, not schemas
        found = _find_anchor(child, name, _join(pointer, key))
        if found is not None:
            return found
    return None


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: ``1 == 1.0`` but ``True != 1``, recursively."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _non_negative_int(schema: dict, kw: str, ptr: str, default: int | None) -> int | None:
    v = schema.get(kw, default)
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SchemaError(f"{kw} must be a non-negative integer, not {v!r}", pointer=_join(ptr, kw))
    return v


def _join(ptr: str, *parts: Any) -> str:
    for p in parts:
        ptr += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return ptr


def schema_to_grammar(schema: Any, *, whitespace: Literal["flexible", "compact"] = "flexible",
                      strict: bool = False, canonical: bool = False, lenient: bool = False) -> Grammar:
    """Translate a JSON schema into a :class:`~structgen.ir.Grammar` whose start rule is ``root``.

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
    conv = _Converter(schema, whitespace, strict, canonical, lenient)
    conv.convert(schema, "")
    rules = [("root", conv.rules.pop("root"))] + list(conv.rules.items())
    return Grammar(tuple(rules), "root"), tuple(conv.relaxed)  # checked when compiled


def keyword_table() -> str:
    """The README's keyword tables (markdown), generated from this module and the formats."""
    from .formats import FORMAT_NOTES

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| keyword | status | reading |", "|---|---|---|"]
    for kw in sorted(SUPPORTED_KEYWORDS, key=str.lower):
        status = "supported (where refused, `lenient=True` drops it)" if kw in LENIENT_KEYWORDS else "supported"
        rows.append(f"| `{kw}` | {status} | {cell(KEYWORD_NOTES[kw])} |")
    for kw in sorted(ASSERTION_KEYWORDS - SUPPORTED_KEYWORDS, key=str.lower):
        status = "refused (`lenient=True` drops it, recorded)" if kw in LENIENT_KEYWORDS else "refused"
        rows.append(f"| `{kw}` | {status} | `UnsupportedFeatureError` naming the keyword and its JSON pointer |")
    rows.append("| annotations, unknown keywords | ignored | `title`, `description`, `default`, `x-…`, "
                "draft-4 `id`, …: they constrain nothing, as the spec says |")
    formats = ["| format | reading |", "|---|---|"]
    formats += [f"| `{name}` | {cell(note)} |" for name, note in FORMAT_NOTES.items()]
    formats.append("| (generation) | `date`, `time`, `date-time` are generated without leap seconds "
                   "and year 0000, which common validators refuse though the RFC allows them |")
    return "\n".join(rows) + "\n\n" + "\n".join(formats) + "\n"
