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
  the ``type`` attribute naming the value's JSON type (``number`` for integers too), a string raw;
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
from structgen.errors import ParseError, SchemaError, UnsupportedFeatureError, is_no_value

__all__ = ["XmlStyle", "XML_STYLES", "xml_arguments", "read_xml_arguments"]


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

    def opening(self, key: str, raw: bool, kind: str = "") -> str:
        """The opening of one argument (``{string}``: whether its value is a raw string;
        ``{type}``: ``kind``, the value's JSON type as Kimi-K3 names it)."""
        return self.open.replace("{key}", key).replace("{string}", "true" if raw else "false").replace("{type}", kind)

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
    XmlStyle("kimi_k3_xml", '<|open|>argument key="{key}" type="{type}"<|sep|>', "<|close|>argument<|sep|>"),
    XmlStyle("pythonic", "{key}=", "", separator=", ", quoted=True),
)}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LETTER = ByteClass(((ord("A"), ord("Z")), (ord("_"), ord("_")), (ord("a"), ord("z"))))
_WORD = ByteClass(((ord("0"), ord("9")), (ord("A"), ord("Z")), (ord("_"), ord("_")), (ord("a"), ord("z"))))

#: what a free key may not hold (it sits inside the opening tag)
_KEY_EXCLUDES = ("<", ">", '"', "\n")


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
    xml = XML_STYLES[style]
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise UnsupportedFeatureError("type", pointer=pointer + "/type",
                                      hint=f"{style} arguments are an object's properties")
    for key in schema:
        if key in ("anyOf", "oneOf", "allOf", "not", "if", "$ref", "patternProperties", "dependentRequired",
                   "dependentSchemas", "minProperties", "maxProperties", "propertyNames", "unevaluatedProperties"):
            raise UnsupportedFeatureError(key, pointer=f"{pointer}/{key}",
                                          hint=f"{style} arguments take declared properties in order")
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    defs = {k: schema[k] for k in ("$defs", "definitions") if k in schema}
    if defs:  # a property's "$ref" into the root's definitions still resolves
        outer = json_value
        json_value = lambda sub, where: outer({**defs, **sub} if isinstance(sub, dict) else sub, where)  # noqa: E731
    items: list[tuple[Expr, bool]] = []
    for key, sub in properties.items():
        where = f"{pointer}/properties/{key.replace('~', '~0').replace('/', '~1')}"
        if xml.quoted and not _IDENTIFIER.fullmatch(key):
            raise UnsupportedFeatureError("properties", pointer=where,
                                          hint=f"{style} calls name arguments as Python identifiers, not {key!r}")
        try:
            if "{type}" in xml.open:  # the opening names the value's type: one branch per type
                argument = _typed(key, sub, xml, json_value, text, where)
            else:
                opening = xml.opening(key, raw=_is_string(sub))
                argument = seq(Lit(opening.encode()), _value(sub, xml, json_value, text, where))
        except SchemaError as err:
            if is_no_value(err) and key not in required:
                continue  # no value fits: an optional argument that is never written (as in JSON)
            raise
        items.append((seq(argument, Lit((xml.close + xml.after).encode())), key in required))
    extra = schema.get("additionalProperties", not properties)
    if extra is not False:
        head, tail = xml.opening("{key}", raw=True).split("{key}")
        key_text = seq(_LETTER, Repeat(_WORD, 0, None)) if xml.quoted else text(_KEY_EXCLUDES, nonempty=True)
        if extra is not True and not _is_string(extra) and "{string}" in xml.open:
            raise UnsupportedFeatureError("additionalProperties", pointer=pointer + "/additionalProperties",
                                          hint=f"{style} writes undeclared arguments as raw strings only")
        where = pointer + "/additionalProperties"
        if "{type}" in xml.open:  # the key is free: the typed opening's branches, with it spliced in
            typed = _typed("\x00", {} if extra is True else extra, xml, json_value, text, where)
            body = substitute_key(typed, key_text)
        else:
            if extra is True:
                value = json_value({}, where) if xml.quoted else text((xml.close,))
            else:
                value = _value(extra, xml, json_value, text, where)
            body = seq(Lit(head.encode()), key_text, Lit(tail.encode()), value)
        one = seq(body, Lit((xml.close + xml.after).encode()))
        items.append((Repeat(one, 0, None) if not xml.separator else
                      Repeat(seq(one, Repeat(seq(Lit(xml.separator.encode()), one), 0, None)), 0, 1), False))
    return _in_order(items, xml.separator.encode(), rule)


def _value(sub: Any, xml: XmlStyle, json_value: Callable[[Any, str], Expr], text: Callable[..., Expr],
           pointer: str) -> Expr:
    """One argument's value: a string raw, anything else JSON (every value a literal when quoted)."""
    if xml.quoted or not _is_string(sub):
        return json_value(sub, pointer)
    if "enum" in sub or "const" in sub:
        choices = sub["enum"] if "enum" in sub else [sub["const"]]
        return alt(*(Lit(c.encode()) for c in choices if isinstance(c, str) and xml.close not in c))
    for key in ("format", "pattern", "minLength", "maxLength", "contentEncoding", "contentMediaType"):
        if key in sub:
            raise UnsupportedFeatureError(key, pointer=f"{pointer}/{key}",
                                          hint=f"a raw string in {xml.name} arguments cannot be checked for it")
    return text((xml.close,))


#: JSON types as Kimi-K3's ``type`` attribute names them
KINDS = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean", "null": "null",
         "array": "array", "object": "object"}


def kind_of(value: Any) -> str:
    """The ``type`` attribute Kimi-K3 writes for ``value``."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", dict: "object", list: "array"}.get(type(value), "string")


def _typed(key: str, sub: Any, xml: XmlStyle, json_value: Callable[[Any, str], Expr], text: Callable[..., Expr],
           pointer: str) -> Expr:
    """One argument whose opening names its value's type: a branch per type the schema allows."""
    if _is_string(sub):
        return seq(Lit(xml.opening(key, raw=True, kind="string").encode()), _value(sub, xml, json_value, text, pointer))
    if sub is True:
        sub = {}
    if not isinstance(sub, dict):
        return json_value(sub, pointer)  # false: no value (an optional argument is left out)
    declared = sub.get("type")
    types = [declared] if isinstance(declared, str) else list(declared or ("string", "number", "boolean", "null",
                                                                           "array", "object"))
    if len(types) > 1 and any(k in sub for k in ("enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref")):
        raise UnsupportedFeatureError("type", pointer=pointer, hint=f"{xml.name} names an argument's type before "
                                      "its value: give a property with these keywords one \"type\"")
    branches = []
    for t in types:
        if t not in KINDS or (t == "integer" and "number" in types):  # number's branch writes integers too
            continue
        one = {**sub, "type": t}
        value = _value(one, xml, json_value, text, pointer) if t == "string" else json_value(one, pointer)
        branches.append(seq(Lit(xml.opening(key, raw=t == "string", kind=KINDS[t]).encode()), value))
    return alt(*branches)


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
    properties = (schema.get("properties") or {}) if isinstance(schema, dict) else {}
    extra = schema.get("additionalProperties", not properties) if isinstance(schema, dict) else True
    out: dict[str, Any] = {}
    for found in xml.pattern().finditer(text):
        key, value = found["key"], found["value"]
        sub = properties.get(key, extra if isinstance(extra, dict) else {"type": "string"})
        groups = xml.pattern().groupindex
        raw = found["string"] == "true" if "string" in groups else found["type"] == "string" if "type" in groups \
            else _is_string(sub)
        if raw:
            out[key] = value
        else:
            try:
                out[key] = json.loads(value)
            except ValueError as err:
                raise ParseError(f"argument {key!r} is not JSON: {value[:80]!r}") from err
    return out


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

