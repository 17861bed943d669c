"""Tool arguments written as XML parameters instead of one JSON object.

Several model families write each argument of a call in tags of its own, a string raw (no
quotes, no escapes) and any other value as JSON:

- ``qwen_xml`` (Qwen3-Coder, Qwen3.5): ``<parameter=city>\\nParis\\n</parameter>``, joined by
  ``\\n``;
- ``minimax_xml`` (MiniMax-M2): ``<parameter name="city">Paris</parameter>\\n`` each;
- ``glm_xml`` (GLM-4.7): ``<arg_key>city</arg_key><arg_value>Paris</arg_value>``, no space;
- ``deepseek_xml`` (DeepSeek-V3.2, V4): ``<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>``,
  ``string="false"`` before a JSON value, joined by ``\n``;
- ``kimi_k3_xml`` (Kimi-K3): ``<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>``,
  the ``type`` attribute naming the value's JSON type (``number`` for integers too), a string raw,
  ``&`` and ``"`` of a key written as entities (the template's ``escape_attr``);
- ``cohere_xml`` (Cohere Command, CMD5): ``<cofl:value name="city" type="raw">Paris</cofl:value>``,
  ``type`` ``raw`` (a string), ``json`` (a number, boolean or null), ``dict`` (an object, its
  properties nested values) or ``list`` (an array, its items unnamed nested values
  ``<cofl:value type="raw">…</cofl:value>``); names are XML attributes (``&quot;`` …), as Cohere's
  renderer (cohere-melody's ``render_cmd5``) writes them. A value whose schema names no type is
  raw text or any JSON value (``type="json"``), as xgrammar's ``cohere_xml`` writes it (the
  renderer would nest a dict; nesting a schema-less value has no bound);
- ``pythonic`` (Llama 4's pythonic calls, structgen's own style name): keyword arguments
  ``city="Paris", days=3`` whose values are Python literals (strings quoted, ``True``,
  ``False``, ``None``), read back with :func:`ast.literal_eval` as vLLM's parser reads them.

These are the ``style`` values of xgrammar's ``json_schema`` format (its
``cpp/json_schema_converter_ext.cc`` names the wrappers; the spellings are those of each family's
chat template). :func:`xml_arguments` builds the grammar of an object schema's arguments (the
declared properties in order, required ones present, the others optional; an object declaring
none takes any keys), :func:`read_xml_arguments` reads a written call back into the arguments.

Example
-------
>>> from structgen.core.regular import matches
>>> schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
...           "required": ["city"]}
>>> text = "<parameter=city>\\nParis\\n</parameter>\\n<parameter=days>\\n3\\n</parameter>"
>>> read_xml_arguments(text, "qwen_xml", schema)
{'city': 'Paris', 'days': 3}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from structgen.core.ir import Alt, ByteClass, Expr, Lit, Repeat, Seq, alt, seq
from structgen.errors import ParseError, SchemaError, UnsupportedFeatureError, is_no_value, no_value

__all__ = ["XmlStyle", "XML_STYLES", "xml_arguments", "read_xml_arguments", "write_xml_arguments"]


@dataclass(frozen=True)
class XmlStyle:
    """How one argument is written: ``open`` (with ``{key}``) + value + ``close`` + ``after``;
    arguments joined by ``separator``."""

    name: str
    open: str
    close: str
    separator: str = ""
    after: str = ""
    #: every value a Python literal, strings quoted (pythonic calls), never raw text
    quoted: bool = False
    #: the ``{type}`` words where they differ from Kimi-K3's (JSON type -> word)
    kinds: tuple[tuple[str, str], ...] = ()
    #: the opening of an unnamed item: set where objects and arrays are written as nested
    #: values (Cohere's ``dict`` and ``list``), not as JSON
    item: str = ""
    #: the characters of a key written as XML entities (keys are attribute values): ``"&\"<>"``
    escapes: str = ""
    #: what a raw string may not hold besides ``close`` (what the family's reader takes for one)
    text_excludes: tuple[str, ...] = ()

    def kind(self, json_type: str) -> str:
        """The ``{type}`` word of a JSON type (``"integer"`` is Kimi-K3's ``number``)."""
        return dict(self.kinds).get(json_type, KINDS.get(json_type, json_type))

    def opening(self, key: str | None, raw: bool, kind: str = "") -> str:
        """The opening of one argument, or of an unnamed item (``key`` None) (``{string}``:
        whether its value is a raw string; ``{type}``: ``kind``, the value's JSON type)."""
        head = self.item if key is None else self.open.replace("{key}", _escaped(key, self.escapes))
        return head.replace("{string}", "true" if raw else "false").replace("{type}", self.kind(kind) if kind else "")

    @property
    def stops(self) -> tuple[str, ...]:
        """What a raw string value may not hold."""
        return (self.close, *self.text_excludes)

    def pattern(self) -> "re.Pattern[str]":
        """A regex finding each argument's key, string flag (where the style writes one) and value."""
        head, tail = (re.escape(part) for part in self.open.split("{key}"))
        tail = tail.replace(re.escape("{string}"), "(?P<string>true|false)")
        tail = tail.replace(re.escape("{type}"), "(?P<type>[a-z]+)")
        return re.compile(head + r"(?P<key>.*?)" + tail + r"(?P<value>.*?)" + re.escape(self.close), re.S)


XML_STYLES: dict[str, XmlStyle] = {s.name: s for s in (
    XmlStyle("qwen_xml", "<parameter={key}>\n", "\n</parameter>", separator="\n"),
    XmlStyle("minimax_xml", '<parameter name="{key}">', "</parameter>", after="\n"),
    XmlStyle("glm_xml", "<arg_key>{key}</arg_key><arg_value>", "</arg_value>"),
    XmlStyle("deepseek_xml", '<｜DSML｜parameter name="{key}" string="{string}">', "</｜DSML｜parameter>",
             separator="\n"),
    # DeepSeek-V4.1 (SGLang's encoding_dsv41.py): the tag names take a leading space; not an xgrammar style
    XmlStyle("deepseek_v4_1_xml", '<｜DSML｜ parameter name="{key}" string="{string}">', "</｜DSML｜ parameter>",
             separator="\n"),
    # Kimi-K3's template escapes & and " in attribute values (its escape_attr macro)
    XmlStyle("kimi_k3_xml", '<|open|>argument key="{key}" type="{type}"<|sep|>', "<|close|>argument<|sep|>",
             escapes='&"'),
    XmlStyle("pythonic", "{key}=", "", separator=", ", quoted=True),
    # melody's reader ends a value at `</\s*cofl:value\s*>` (\s: Unicode white space): no raw text holds one
    XmlStyle("cohere_xml", '<cofl:value name="{key}" type="{type}">', "</cofl:value>",
             kinds=(("string", "raw"), ("integer", "json"), ("number", "json"), ("boolean", "json"),
                    ("null", "json"), ("array", "list"), ("object", "dict")),
             item='<cofl:value type="{type}">', escapes='&"<>',
             text_excludes=("</cofl:value", *("</" + c for c in "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002"
                                               "\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028"
                                               "\u2029\u202f\u205f\u3000"))),
)}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LETTER = ByteClass(((ord("A"), ord("Z")), (ord("_"), ord("_")), (ord("a"), ord("z"))))
_WORD = ByteClass(((ord("0"), ord("9")), (ord("A"), ord("Z")), (ord("_"), ord("_")), (ord("a"), ord("z"))))

#: what a free key may not hold (it sits inside the opening tag)
_KEY_EXCLUDES = ("<", ">", '"', "\n")
#: keywords an arguments object cannot have (its keys are written in order, one tag each)
_OBJECT_REFUSED = ("anyOf", "oneOf", "allOf", "not", "if", "patternProperties", "dependentRequired",
                   "dependentSchemas", "minProperties", "maxProperties", "propertyNames", "unevaluatedProperties")
#: array keywords nested items cannot honour
_ARRAY_REFUSED = ("prefixItems", "contains", "minContains", "maxContains", "uniqueItems", "unevaluatedItems")
#: nested objects deeper than this are refused (a schema that recurses through "$ref" has no bound)
_MAX_DEPTH = 32


def xml_arguments(schema: Any, style: str, json_value: Callable[[Any, str], Expr], text: Callable[..., Expr],
                  pointer: str = "", rule: Callable[[Expr], Expr] = lambda e: e) -> Expr:
    """The grammar of an object schema's arguments in ``style``.

    ``json_value(subschema, pointer)`` gives the IR of a JSON value (a reference into rules the
    caller keeps), ``text(excludes)`` the IR of raw text holding none of ``excludes``,
    ``rule(expr)`` a reference to ``expr`` made a rule (the chain of optional arguments refers to
    each link twice: inline, it would double per argument).

    Raises
    ------
    UnsupportedFeatureError
        A schema that is not a plain object of properties, or a string property with a
        constraint raw text cannot honour here (``format``, a union with other types).
    """
    defs = {k: schema[k] for k in ("$defs", "definitions") if k in schema} if isinstance(schema, dict) else {}
    if defs:  # a property's "$ref" into the root's definitions still resolves
        outer = json_value
        json_value = lambda sub, where: outer({**defs, **sub} if isinstance(sub, dict) else sub, where)  # noqa: E731
    return _Arguments(XML_STYLES[style], json_value, text, rule, defs).object(schema, pointer, ())


class _Arguments:
    """Builds one style's arguments grammar (see :func:`xml_arguments`)."""

    def __init__(self, xml: XmlStyle, json_value: Callable[[Any, str], Expr], text: Callable[..., Expr],
                 rule: Callable[[Expr], Expr], defs: dict[str, Any]) -> None:
        self.xml, self.json_value, self.text, self.rule, self.defs = xml, json_value, text, rule, defs

    def object(self, schema: Any, pointer: str, refs: tuple[str, ...]) -> Expr:
        """An object's properties, one tag each: declared ones in order, then free keys."""
        xml = self.xml
        if not isinstance(schema, dict) or schema.get("type", "object") != "object":
            raise UnsupportedFeatureError("type", pointer=pointer + "/type",
                                          hint=f"{xml.name} arguments are an object's properties")
        for key in schema:
            if key in _OBJECT_REFUSED or key == "$ref":
                raise UnsupportedFeatureError(key, pointer=f"{pointer}/{key}",
                                              hint=f"{xml.name} arguments take declared properties in order")
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        items: list[tuple[Expr, bool]] = []
        for key, sub in properties.items():
            where = f"{pointer}/properties/{key.replace('~', '~0').replace('/', '~1')}"
            if xml.quoted and not _IDENTIFIER.fullmatch(key):
                raise UnsupportedFeatureError("properties", pointer=where,
                                              hint=f"{xml.name} calls name arguments as Python identifiers, not {key!r}")
            try:
                if "{type}" in xml.open:  # the opening names the value's type: one branch per type
                    argument = self.typed(key, sub, where, refs)
                else:
                    argument = seq(Lit(xml.opening(key, raw=_is_string(sub)).encode()), self.value(sub, where))
            except SchemaError as err:
                if is_no_value(err) and key not in required:
                    continue  # no value fits: an optional argument that is never written (as in JSON)
                raise
            items.append((seq(argument, Lit((xml.close + xml.after).encode())), key in required))
        extra = schema.get("additionalProperties", not properties)
        if extra is not False:
            items.append((self._free_keys(extra, pointer + "/additionalProperties", refs), False))
        return _in_order(items, xml.separator.encode(), self.rule)

    def _free_keys(self, extra: Any, where: str, refs: tuple[str, ...]) -> Expr:
        """Any number of undeclared arguments (``additionalProperties``)."""
        xml = self.xml
        head, tail = xml.opening("\x00", raw=True).split("\x00")
        excludes = (*_KEY_EXCLUDES, "&") if xml.escapes else _KEY_EXCLUDES
        key_text = seq(_LETTER, Repeat(_WORD, 0, None)) if xml.quoted else self.text(excludes, nonempty=True)
        if extra is not True and not _is_string(extra) and "{string}" in xml.open:
            raise UnsupportedFeatureError("additionalProperties", pointer=where,
                                          hint=f"{xml.name} writes undeclared arguments as raw strings only")
        if "{type}" in xml.open:  # the key is free: the typed opening's branches, with it spliced in
            body = substitute_key(self.typed("\x00", {} if extra is True else extra, where, refs), key_text)
        else:
            if extra is True:
                value = self.json_value({}, where) if xml.quoted else self.text(xml.stops)
            else:
                value = self.value(extra, where)
            body = seq(Lit(head.encode()), key_text, Lit(tail.encode()), value)
        one = seq(body, Lit((xml.close + xml.after).encode()))
        if not xml.separator:
            return Repeat(one, 0, None)
        return Repeat(seq(one, Repeat(seq(Lit(xml.separator.encode()), one), 0, None)), 0, 1)

    def value(self, sub: Any, pointer: str) -> Expr:
        """One argument's value: a string raw, anything else JSON (every value a literal when quoted)."""
        xml = self.xml
        if xml.quoted or not _is_string(sub):
            return self.json_value(sub, pointer)
        if "enum" in sub or "const" in sub:
            choices = sub["enum"] if "enum" in sub else [sub["const"]]
            return alt(*(Lit(c.encode()) for c in choices if isinstance(c, str) and self._raw_fits(c)))
        for key in ("format", "pattern", "minLength", "maxLength", "contentEncoding", "contentMediaType"):
            if key in sub:
                raise UnsupportedFeatureError(key, pointer=f"{pointer}/{key}",
                                              hint=f"a raw string in {xml.name} arguments cannot be checked for it")
        return self.text(xml.stops)

    def _raw_fits(self, text: str) -> bool:
        return not any(stop in text for stop in self.xml.stops)

    def typed(self, key: str | None, sub: Any, pointer: str, refs: tuple[str, ...]) -> Expr:
        """One argument (an unnamed item when ``key`` is None) whose opening names its value's
        type: a branch per type the schema allows."""
        xml = self.xml
        while xml.item and isinstance(sub, dict) and "$ref" in sub:
            sub, pointer, refs = self._resolved(sub, pointer, refs)
        if _is_string(sub):
            return seq(Lit(xml.opening(key, raw=True, kind="string").encode()), self.value(sub, pointer))
        if sub is True:
            sub = {}
        if not isinstance(sub, dict):
            return self.json_value(sub, pointer)  # false: no value (an optional argument is left out)
        declared = sub.get("type")
        if ("enum" in sub or "const" in sub) and (xml.item or not isinstance(declared, str)):
            return self._literals(key, sub, pointer)
        if xml.item and declared is None:  # a free value: raw text, or any JSON value ("json", as "null" is)
            return alt(seq(Lit(xml.opening(key, raw=True, kind="string").encode()), self.text(xml.stops)),
                       seq(Lit(xml.opening(key, raw=False, kind="null").encode()), self.json_value(sub, pointer)))
        types = [declared] if isinstance(declared, str) else list(declared or ("string", "number", "boolean", "null",
                                                                               "array", "object"))
        if len(types) > 1 and any(k in sub for k in ("anyOf", "oneOf", "allOf", "not", "$ref")):
            raise UnsupportedFeatureError("type", pointer=pointer, hint=f"{xml.name} names an argument's type before "
                                          "its value: give a property with these keywords one \"type\"")
        branches = []
        for t in types:
            if t not in KINDS or (t == "integer" and "number" in types):  # number's branch writes integers too
                continue
            one = {**sub, "type": t}
            if t == "string":
                value = self.value(one, pointer)
            elif xml.item and t == "object":
                value = self._nested(lambda: self.object(one, pointer, refs), pointer, refs)
            elif xml.item and t == "array":
                value = self._nested(lambda: self._items(one, pointer, refs), pointer, refs)
            else:
                value = self.json_value(one, pointer)
            branches.append(seq(Lit(xml.opening(key, raw=t == "string", kind=t).encode()), value))
        return alt(*branches)

    def _literals(self, key: str | None, sub: dict[str, Any], pointer: str) -> Expr:
        """An enum's (or const's) values, each with the opening of its own type."""
        declared = sub.get("type")
        types = [declared] if isinstance(declared, str) else declared
        values = sub["enum"] if "enum" in sub else [sub["const"]]
        branches = []
        for value in values:
            kind = kind_of(value)
            if (types is not None and not _fits(value, types)) or (kind == "string" and not self._raw_fits(value)):
                continue
            body = _written(self.xml, value, lambda v: self.json_value({"const": v}, pointer))
            body = Lit(body.encode()) if isinstance(body, str) else body
            branches.append(seq(Lit(self.xml.opening(key, raw=kind == "string", kind=kind).encode()), body))
        if not branches:
            raise no_value(UnsupportedFeatureError("enum", pointer=pointer, hint="no value of the enum fits the schema"))
        return alt(*branches)

    def _items(self, sub: dict[str, Any], pointer: str, refs: tuple[str, ...]) -> Expr:
        """An array's items as unnamed nested values."""
        for key in _ARRAY_REFUSED:
            if key in sub:
                raise UnsupportedFeatureError(key, pointer=f"{pointer}/{key}",
                                              hint=f"{self.xml.name} writes an array's items with one schema")
        lo, hi = sub.get("minItems", 0), sub.get("maxItems")
        if sub.get("items", True) is False:
            if lo > 0:
                raise no_value(UnsupportedFeatureError("items", pointer=pointer,
                                                       hint="no array fits: items false and minItems above 0"))
            return Seq(())
        item = self.rule(seq(self.typed(None, sub.get("items", True), pointer + "/items", refs),
                             Lit(self.xml.close.encode())))
        return Repeat(item, lo, hi)

    def _nested(self, build: Callable[[], Expr], pointer: str, refs: tuple[str, ...]) -> Expr:
        if len(refs) > _MAX_DEPTH:
            raise UnsupportedFeatureError("$ref", pointer=pointer, hint=f"{self.xml.name} nests objects as values: "
                                          f"more than {_MAX_DEPTH} levels deep is refused")
        return self.rule(build())

    def _resolved(self, sub: dict[str, Any], pointer: str,
                  refs: tuple[str, ...]) -> tuple[Any, str, tuple[str, ...]]:
        """A local ``$ref`` resolved (its siblings kept), refused when it recurses."""
        ref = sub["$ref"]
        found = None
        for prefix in ("#/$defs/", "#/definitions/"):
            if isinstance(ref, str) and ref.startswith(prefix):
                found = self.defs.get(prefix[2:-1], {}).get(ref[len(prefix):])
        if found is None or ref in refs:
            raise UnsupportedFeatureError("$ref", pointer=pointer + "/$ref", hint=(
                f"{self.xml.name} writes objects as nested values: a recursive schema cannot be"
                if ref in refs else f"{self.xml.name} resolves local references into $defs only, not {ref!r}"))
        rest = {k: v for k, v in sub.items() if k != "$ref"}
        return ({**found, **rest} if isinstance(found, dict) and rest else found), pointer + "/$ref", (*refs, ref)


#: JSON types as Kimi-K3's ``type`` attribute names them
KINDS = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean", "null": "null",
         "array": "array", "object": "object"}


def kind_of(value: Any) -> str:
    """The JSON type of ``value`` (``"number"`` for integers too)."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), "string")


def _written(xml: XmlStyle, value: Any, json_text: Callable[[Any], Any]) -> Any:
    """``value`` as ``xml`` writes it: text, or an Expr where ``json_text`` gives Exprs."""
    parts: list[Any]
    if isinstance(value, str):
        parts = [value]
    elif xml.item and isinstance(value, (dict, list)):
        pairs = value.items() if isinstance(value, dict) else ((None, v) for v in value)
        parts = []
        for key, v in pairs:
            parts += [xml.opening(key, raw=isinstance(v, str), kind=kind_of(v)), _written(xml, v, json_text), xml.close]
    else:
        parts = [json_text(value)]
    if all(isinstance(p, str) for p in parts):
        return "".join(parts)
    return seq(*(Lit(p.encode()) if isinstance(p, str) else p for p in parts))


def _fits(value: Any, types: list[str]) -> bool:
    """Whether a literal is of one of ``types``."""
    kind = kind_of(value)
    if kind == "number" and (isinstance(value, int) or value.is_integer()):
        return "integer" in types or "number" in types
    return kind in types


_ENTITIES = {"&": "&amp;", '"': "&quot;", "<": "&lt;", ">": "&gt;"}


def _escaped(key: str, chars: str) -> str:
    """``key`` as an XML attribute value, ``chars`` written as entities (``&`` first)."""
    for c in sorted(chars, key=lambda c: c != "&"):
        key = key.replace(c, _ENTITIES[c])
    return key


def _unescaped(key: str) -> str:
    """An attribute value read back (the entities any style writes; ``&amp;`` last)."""
    return key.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def substitute_key(expr: Expr, key: Expr) -> Expr:
    """``expr`` with the NUL byte of its openings' literals replaced by ``key``."""
    if isinstance(expr, Lit) and b"\x00" in expr.data:
        before, after = expr.data.split(b"\x00", 1)
        return seq(Lit(before), key, Lit(after))
    if isinstance(expr, Seq):
        return seq(*(substitute_key(e, key) for e in expr.items))
    if isinstance(expr, Alt):
        return alt(*(substitute_key(e, key) for e in expr.items))
    return expr


def _is_string(sub: Any) -> bool:
    """Whether a property's values are strings only (written raw)."""
    if not isinstance(sub, dict):
        return False
    types = sub.get("type")
    if types == "string" or types == ["string"]:
        return True
    if types is None and ("enum" in sub or "const" in sub):
        values = sub.get("enum", [sub.get("const")])
        return bool(values) and all(isinstance(v, str) for v in values)
    return False


def _in_order(items: list[tuple[Expr, bool]], separator: bytes, rule: Callable[[Expr], Expr]) -> Expr:
    """The items in order, each present when required (else optional), ``separator`` between
    the present ones: two chains of alternatives, one before any item and one after."""
    first: Expr = Seq(())
    after: Expr = Seq(())
    for item, needed in reversed(items):
        item = rule(item)
        sep_item = seq(Lit(separator), item) if separator else item
        new_first = seq(item, after) if needed else alt(seq(item, after), first)
        after = rule(seq(sep_item, after) if needed else alt(seq(sep_item, after), after))
        first = rule(new_first)
    return first


def read_xml_arguments(text: str, style: str, schema: Any) -> dict[str, Any]:
    """The arguments a call wrote in ``style`` (``text`` as the grammar accepted it): strings as
    written, other values parsed as JSON.

    >>> read_xml_arguments("<arg_key>n</arg_key><arg_value>[1, 2]</arg_value>", "glm_xml",
    ...                    {"type": "object", "properties": {"n": {"type": "array"}}})
    {'n': [1, 2]}
    """
    xml = XML_STYLES[style]
    if xml.quoted:
        return _python_arguments(text)
    if xml.item:
        found, end = _nested_values(text, 0, xml, named=True)
        if end != len(text):
            raise ParseError(f"{style} arguments end before their text does: {text[end:end + 80]!r}")
        return found
    properties = (schema.get("properties") or {}) if isinstance(schema, dict) else {}
    extra = schema.get("additionalProperties", not properties) if isinstance(schema, dict) else True
    out: dict[str, Any] = {}
    for found in xml.pattern().finditer(text):
        key, value = (_unescaped(found["key"]) if xml.escapes else found["key"]), found["value"]
        sub = properties.get(key, extra if isinstance(extra, dict) else {"type": "string"})
        groups = xml.pattern().groupindex
        raw = found["string"] == "true" if "string" in groups else found["type"] == "string" if "type" in groups \
            else _is_string(sub)
        out[key] = value if raw else _json(key, value)
    return out


def _nested_values(text: str, at: int, xml: XmlStyle, named: bool) -> tuple[Any, int]:
    """The values nested from ``at`` (named: an object's, else an array's items), and where
    they end (at the enclosing close, or the text's end)."""
    opening = re.compile(re.escape(xml.open).replace(re.escape("{key}"), '(?P<key>[^"]*)').replace(
        re.escape("{type}"), "(?P<type>[a-z]+)") if named else
        re.escape(xml.item).replace(re.escape("{type}"), "(?P<type>[a-z]+)"))
    words = {xml.kind(t): t for t in ("string", "object", "array")}
    out: Any = {} if named else []
    while at < len(text) and not text.startswith(xml.close, at):
        found = opening.match(text, at)
        if found is None:
            raise ParseError(f"expected a {xml.name} value at {text[at:at + 80]!r}")
        kind, at = words.get(found["type"]), found.end()
        if kind in ("object", "array"):
            value, at = _nested_values(text, at, xml, named=kind == "object")
        else:
            end = text.find(xml.close, at)
            if end < 0:
                raise ParseError(f"a {xml.name} value is not closed: {text[at:at + 80]!r}")
            value = text[at:end] if kind == "string" else _json(found.groupdict().get("key") or "item", text[at:end])
            at = end
        if not text.startswith(xml.close, at):
            raise ParseError(f"a {xml.name} value is not closed: {text[at:at + 80]!r}")
        at += len(xml.close)
        if named:
            out[_unescaped(found["key"])] = value
        else:
            out.append(value)
    return out, at


def _json(key: str, value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as err:
        raise ParseError(f"argument {key!r} is not JSON: {value[:80]!r}") from err


def write_xml_arguments(style: str, arguments: dict[str, Any], json_text: Callable[[Any], str]) -> str:
    """``arguments`` written in ``style`` as its grammar spells them (``json_text``: how a JSON
    value is written).

    >>> write_xml_arguments("cohere_xml", {"city": "Paris", "days": [3]}, json.dumps)
    '<cofl:value name="city" type="raw">Paris</cofl:value><cofl:value name="days" type="list"><cofl:value type="json">3</cofl:value></cofl:value>'
    """
    xml = XML_STYLES[style]
    return xml.separator.join(xml.opening(key, raw=isinstance(value, str), kind=kind_of(value))
                              + _written(xml, value, json_text) + xml.close + xml.after
                              for key, value in arguments.items())


def _python_arguments(text: str) -> dict[str, Any]:
    """Keyword arguments ``a=1, b="x"`` read as Python literals (never evaluated as code)."""
    import ast

    try:
        call = ast.parse(f"f({text})", mode="eval").body
        assert isinstance(call, ast.Call) and not call.args
        out = {}
        for kw in call.keywords:
            if kw.arg is None:
                raise ParseError("a pythonic call cannot unpack **arguments")
            out[kw.arg] = ast.literal_eval(kw.value)
        return out
    except (SyntaxError, ValueError, AssertionError, RecursionError) as err:
        raise ParseError(f"the call's arguments are not Python literals: {text[:80]!r}") from err

