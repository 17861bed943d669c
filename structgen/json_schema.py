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
engine does. Keys and string literals are matched in their canonical JSON spelling
(``json.dumps``, with non-ASCII characters either raw or ``\\uXXXX``-escaped); an additional key
is any string whose *decoded* value is not a defined key, however it is escaped.

Example
-------
>>> g = schema_to_grammar({"type": "object", "properties": {"ok": {"type": "boolean"}},
...                        "required": ["ok"], "additionalProperties": False},
...                       whitespace="compact")
>>> print(g.rules[0][1])
"{\\"ok\\":" s_properties_ok "}"
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any, Literal

from .errors import SchemaError, UnsupportedFeatureError
from .ir import ByteClass, Counted, Expr, Grammar, Lit, Ref, Repeat, Seq, alt, seq
from .json_text import JSON_CHAR, JSON_INTEGER, JSON_NUMBER, char_encodings, string_literal

__all__ = ["schema_to_grammar", "SUPPORTED_KEYWORDS", "ASSERTION_KEYWORDS"]

#: Bound on whitespace characters per gap in ``flexible`` mode: enough for ``indent=2`` 16+ deep.
MAX_WHITESPACE = 128

SUPPORTED_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "$ref", "minLength", "maxLength",
})

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
    "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef", "contentSchema",
})

_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
_OBJECT_KW = {"properties", "required", "additionalProperties"}
_ARRAY_KW = {"items"}
_STRING_KW = {"minLength", "maxLength"}

# ---------------------------------------------------------------- the converter


class _Converter:
    def __init__(self, root: Any, whitespace: Literal["flexible", "compact"], strict: bool = False) -> None:
        if whitespace not in ("flexible", "compact"):
            raise ValueError(f"whitespace must be 'flexible' or 'compact', not {whitespace!r}")
        self.root = root
        self.flexible = whitespace == "flexible"
        self.strict = strict
        self.rules: dict[str, Expr] = {}
        self.by_pointer: dict[str, str] = {}
        self._validator_cls: Any = None

    # -- rule plumbing

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
            bodies = {
                "null": Lit(b"null"), "boolean": alt(Lit(b"true"), Lit(b"false")),
                "number": JSON_NUMBER, "integer": JSON_INTEGER,
            }
            if name in bodies:
                return self.rule(name, bodies[name])
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
                raise UnsupportedFeatureError(kw, pointer=_join(ptr, kw),
                                              hint="not in structgen's supported keywords yet")
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
            return self.string_rule(lo, hi)
        if t == "object":
            return self.object(schema, ptr)
        if t == "array":
            items = schema.get("items", True)
            if isinstance(items, list):
                raise UnsupportedFeatureError("items", pointer=_join(ptr, "items"),
                                              hint="the array form of items (tuples) is not supported yet")
            return self.array_of(self.convert(items, _join(ptr, "items")))
        return self.primitive(t)

    def ref(self, ref: Any, ptr: str) -> Ref:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise UnsupportedFeatureError("$ref", pointer=_join(ptr, "$ref"),
                                          hint=f"only references inside the document ('#...') are "
                                               f"supported, not {ref!r}")
        target_ptr = ref[1:]
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
            return seq(string_literal(key), colon, value)

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
            return string_literal(value)
        if value is None or isinstance(value, bool):
            return Lit(json.dumps(value).encode())
        if isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise SchemaError(f"enum value {value!r} is not JSON", pointer=ptr)
            return Lit(json.dumps(value).encode())
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
            parts = [Lit(b"{"), ws]
            for i, (k, v) in enumerate(value.items()):
                if i:
                    parts += [ws, Lit(b","), ws]
                parts += [string_literal(k), ws, Lit(b":"), ws, self.literal(v, ptr)]
            return seq(*parts, ws, Lit(b"}"))
        raise SchemaError(f"enum value {value!r} is not JSON", pointer=ptr)


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
                      strict: bool = False) -> Grammar:
    """Translate a JSON schema into a :class:`~structgen.ir.Grammar` whose start rule is ``root``.

    ``strict=True`` closes objects whose schema does not mention ``additionalProperties`` (the
    spec's default is open); an explicit ``true`` or subschema still opens them.

    Raises
    ------
    SchemaError
        The schema is malformed (bad ``type``, unresolvable ``$ref`` …).
    UnsupportedFeatureError
        A keyword the compiler cannot honour yet; the message names it and its JSON pointer.
    """
    conv = _Converter(schema, whitespace, strict)
    conv.convert(schema, "")
    rules = [("root", conv.rules.pop("root"))] + list(conv.rules.items())
    return Grammar(tuple(rules), "root")  # checked when compiled
