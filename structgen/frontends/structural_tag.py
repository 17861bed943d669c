"""Structural tags: xgrammar's composition format, read into one grammar IR.

A structural tag is a tree of *formats*, written as JSON exactly as xgrammar documents it (so a
request written for vLLM's ``structured_outputs.structural_tag``, SGLang or TensorRT-LLM works
unchanged)::

    {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="],
     "tags": [{"type": "tag", "begin": "<function=get_weather>",
               "content": {"type": "json_schema", "json_schema": {...}}, "end": "</function>"}]}}

Formats read here (the fields xgrammar gives them):

- primitives: ``const_string`` (``value``), ``json_schema`` (``json_schema``; ``style``
  ``"json"``, or the XML argument styles ``"qwen_xml"``, ``"minimax_xml"``, ``"glm_xml"``,
  ``"deepseek_xml"``, ``"kimi_k3_xml"``, ``"cohere_xml"``, ``"deepseek_v4_1_xml"`` of
  :mod:`structgen.frontends.xml_arguments`, and structgen's own ``"pythonic"``), ``regex`` (``pattern``, Python ``re`` dialect), ``grammar`` (``grammar``: Lark
  text, or xgrammar/GBNF EBNF when it holds ``::=``), ``any_text`` (``excludes``,
  ``max_chars``);
- composition: ``sequence`` and ``or`` (``elements``), ``optional``, ``plus``, ``star``
  (``content``), ``repeat`` (``min``, ``max`` with ``-1`` unbounded, ``content``);
- tagging: ``tag`` (``begin``, ``content``, ``end``: a string or a list of strings),
  ``triggered_tags`` (``triggers``, ``tags``, ``at_least_one``, ``stop_after_first``,
  ``excludes``), ``tags_with_separator`` (``tags``, ``separator``, ``at_least_one``,
  ``stop_after_first``), ``dispatch`` (``rules`` of ``[pattern, format]``, ``loop``,
  ``excludes``);
- the older ``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
  "triggers": [...]}``, read as ``triggered_tags``.

As in xgrammar, an unlimited format (``any_text``, ``triggered_tags``, ``dispatch``) inside a
``tag`` stops at the tag's end strings: its text never contains them. Free text is any UTF-8.

What cannot be honoured is refused, never dropped: the token-level formats (``token``,
``any_tokens``, ``token_triggered_tags``, ...), ``any_text``'s ``max_tokens`` (a decoding-time
budget: use ``thinking_budget=``), the ``style`` values ``minimax_m3_xml`` and ``gemma``, ``any_order``, unknown fields
and types: each a :class:`~structgen.errors.StructuralTagError` naming the JSON pointer.

Example
-------
>>> spec = {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}
>>> from structgen.core.regular import matches
>>> g = structural_tag_grammar(read_structural_tag(spec))
>>> print(g.start, len(g.rules) > 0)
root True
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from structgen.core.ir import Alt, ByteClass, Expr, Grammar, Lit, Ref, Repeat, Seq, alt, seq, substitute
from structgen.core.limits import check_input_size
from structgen.errors import GrammarError, SchemaError, StructuralTagError, UnsupportedFeatureError
from structgen.frontends.json_text import UTF8_MULTI
from structgen.frontends.xml_arguments import XML_STYLES

__all__ = ["fixed_strings", "read_structural_tag", "structural_tag_grammar", "StructuralTag", "Whitespace", "TEXT_CHAR",
           "free_text"]

Whitespace = Literal["flexible", "compact", "spaced"]

#: One UTF-8 character, any code point but a surrogate: what ``any_text`` is made of.
TEXT_CHAR: Expr = Alt((ByteClass(((0x00, 0x7F),)), UTF8_MULTI))
_ANY_BYTES = Repeat(ByteClass(((0, 255),)), 0, None)

_FIELDS: dict[str, tuple[set[str], set[str]]] = {  # type -> (required fields, optional fields)
    "const_string": ({"value"}, set()),
    "json_schema": ({"json_schema"}, {"style", "any_order"}),
    "regex": ({"pattern"}, set()),
    "grammar": ({"grammar"}, set()),
    "any_text": (set(), {"excludes", "max_chars", "max_tokens"}),
    "sequence": ({"elements"}, set()),
    "or": ({"elements"}, set()),
    "optional": ({"content"}, set()),
    "plus": ({"content"}, set()),
    "star": ({"content"}, set()),
    "repeat": ({"min", "max", "content"}, set()),
    "tag": ({"begin", "content", "end"}, set()),
    "triggered_tags": ({"triggers", "tags"}, {"at_least_one", "stop_after_first", "excludes"}),
    "tags_with_separator": ({"tags", "separator"}, {"at_least_one", "stop_after_first"}),
    "dispatch": ({"rules"}, {"loop", "excludes"}),
}
_TOKEN_TYPES = ("token", "exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch")
#: the most nested formats a spec may have (each level is a Python call when read)
MAX_FORMAT_DEPTH = 200


@dataclass(frozen=True)
class StructuralTag:
    """A checked structural tag: its root format (plain JSON data) and the whole spec as given.

    ``format`` is the ``format`` object of ``{"type": "structural_tag", "format": ...}`` (or the
    format given alone, or a ``triggered_tags`` read from the older ``structures`` form);
    pointers in errors are into ``spec``, ``root`` is the pointer of ``format`` there.
    """

    format: Any
    spec: Any
    root: str


def read_structural_tag(spec: Any) -> StructuralTag:
    """Read a structural tag (a dict or its JSON text) and check every format in it.

    Raises
    ------
    StructuralTagError
        A malformed or unsupported format, with the JSON pointer of the field.

    Example
    -------
    >>> read_structural_tag({"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}}).root
    '/format'
    >>> read_structural_tag({"type": "token", "token": "<|call|>"})
    Traceback (most recent call last):
    ...
    structgen.errors.StructuralTagError: format 'token' is not supported: special-token formats need token-level masks; write the marker as a string (a tokenizer that has it as a token still writes it with that token) (at JSON pointer '/type')
    """
    if isinstance(spec, (str, bytes)):
        check_input_size(spec, "the structural tag")
        try:
            spec = json.loads(spec)
        except ValueError as err:
            raise StructuralTagError(f"the structural tag is not JSON: {err}") from err
    if not isinstance(spec, dict):
        raise StructuralTagError(f"a structural tag is a JSON object, not {type(spec).__name__}")
    if spec.get("type") == "structural_tag":
        if "format" in spec:
            _only(spec, {"type", "format"}, "")
            tag = StructuralTag(spec["format"], spec, "/format")
        elif "structures" in spec:
            _only(spec, {"type", "structures", "triggers"}, "")
            tag = StructuralTag(_legacy(spec), spec, "")
        else:
            raise StructuralTagError('a structural tag needs a "format" (or the older "structures" and '
                                     '"triggers")', pointer="")
    else:
        tag = StructuralTag(spec, spec, "")
    _check(tag.format, tag.root, 0)
    return tag


#: fields whose strings are written as they are (a tokenizer's special token may spell them)
_FIXED = ("value", "begin", "end", "triggers", "separator")


def fixed_strings(tag: StructuralTag) -> list[str]:
    """The strings a structural tag writes as they are: constants, tags' begins and ends,
    triggers, separators, dispatch patterns (where a format's special-token markers sit).

    >>> fixed_strings(read_structural_tag({"type": "tag", "begin": "<a>", "end": ["</a>", "</b>"],
    ...                                    "content": {"type": "json_schema", "json_schema": {"const": "x"}}}))
    ['<a>', '</a>', '</b>']
    """
    out: list[str] = []
    todo = [tag.format]
    while todo:
        fmt = todo.pop()
        if isinstance(fmt, list):
            todo.extend(reversed(fmt))
            continue
        if not isinstance(fmt, dict):
            continue
        for key in _FIXED:
            value = fmt.get(key)
            out.extend([value] if isinstance(value, str) else [v for v in value or () if isinstance(v, str)]
                       if isinstance(value, list) else [])
        if fmt.get("type") == "json_schema" and fmt.get("style", "json") in XML_STYLES:
            xml = XML_STYLES[fmt["style"]]  # the arguments' markup (GLM's <arg_key> is a special token)
            out.extend([xml.open, xml.item, xml.close, xml.separator, xml.after])
        if fmt.get("type") == "dispatch":
            out.extend(rule[0] for rule in fmt["rules"])
            todo.extend(rule[1] for rule in reversed(fmt["rules"]))
        for key in ("content", "elements", "tags"):
            if key in fmt:
                todo.append(fmt[key])
    return out


def _legacy(spec: dict[str, Any]) -> dict[str, Any]:
    """The older form (``structures`` of begin/schema/end, ``triggers``) as ``triggered_tags``."""
    structures, triggers = spec.get("structures"), spec.get("triggers")
    if not isinstance(structures, list) or not isinstance(triggers, list):
        raise StructuralTagError('"structures" and "triggers" must be lists', pointer="/structures")
    tags = []
    for i, s in enumerate(structures):
        if not isinstance(s, dict) or set(s) - {"begin", "schema", "end"} or not {"begin", "end"} <= set(s):
            raise StructuralTagError('a structure is {"begin": str, "schema": {...}, "end": str}',
                                     pointer=f"/structures/{i}")
        tags.append({"type": "tag", "begin": s["begin"], "end": s["end"],
                     "content": {"type": "json_schema", "json_schema": s.get("schema", True)}})
    return {"type": "triggered_tags", "triggers": triggers, "tags": tags}


def _only(obj: dict[str, Any], allowed: set[str], ptr: str) -> None:
    for key in obj:
        if key not in allowed:
            raise StructuralTagError(f"unknown field {key!r} (allowed: {', '.join(sorted(allowed))})",
                                     pointer=f"{ptr}/{_escape(key)}")


def _check(fmt: Any, ptr: str, depth: int) -> None:
    """Check one format and those inside it: types, fields, field values."""
    if depth > MAX_FORMAT_DEPTH:
        raise StructuralTagError(f"formats nest more than {MAX_FORMAT_DEPTH} deep", pointer=ptr)
    if not isinstance(fmt, dict):
        raise StructuralTagError(f"a format is a JSON object with a \"type\", not {_shown(fmt)}", pointer=ptr)
    kind = fmt.get("type")
    if kind in _TOKEN_TYPES:
        raise StructuralTagError(f"format {kind!r} is not supported: special-token formats need token-level "
                                 "masks; write the marker as a string (a tokenizer that has it as a token "
                                 "still writes it with that token)", pointer=ptr + "/type")
    if kind not in _FIELDS:
        raise StructuralTagError(f"unknown format type {_shown(kind)} (known: {', '.join(sorted(_FIELDS))})",
                                 pointer=ptr + "/type")
    required, optional = _FIELDS[kind]
    _only(fmt, required | optional | {"type"}, ptr)
    missing = sorted(required - set(fmt))
    if missing:
        raise StructuralTagError(f"format {kind!r} needs the field {missing[0]!r}", pointer=ptr)
    check = _CHECKS.get(kind)
    if check is not None:
        check(fmt, ptr)
    for key in ("content",):
        if key in fmt:
            _check(fmt[key], f"{ptr}/{key}", depth + 1)
    for key in ("elements", "tags"):
        if key in fmt:
            items = fmt[key]
            if not isinstance(items, list) or not items:
                raise StructuralTagError(f"{key!r} must be a non-empty list of formats", pointer=f"{ptr}/{key}")
            for i, item in enumerate(items):
                where = f"{ptr}/{key}/{i}"
                if key == "tags" and (not isinstance(item, dict) or item.get("type", "tag") != "tag"):
                    raise StructuralTagError("each of \"tags\" is a format of type \"tag\"", pointer=where)
                _check({"type": "tag", **item} if key == "tags" else item, where, depth + 1)
    if kind == "dispatch":
        for i, rule in enumerate(fmt["rules"]):
            _check(rule[1], f"{ptr}/rules/{i}/1", depth + 1)


def _strings(value: Any, ptr: str, *, empty: bool = True) -> None:
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise StructuralTagError("must be a list of strings", pointer=ptr)
    if not empty and not value:
        raise StructuralTagError("must not be empty", pointer=ptr)


def _flag(fmt: dict[str, Any], key: str, ptr: str) -> None:
    if key in fmt and not isinstance(fmt[key], bool):
        raise StructuralTagError(f"{key!r} must be true or false, not {_shown(fmt[key])}", pointer=f"{ptr}/{key}")


def _count(value: Any, ptr: str, *, least: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= 2**31 - 1:
        raise StructuralTagError(f"must be an integer from {least} to 2147483647, not {_shown(value)}", pointer=ptr)


def _check_const(fmt: dict[str, Any], ptr: str) -> None:
    if not isinstance(fmt["value"], str):
        raise StructuralTagError("'value' must be a string", pointer=ptr + "/value")


def _check_json(fmt: dict[str, Any], ptr: str) -> None:
    from structgen.frontends.xml_arguments import XML_STYLES

    style = fmt.get("style", "json")
    if style != "json" and style not in XML_STYLES:
        raise StructuralTagError(f"style {_shown(style)} is not supported (supported: \"json\", "
                                 f"{', '.join(map(json.dumps, XML_STYLES))})", pointer=ptr + "/style")
    if fmt.get("any_order", False) is not False:
        raise StructuralTagError("'any_order' is not supported: properties come in their declared order",
                                 pointer=ptr + "/any_order")
    if not isinstance(fmt["json_schema"], (dict, bool, str)):
        raise StructuralTagError("'json_schema' must be a JSON schema (an object or a boolean)",
                                 pointer=ptr + "/json_schema")


def _check_text(fmt: dict[str, Any], ptr: str) -> None:
    key = "pattern" if fmt["type"] == "regex" else "grammar"
    if not isinstance(fmt[key], str):
        raise StructuralTagError(f"{key!r} must be a string", pointer=f"{ptr}/{key}")


def _check_any_text(fmt: dict[str, Any], ptr: str) -> None:
    _strings(fmt.get("excludes", []), ptr + "/excludes")
    if fmt.get("max_tokens") is not None:
        raise StructuralTagError("'max_tokens' is not supported in a structural tag (it is a budget the "
                                 "decoder keeps); for reasoning pass thinking_budget=", pointer=ptr + "/max_tokens")
    if fmt.get("max_chars") is not None:
        _count(fmt["max_chars"], ptr + "/max_chars")


def _check_repeat(fmt: dict[str, Any], ptr: str) -> None:
    _count(fmt["min"], ptr + "/min")
    if fmt["max"] != -1:
        _count(fmt["max"], ptr + "/max")
        if fmt["max"] < fmt["min"]:
            raise StructuralTagError("'max' is below 'min'", pointer=ptr + "/max")


def _check_tag(fmt: dict[str, Any], ptr: str) -> None:
    if not isinstance(fmt["begin"], str):
        raise StructuralTagError("'begin' must be a string (token-level begins are not supported)",
                                 pointer=ptr + "/begin")
    end = fmt["end"]
    if isinstance(end, list):
        _strings(end, ptr + "/end", empty=False)
    elif not isinstance(end, str):
        raise StructuralTagError("'end' must be a string or a list of strings", pointer=ptr + "/end")


def _check_triggered(fmt: dict[str, Any], ptr: str) -> None:
    _strings(fmt["triggers"], ptr + "/triggers", empty=False)
    _strings(fmt.get("excludes", []), ptr + "/excludes")
    for key in ("at_least_one", "stop_after_first"):
        _flag(fmt, key, ptr)
    triggers = fmt["triggers"]
    if "" in triggers:
        raise StructuralTagError("a trigger must not be empty", pointer=f"{ptr}/triggers/{triggers.index('')}")
    for i, tag in enumerate(fmt["tags"] if isinstance(fmt["tags"], list) else []):
        begin = tag.get("begin") if isinstance(tag, dict) else None
        if isinstance(begin, str):
            hits = [t for t in triggers if begin.startswith(t)]
            if len(hits) != 1:
                raise StructuralTagError(f"the tag's begin {begin!r} must start with exactly one trigger, "
                                         f"it starts with {len(hits)}", pointer=f"{ptr}/tags/{i}/begin")


def _check_separated(fmt: dict[str, Any], ptr: str) -> None:
    if not isinstance(fmt["separator"], str):
        raise StructuralTagError("'separator' must be a string", pointer=ptr + "/separator")
    for key in ("at_least_one", "stop_after_first"):
        _flag(fmt, key, ptr)


def _check_dispatch(fmt: dict[str, Any], ptr: str) -> None:
    rules = fmt["rules"]
    if not isinstance(rules, list) or not rules:
        raise StructuralTagError("'rules' must be a non-empty list of [pattern, format]", pointer=ptr + "/rules")
    for i, rule in enumerate(rules):
        if not (isinstance(rule, list) and len(rule) == 2 and isinstance(rule[0], str) and rule[0]):
            raise StructuralTagError("a rule is [pattern string, format]", pointer=f"{ptr}/rules/{i}")
    _flag(fmt, "loop", ptr)
    _strings(fmt.get("excludes", []), ptr + "/excludes")


_CHECKS = {"const_string": _check_const, "json_schema": _check_json, "regex": _check_text,
           "grammar": _check_text, "any_text": _check_any_text, "repeat": _check_repeat, "tag": _check_tag,
           "triggered_tags": _check_triggered, "tags_with_separator": _check_separated,
           "dispatch": _check_dispatch}


# ----------------------------------------------------------------------------------- to IR

def structural_tag_grammar(tag: StructuralTag, *, whitespace: Whitespace = "flexible", strict: bool = False,
                           canonical: bool = False) -> Grammar:
    """The grammar of a checked structural tag (start rule ``root``).

    ``whitespace``, ``strict`` and ``canonical`` apply to every ``json_schema`` inside, as in
    :func:`structgen.compile_json_schema`.

    Raises
    ------
    StructuralTagError, UnsupportedFeatureError, GrammarError
        A schema, pattern or grammar inside that cannot be compiled, with the pointer of its format.
    """
    builder = _Builder(whitespace, strict, canonical)
    body = builder.expr(tag.format, tag.root, ())
    return Grammar((("root", body), *builder.rules), "root").checked()


class _Builder:
    """Lowers formats to IR; sub-grammars (schemas, grammars) become prefixed rules."""

    def __init__(self, whitespace: Whitespace, strict: bool, canonical: bool) -> None:
        self.whitespace, self.strict, self.canonical = whitespace, strict, canonical
        self.rules: list[tuple[str, Expr]] = []
        self.count = 0

    def expr(self, fmt: dict[str, Any], ptr: str, stops: tuple[str, ...]) -> Expr:
        """IR of ``fmt``; ``stops`` are the enclosing tag's end strings, which an unlimited
        format inside must not write (the tag's end follows it)."""
        kind = fmt["type"]
        if kind == "const_string":
            return Lit(fmt["value"].encode())
        if kind == "json_schema":
            if fmt.get("style", "json") != "json":
                return self._xml(fmt["json_schema"], fmt["style"], ptr + "/json_schema")
            return self._schema(fmt["json_schema"], ptr + "/json_schema")
        if kind == "regex":
            return self._regex(fmt["pattern"], ptr + "/pattern")
        if kind == "grammar":
            return self._grammar(fmt["grammar"], ptr + "/grammar")
        if kind == "any_text":
            return self._text(tuple(fmt.get("excludes", ())) + stops, fmt.get("max_chars"))
        if kind in ("sequence", "or"):
            items = fmt["elements"]
            last = len(items) - 1
            parts = [self.expr(e, f"{ptr}/elements/{i}", stops if kind == "or" or i == last else ())
                     for i, e in enumerate(items)]
            return seq(*parts) if kind == "sequence" else alt(*parts)
        if kind in ("optional", "plus", "star", "repeat"):
            inner = self._rule(self.expr(fmt["content"], ptr + "/content", stops))
            lo, hi = {"optional": (0, 1), "plus": (1, None), "star": (0, None)}.get(kind, (0, 0))
            if kind == "repeat":
                lo, hi = fmt["min"], (None if fmt["max"] == -1 else fmt["max"])
            return Repeat(inner, lo, hi)
        if kind == "tag":
            return self._tag(fmt, ptr)
        if kind == "triggered_tags":
            return self._triggered(fmt, ptr, stops)
        if kind == "tags_with_separator":
            return self._separated(fmt, ptr)
        return self._dispatch(fmt, ptr, stops)

    def _rule(self, body: Expr) -> Expr:
        """``body`` as a rule of its own (a reference), so repeats and choices share it."""
        if isinstance(body, (Ref, Lit)):
            return body
        self.count += 1
        name = f"st{self.count}"
        self.rules.append((name, body))
        return Ref(name)

    def _tag(self, fmt: dict[str, Any], ptr: str) -> Expr:
        content, end = self._tag_body(fmt, ptr)
        return seq(Lit(fmt["begin"].encode()), content, end)

    def _tag_body(self, fmt: dict[str, Any], ptr: str) -> tuple[Expr, Expr]:
        """(content, end) of a tag: the content stops at the end strings."""
        ends = fmt["end"] if isinstance(fmt["end"], list) else [fmt["end"]]
        content = self.expr(fmt["content"], ptr + "/content", tuple(e for e in ends if e))
        return self._rule(content), alt(*(Lit(e.encode()) for e in ends))

    def _xml(self, schema: Any, style: str, ptr: str) -> Expr:
        from structgen.frontends.xml_arguments import xml_arguments

        if isinstance(schema, str):
            schema = self._parsed(schema, ptr)
        values = self._python if XML_STYLES[style].quoted else self._schema
        return self._rule(xml_arguments(schema, style, values, self._text, ptr, rule=self._rule))

    def _python(self, schema: Any, ptr: str) -> Expr:
        """A value as a Python literal (a pythonic call's argument)."""
        return self._schema(schema, ptr, python=True)

    def _text(self, excludes: tuple[str, ...], max_chars: int | None = None, *, nonempty: bool = False) -> Expr:
        """UTF-8 text holding none of ``excludes`` (at most ``max_chars`` characters; with
        ``nonempty`` at least one)."""
        from structgen.core.regular import with_length

        text: Expr = Repeat(TEXT_CHAR, 1 if nonempty else 0, None)
        if max_chars is not None:
            text = with_length(text, TEXT_CHAR, 0, max_chars, what="any_text's max_chars")
        return self._rule(free_text(excludes, text))

    def _triggered(self, fmt: dict[str, Any], ptr: str, stops: tuple[str, ...]) -> Expr:
        tags = fmt["tags"]
        bodies = [self._tag_body(t, f"{ptr}/tags/{i}") for i, t in enumerate(tags)]
        whole = [seq(Lit(t["begin"].encode()), *body) for t, body in zip(tags, bodies)]
        if fmt.get("at_least_one") and fmt.get("stop_after_first"):
            return alt(*whole)
        rules = []
        for trigger in fmt["triggers"]:
            group = [seq(Lit(t["begin"][len(trigger):].encode()), *body)
                     for t, body in zip(tags, bodies) if t["begin"].startswith(trigger)]
            rules.append((trigger, alt(*group) if group else None))
        body = self._dispatched(rules, tuple(fmt.get("excludes", ())) + stops, loop=not fmt.get("stop_after_first"))
        return seq(alt(*whole), body) if fmt.get("at_least_one") else body

    def _dispatch(self, fmt: dict[str, Any], ptr: str, stops: tuple[str, ...]) -> Expr:
        rules = [(pattern, self.expr(sub, f"{ptr}/rules/{i}/1", ()))
                 for i, (pattern, sub) in enumerate(fmt["rules"])]
        return self._dispatched(rules, tuple(fmt.get("excludes", ())) + stops, loop=fmt.get("loop", True))

    def _dispatched(self, rules: list[tuple[str, Expr | None]], excludes: tuple[str, ...], *, loop: bool) -> Expr:
        """Free text; where one of the patterns appears, what follows it is that rule's.

        ``loop``: free text again after each, any number of times; otherwise at most one.
        """
        triggers = tuple(p for p, _ in rules)
        free = self._text(triggers + excludes)
        branch = self._rule(alt(*(seq(Lit(p.encode()), r) for p, r in rules if r is not None)))
        if loop:
            return seq(free, Repeat(self._rule(seq(branch, free)), 0, None))
        return seq(free, Repeat(branch, 0, 1))

    def _separated(self, fmt: dict[str, Any], ptr: str) -> Expr:
        one = self._rule(alt(*(self._tag({"type": "tag", **t}, f"{ptr}/tags/{i}")
                               for i, t in enumerate(fmt["tags"]))))
        many = one if fmt.get("stop_after_first") else seq(
            one, Repeat(seq(Lit(fmt["separator"].encode()), one), 0, None))
        return many if fmt.get("at_least_one") else Repeat(self._rule(many), 0, 1)

    def _schema(self, schema: Any, ptr: str, *, python: bool = False) -> Expr:
        from structgen.frontends.json_schema.translate import translate_schema

        if isinstance(schema, str):
            schema = self._parsed(schema, ptr)
        try:
            sub, _ = translate_schema(schema, whitespace=self.whitespace, strict=self.strict,
                                      canonical=self.canonical, python=python)
        except UnsupportedFeatureError as err:
            moved: SchemaError = UnsupportedFeatureError(err.keyword, pointer=ptr + err.pointer, hint=err.hint)
            moved.no_value = err.no_value  # an optional XML argument with no value is left out
            raise moved from err
        except SchemaError as err:
            moved = StructuralTagError(_message(err), pointer=ptr + err.pointer)
            moved.no_value = err.no_value
            raise moved from err
        return self._embedded(sub)

    @staticmethod
    def _parsed(schema: str, ptr: str) -> Any:
        try:
            return json.loads(schema)
        except ValueError as err:
            raise StructuralTagError(f"the JSON schema text is not JSON: {err}", pointer=ptr) from err

    def _regex(self, pattern: str, ptr: str) -> Expr:
        from structgen.frontends.regex.python import text_regex_to_ir

        try:
            return self._rule(text_regex_to_ir(pattern))
        except GrammarError as err:
            raise StructuralTagError(str(err), pointer=ptr) from err

    def _grammar(self, text: str, ptr: str) -> Expr:
        try:
            if "::=" in text:
                from structgen.frontends.ebnf import read_ebnf

                sub = read_ebnf(text, name=f"the grammar at {ptr}")
            else:
                from structgen.frontends.lark.reader import read_grammar

                sub = read_grammar(text, name=f"the grammar at {ptr}")
        except GrammarError as err:
            raise StructuralTagError(str(err), pointer=ptr) from err
        return self._embedded(sub)

    def _embedded(self, sub: Grammar) -> Expr:
        """A grammar of its own inside this one: its rules renamed apart, its start referenced."""
        self.count += 1
        prefix = f"s{self.count}_"
        self.rules += [(prefix + n, substitute(body, lambda ref: Ref(prefix + ref))) for n, body in sub.rules]
        return Ref(prefix + sub.start)


def free_text(excludes: tuple[str, ...], text: Expr | None = None) -> Expr:
    """``text`` (default: any UTF-8 text) holding none of the strings ``excludes``.

    >>> from structgen.core.regular import matches
    >>> fsm = free_text(("<tool",))
    >>> matches(fsm, b"hello <to"), matches(fsm, b"a <tool b")
    (True, False)
    """
    from structgen.core.regular import difference

    text = Repeat(TEXT_CHAR, 0, None) if text is None else text
    banned = sorted({e for e in excludes if e})
    if not banned:
        return text
    return difference(text, seq(_ANY_BYTES, alt(*(Lit(e.encode()) for e in banned)), _ANY_BYTES),
                      what="the free text of a structural tag")


def _message(err: SchemaError) -> str:
    text = str(err)
    cut = text.rfind(" (at JSON pointer")
    return text[:cut] if cut > 0 else text


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _shown(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."
