"""Tool calls as a grammar: OpenAI-style tool specs and a call format become one grammar IR.

A *format* (:class:`ToolFormat`) is data: how a call is written (wrappers, separator, the key
of the arguments) and how tools and results are shown to a model whose chat template cannot
show them. :data:`FORMATS` has three:

- ``"hermes"`` (Hermes 2 Pro, Qwen 2.5/3): ``<tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>``,
  one block per call, after optional text;
- ``"llama3"`` (Llama 3.1-3.3 JSON tool calling): the whole answer is
  ``{"name": "f", "parameters": {...}}``, several calls separated by ``"; "``;
- ``"json"``, the fallback for models without a tool format (the default model's template has
  none): a JSON list of calls in one tag, ``<tool_call>[{"name": "f", "arguments": {...}}]</tool_call>``,
  after optional text. It is the shape SmolLM2's own tool-calling prompt asks for.

:func:`tool_call_grammar` builds the grammar for one request:

- ``"required"`` (or one named tool): calls from the first byte; each call's name is one of
  the allowed tools and its arguments follow that tool's ``parameters`` (strict objects,
  canonical JSON spaced as ``json.dumps`` spaces it: ``{"a": 1, "b": [1, 2]}``, the style the
  format's own head ``{"name": "f", "arguments": `` has and models were trained on);
- ``"auto"``: free text that never contains the format's *trigger* (``<tool_call``: a text
  that spells a call another way, ``<tool_call id=...>``, is not text either), then
  optionally the calls; or the calls alone. The text holds at least one non-space character,
  so an answer is never empty and the end-of-sequence token is illegal first;
- ``"none"``: the free text alone.

This module knows nothing of tokenizers or torch (:mod:`structgen.tasks.tool_calls` renders prompts
and runs the model).

Example
-------
>>> tools = [{"type": "function", "function": {"name": "add", "parameters": {
...     "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]
>>> specs = read_tools(tools)
>>> g = tool_call_grammar(specs, FORMATS["hermes"], choice="required")
>>> from structgen.core.regular import matches
>>> from structgen.engine.compiled import CompiledGrammar
>>> from structgen.engine.vocab import Vocabulary
>>> m = CompiledGrammar(g, Vocabulary([bytes([b]) for b in range(256)] + [None], eos_ids=[256])).matcher()
>>> all(m.advance(b) for b in b'<tool_call>\\n{"name": "add", "arguments": {"a": '), m.forced_text()
(True, '')
>>> all(m.advance(b) for b in b'2}}\\n</tool_call>'), m.can_end()
(True, True)
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal

from structgen.errors import OptionError, ParseError, SchemaError, ToolSpecError, UnsupportedFeatureError
from structgen.core.ir import Alt, ByteClass, Expr, Grammar, Lit, Ref, Repeat, Seq, alt, seq, substitute
from structgen.core.depth import MAX_NESTING, recursion_room, too_deep
from structgen.frontends.json_text import UTF8_MULTI

__all__ = ["ToolFormat", "FORMATS", "ToolSpec", "ToolSpecError", "read_tools", "read_tool_choice",
           "tool_call_grammar", "open_free_objects", "opened", "call_text", "parse_calls", "Choice"]

Choice = Literal["auto", "required", "none"]

#: Names a tool may have: OpenAI's rule (letters, digits, ``_``, ``-``; 1-64) plus ``.``, which
#: BFCL's function names use (``math.factorial``).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.\-]{1,64}")




@dataclass(frozen=True)
class ToolFormat:
    """How a model writes tool calls, and how tools are shown to it when its template cannot.

    A call is ``call_open + '{"name": ' + name + ', "' + arguments_key + '": ' + arguments + '}' +
    call_close``; calls are joined by ``separator`` and wrapped in ``list_open`` ... ``list_close``.
    ``trigger`` opens the calls (a prefix of ``list_open + call_open + '{"name"'``); with ``text_first`` the
    answer may start with text that does not contain it, otherwise calls start the answer.
    """

    name: str
    call_open: str
    call_close: str
    separator: str
    trigger: str
    list_open: str = ""
    list_close: str = ""
    arguments_key: str = "arguments"
    text_first: bool = True
    #: markers in a chat template's source that say it writes this format
    template_markers: tuple[str, ...] = ()
    #: system text listing the tools, for templates that ignore ``tools=``; ``{tools}`` is
    #: replaced by one JSON line per tool
    system_prompt: str = ""
    #: how a tool result is shown, for templates without a tool role: ``{name}``, ``{content}``
    #: and ``{content_json}`` (the content as a JSON string) are filled in
    result_text: str = ""
    #: writes earlier calls into a prompt (default: :func:`call_text` in this format)
    writer: Any = field(default=None, compare=False)

    @property
    def markup(self) -> tuple[str, ...]:
        """The fixed strings around calls (where a tokenizer's special tokens may sit)."""
        return (self.list_open, self.call_open, self.separator, self.call_close, self.list_close)

    def __post_init__(self) -> None:
        if not self.trigger or not (self.list_open + self.call_open + '{"name"').startswith(self.trigger):
            raise OptionError(f"format {self.name!r}: the trigger must open the calls")


_HERMES_PROMPT = (
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}}\n</tool_call>")

FORMATS: dict[str, ToolFormat] = {f.name: f for f in (
    ToolFormat(
        "hermes", call_open="<tool_call>\n", call_close="\n</tool_call>", separator="\n",
        trigger="<tool_call", template_markers=("<tool_call>",), system_prompt=_HERMES_PROMPT,
        result_text="<tool_response>\n{content}\n</tool_response>"),
    ToolFormat(
        "llama3", call_open="", call_close="", separator="; ", trigger="{", arguments_key="parameters",
        text_first=False, template_markers=('"parameters": ', "ipython"),
        system_prompt=(
            "Given the following functions, please respond with a JSON for a function call with its "
            "proper arguments that best answers the given prompt.\n\nRespond in the format "
            "{{\"name\": function name, \"parameters\": dictionary of argument name and its value}}. "
            "Do not use variables. If no function fits, answer in plain text.\n\n{tools}"),
        result_text='{{"output": {content_json}}}'),
    ToolFormat(
        "json", call_open="", call_close="", separator=", ", trigger="<tool_call",
        list_open="<tool_call>[", list_close="]</tool_call>",
        system_prompt=(
            "You are an expert in composing functions. You are given a question and a set of possible "
            "functions. Based on the question, you may call one or more of the functions.\n\n"
            "Here is a list of functions in JSON format that you can invoke:\n<tools>\n{tools}\n</tools>\n\n"
            "To call functions, write them as a JSON list within <tool_call></tool_call> tags:\n"
            "<tool_call>[{{\"name\": \"func_name1\", \"arguments\": {{\"argument1\": \"value1\"}}}}, "
            "... (more tool calls as required)]</tool_call>\n"
            "If none of the functions fits, answer in plain text."),
        result_text="The function {name} returned: {content}"),
)}


@dataclass(frozen=True)
class ToolSpec:
    """One function a model may call: its name, description and ``parameters`` JSON schema."""

    name: str
    description: str
    parameters: Any
    index: int  # position in the tools list, for error pointers
    #: objects closed to their declared keys (``"strict": false`` on the tool opens them)
    strict: bool = True
    #: a custom tool's input: ("lark" | "regex", definition), ("text", ""); None for a function
    custom: tuple[str, str] | None = None

    def openai(self) -> dict[str, Any]:
        """The tool as OpenAI's chat-completions request writes it (what a prompt shows)."""
        if self.custom is None:
            return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                     "parameters": self.parameters}}
        kind, definition = self.custom
        fmt = {"type": "text"} if kind == "text" else {"type": "grammar", "grammar": {"syntax": kind,
                                                                                     "definition": definition}}
        return {"type": "custom", "custom": {"name": self.name, "description": self.description, "format": fmt}}


def read_tools(tools: Any) -> list[ToolSpec]:
    """Check an OpenAI-style tools list and return its specs; raise :class:`ToolSpecError`.

    Each tool is ``{"type": "function", "function": {"name", "description", "parameters"}}``
    (the inner object alone is accepted too). ``parameters`` defaults to an object without
    properties and must be a valid JSON schema (Draft 2020-12 meta-schema) of an object.
    Keywords structgen cannot honour are found when the grammar is built
    (:func:`tool_call_grammar`), also naming the tool.
    """
    from jsonschema import Draft202012Validator

    if not isinstance(tools, (list, tuple)):
        raise ToolSpecError(f"tools must be a list of tool specs, not {type(tools).__name__}")
    specs: list[ToolSpec] = []
    seen: dict[str, int] = {}
    for i, tool in enumerate(tools):
        where = f"/{i}"
        if not isinstance(tool, dict):
            raise ToolSpecError(f"a tool is an object, not {type(tool).__name__}", pointer=where)
        fn = tool
        if tool.get("type") == "custom":
            spec = _custom_tool(tool, i, where)
            if spec.name in seen:
                raise ToolSpecError(f"the name is used twice (tools {seen[spec.name]} and {i})", tool=spec.name,
                                    pointer=where + "/name")
            seen[spec.name] = i
            specs.append(spec)
            continue
        if "function" in tool or "type" in tool:
            if tool.get("type", "function") != "function":
                raise ToolSpecError(f"tool type {tool.get('type')!r} is not supported (\"function\" or \"custom\")",
                                    pointer=where + "/type")
            fn = tool.get("function")
            where += "/function"
            if not isinstance(fn, dict):
                raise ToolSpecError('a tool of type "function" needs a "function" object', pointer=where)
        name = fn.get("name")
        if name is None:
            raise ToolSpecError("the tool has no name", pointer=where)
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ToolSpecError(f"the name {name!r} is not 1-64 letters, digits, '_', '-' or '.'",
                                pointer=where + "/name")
        if name in seen:
            raise ToolSpecError(f"the name is used twice (tools {seen[name]} and {i})", tool=name,
                                pointer=where + "/name")
        seen[name] = i
        description = fn.get("description", "")
        if not isinstance(description, str):
            raise ToolSpecError("the description must be a string", tool=name, pointer=where + "/description")
        params = fn.get("parameters", {"type": "object", "properties": {}})
        ptr = where + "/parameters"
        if not isinstance(params, dict):
            raise ToolSpecError(f"parameters must be a JSON schema object, not {type(params).__name__}",
                                tool=name, pointer=ptr)
        deep = too_deep(params)
        if deep is not None:
            raise ToolSpecError(f"parameters nest more than {MAX_NESTING} objects and arrays deep here",
                                tool=name, pointer=ptr + deep)
        with recursion_room():  # the meta-schema check recurses per level of nesting
            errors = sorted(Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(params),
                            key=lambda e: [(1, 0, p) if isinstance(p, str) else (0, p, "") for p in e.absolute_path])
        if errors:
            err = errors[0]
            inner = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path)
            raise ToolSpecError(f"parameters is not a valid JSON schema: {err.message}", tool=name,
                                pointer=ptr + inner)
        if params.get("type", "object") != "object":
            raise ToolSpecError(f"parameters must describe an object (\"type\": \"object\"), not "
                                f"{params.get('type')!r}", tool=name, pointer=ptr + "/type")
        strict = fn.get("strict", tool.get("strict", True))
        if not isinstance(strict, bool):
            raise ToolSpecError(f"strict must be true or false, not {strict!r:.40}", tool=name, pointer=where + "/strict")
        specs.append(ToolSpec(name, description, params, i, strict=strict))
    return specs


def _custom_tool(tool: dict[str, Any], i: int, where: str) -> ToolSpec:
    """An OpenAI custom tool: ``{"type": "custom", "custom": {"name", "description", "format"}}``
    (Chat Completions) or the same fields beside ``type`` (Responses). ``format`` is
    ``{"type": "text"}`` (default: free text), or ``{"type": "grammar", "syntax": "lark" |
    "regex", "definition": ...}`` (Chat Completions nests those three in ``"grammar"``)."""
    body = tool.get("custom", tool)
    inner = where + ("/custom" if "custom" in tool else "")
    if not isinstance(body, dict):
        raise ToolSpecError('a custom tool is {"type": "custom", "custom": {"name", "format"}}', pointer=where)
    name = body.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ToolSpecError(f"the name {name!r} is not 1-64 letters, digits, '_', '-' or '.'", pointer=inner + "/name")
    description = body.get("description", "")
    if not isinstance(description, str):
        raise ToolSpecError("the description must be a string", tool=name, pointer=inner + "/description")
    fmt = body.get("format", {"type": "text"})
    ptr = inner + "/format"
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "grammar"):
        raise ToolSpecError('format must be {"type": "text"} or {"type": "grammar", "syntax", "definition"}',
                            tool=name, pointer=ptr)
    if fmt["type"] == "text":
        return ToolSpec(name, description, None, i, custom=("text", ""))
    grammar = fmt.get("grammar", fmt) if isinstance(fmt.get("grammar"), dict) else fmt
    syntax, definition = grammar.get("syntax"), grammar.get("definition")
    if syntax not in ("lark", "regex"):
        raise ToolSpecError(f'the grammar syntax must be "lark" or "regex", not {syntax!r:.40}', tool=name,
                            pointer=ptr + "/syntax")
    if not isinstance(definition, str):
        raise ToolSpecError("the grammar definition must be a string", tool=name, pointer=ptr + "/definition")
    return ToolSpec(name, description, None, i, custom=(syntax, definition))


def read_tool_choice(choice: Any, specs: list[ToolSpec]) -> tuple[Choice, tuple[str, ...]]:
    """(mode, names of the tools that may be called) for an OpenAI ``tool_choice``.

    ``"auto"``, ``"required"``, ``"none"``, ``{"type": "function", "function": {"name": n}}``
    or ``{"type": "custom", "custom": {"name": n}}`` (that one tool, as ``"required"``), or
    ``{"type": "allowed_tools", "allowed_tools": {"mode": "auto" | "required", "tools": [...]}}``
    (those tools only; Responses-style ``{"type": "function", "name": n}`` entries too).
    """
    names = tuple(s.name for s in specs)
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        return _allowed_tools(choice, names)
    if isinstance(choice, str):
        if choice not in ("auto", "required", "none"):
            raise ToolSpecError(f'tool_choice must be "auto", "required", "none" or a named function, not {choice!r}')
        if choice != "none" and not specs:
            raise ToolSpecError(f'tool_choice "{choice}" needs at least one tool')
        return choice, names  # type: ignore[return-value]
    if isinstance(choice, dict):
        kind = choice.get("type", "function")
        fn = choice.get(kind, choice) if kind in ("function", "custom") else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if name is None:
            raise ToolSpecError('a named tool_choice is {"type": "function", "function": {"name": ...}}, '
                                f"not {choice!r}")
        if name not in names:
            raise ToolSpecError(f"tool_choice names {name!r}, which is not among the tools {list(names)}")
        return "required", (name,)
    raise ToolSpecError(f"tool_choice must be a string or a dict, not {type(choice).__name__}")


def _allowed_tools(choice: dict[str, Any], names: tuple[str, ...]) -> tuple[Choice, tuple[str, ...]]:
    """OpenAI's ``{"type": "allowed_tools", "allowed_tools": {"mode", "tools"}}`` (Chat
    Completions; Responses puts ``mode`` and ``tools`` beside ``type``): calls of those tools
    only, ``mode`` ``"auto"`` (text allowed) or ``"required"``."""
    body = choice.get("allowed_tools", choice)
    mode, listed = (body.get("mode"), body.get("tools")) if isinstance(body, dict) else (None, None)
    if mode not in ("auto", "required") or not isinstance(listed, list) or not listed:
        raise ToolSpecError('allowed_tools is {"mode": "auto" | "required", "tools": [{"type": "function", '
                            f'"function": {{"name": ...}}}}, ...]}}, not {choice!r:.120}')
    chosen = []
    for entry in listed:
        fn = entry.get("function", entry.get("custom", entry)) if isinstance(entry, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if name not in names:
            raise ToolSpecError(f"allowed_tools names {name!r}, which is not among the tools {list(names)}")
        chosen.append(name)
    return mode, tuple(dict.fromkeys(chosen))


# ------------------------------------------------------------------------------- the grammar

_ASCII_TEXT = ByteClass(((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x7E)))
_CHAR = Alt((_ASCII_TEXT, UTF8_MULTI))
_SPACE = ByteClass.of(" \t\n\r")
_SOLID = Alt((ByteClass(((0x21, 0x7E),)), UTF8_MULTI))  # a character that is not white space
_ANY_BYTES = Repeat(ByteClass(((0, 255),)), 0, None)


def text_rule(fmt: ToolFormat) -> Expr:
    """Free text: UTF-8 with at least one non-space character, never opening a call.

    With ``fmt.text_first`` the text must not contain the trigger anywhere; otherwise (calls
    start the answer) it must not start with it, after optional white space.
    """
    from structgen.core.regular import difference

    text = seq(Repeat(_SPACE, 0, None), _SOLID, Repeat(_CHAR, 0, None))
    trigger = Lit(fmt.trigger.encode())
    calls = seq(_ANY_BYTES, trigger, _ANY_BYTES) if fmt.text_first else seq(Repeat(_SPACE, 0, None), trigger,
                                                                              _ANY_BYTES)
    return difference(text, calls, what="the free text of a tool-call answer")


def tool_call_grammar(specs: list[ToolSpec], fmt: ToolFormat, *, choice: Choice = "auto",
                      names: tuple[str, ...] | None = None, parallel: bool = True,
                      strict: bool = True) -> Grammar:
    """The grammar of an answer under ``choice``: text and/or calls of the tools in ``names``.

    ``parallel``: one or more calls (False: exactly one). Each tool's arguments are its
    ``parameters`` compiled as generation compiles JSON schemas: canonical spelling (numbers
    without exponent), spaced as ``json.dumps`` spaces it, and with ``strict`` objects closed to the keys they
    declare unless they say ``additionalProperties`` (an object declaring no keys at all stays
    open: :func:`open_free_objects`); ``strict=False`` keeps JSON Schema's open objects.

    Raises
    ------
    UnsupportedFeatureError
        A tool's parameters use a keyword structgen cannot honour; the message names the tool
        and the pointer is inside the tools list.
    OptionError
        ``parallel`` is not a bool.
    """
    from structgen.frontends.json_schema.translate import translate_schema

    if not isinstance(parallel, bool):  # "false" is a non-empty string: it read as true
        raise OptionError(f"parallel_tool_calls must be True or False, not {parallel!r:.40}")
    allowed = [s for s in specs if names is None or s.name in names]
    custom = next((s for s in allowed if s.custom is not None), None)
    if custom is not None and choice != "none":
        raise ToolSpecError(f"custom tools are written raw, and format {fmt.name!r} writes each call as JSON; "
                            "use a native format whose call body is not JSON (e.g. format='harmony', 'kimi', "
                            "'deepseek_v3_1', 'mistral')", tool=custom.name, pointer=f"/{custom.index}")
    rules: list[tuple[str, Expr]] = [("root", Seq(()))]
    if choice != "none":
        calls = []
        for k, spec in enumerate(allowed):
            try:
                with recursion_room():  # open_free_objects recurses per level, as the walk does
                    sub, _ = translate_schema(open_free_objects(spec.parameters), whitespace="spaced",
                                              strict=strict and spec.strict, canonical=True)
            except UnsupportedFeatureError as err:
                raise _in_tool(err, spec) from err
            except SchemaError as err:
                raise ToolSpecError(str(err), tool=spec.name,
                                    pointer=f"/{spec.index}/function/parameters{err.pointer}") from err
            prefix = f"tool{k}_"
            rules += [(prefix + n, substitute(body, lambda ref: Ref(prefix + ref))) for n, body in sub.rules]
            calls.append(seq(Lit((fmt.call_open + _call_head(fmt, spec.name)).encode()), Ref(prefix + sub.start),
                             Lit(b"}" + fmt.call_close.encode())))
        rules.append(("call", alt(*calls)))
        more = Repeat(seq(Lit(fmt.separator.encode()), Ref("call")), 0, None) if parallel else Seq(())
        rules.append(("calls", seq(Lit(fmt.list_open.encode()), Ref("call"), more, Lit(fmt.list_close.encode()))))
    if choice != "required":
        rules.append(("text", text_rule(fmt)))
    if choice == "required":
        root: Expr = Ref("calls")
    elif choice == "none":
        root = Ref("text")
    elif fmt.text_first:
        root = alt(seq(Ref("text"), Repeat(Ref("calls"), 0, 1)), Ref("calls"))
    else:
        root = alt(Ref("text"), Ref("calls"))
    rules[0] = ("root", root)
    return Grammar(tuple(rules), "root").checked()


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
                  "unevaluatedItems", "unevaluatedProperties", "additionalItems")
_OBJECT_KEYS = ("properties", "patternProperties", "additionalProperties", "unevaluatedProperties")


def open_free_objects(schema: Any) -> Any:
    """A copy of ``schema`` where each object schema that declares no keys at all
    (``{"type": "object"}``, BFCL's ``dict``) says ``additionalProperties: true``.

    Tool arguments are compiled with closed objects (``strict``: a model may not invent keys),
    which would leave a free-form object only ``{}``; such an object is meant to take any keys.

    >>> open_free_objects({"type": "object", "properties": {"d": {"type": "object"}}})
    {'type': 'object', 'properties': {'d': {'type': 'object', 'additionalProperties': True}}}
    """
    return _opening(schema, lambda out: _object_typed(out) and not any(k in out for k in _OBJECT_KEYS))


def opened(schema: Any) -> Any:
    """``schema`` with every object that does not say ``additionalProperties`` open (what a
    tool with ``"strict": false`` means where the other tools' objects are closed).

    >>> opened({"type": "object", "properties": {"a": {"type": "object"}}})
    {'type': 'object', 'properties': {'a': {'type': 'object', 'additionalProperties': True}}, 'additionalProperties': True}
    """
    return _opening(schema, lambda out: (_object_typed(out) or "properties" in out)
                    and "additionalProperties" not in out)


def _opening(schema: Any, opens: Any) -> Any:
    """A copy of ``schema`` where each object schema for which ``opens(it)`` holds (and every
    one inside it) says ``additionalProperties: true``."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: _opening(v, opens) for k, v in out[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_opening(v, opens) for v in out[key]]
    for key in _SCHEMA_VALUES:
        if key in out:
            out[key] = _opening(out[key], opens)
    if opens(out):
        out["additionalProperties"] = True
    return out


def _object_typed(schema: dict[str, Any]) -> bool:
    types = schema.get("type")
    return types == "object" or (isinstance(types, list) and "object" in types)


def _in_tool(err: UnsupportedFeatureError, spec: ToolSpec) -> UnsupportedFeatureError:
    hint = f"in the parameters of tool '{spec.name}'" + (f": {err.hint}" if err.hint else "")
    out = UnsupportedFeatureError(err.keyword, pointer=f"/{spec.index}/function/parameters{err.pointer}",
                                  hint=hint)
    out.tool = spec.name  # type: ignore[attr-defined]
    return out


# ------------------------------------------------------------------------ writing and reading

def argument_json(value: Any, *, python: bool = False) -> str:
    """``value`` as JSON the way the tool grammar spells it: ``json.dumps``'s spacing, non-ASCII
    raw, keys in the order given, numbers without exponent (``1e-09`` as ``0.000000001``);
    ``python=True``: the Python literal a pythonic call writes (``True``, ``False``, ``None``).

    >>> argument_json({"x": [1e-09, 2.5e20, "é"], "y": {}})
    '{"x": [0.000000001, 250000000000000000000.0, "é"], "y": {}}'
    >>> argument_json([True, None], python=True)
    '[True, None]'
    """
    if isinstance(value, dict):
        return "{" + ", ".join(json.dumps(str(k), ensure_ascii=False) + ": " + argument_json(v, python=python)
                               for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(argument_json(v, python=python) for v in value) + "]"
    if python and (value is None or isinstance(value, bool)):
        return repr(value)
    if isinstance(value, float) and math.isfinite(value):
        text = repr(value)
        if "e" in text:
            text = format(Decimal(text), "f")
            text += "" if "." in text else ".0"
        return text
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def call_text(fmt: ToolFormat, calls: list[tuple[str, Any]]) -> str:
    """The text of ``calls`` ((name, arguments) pairs) in ``fmt``, spelled as the grammar spells
    it (:func:`argument_json`).

    >>> call_text(FORMATS["json"], [("f", {"x": 1}), ("g", {})])
    '<tool_call>[{"name": "f", "arguments": {"x": 1}}, {"name": "g", "arguments": {}}]</tool_call>'
    """
    parts = [fmt.call_open + _call_head(fmt, name) + argument_json(args) + "}" + fmt.call_close
             for name, args in calls]
    return fmt.list_open + fmt.separator.join(parts) + fmt.list_close


def _call_head(fmt: ToolFormat, name: str) -> str:
    """A call's text up to its arguments, as both the grammar and :func:`call_text` write it."""
    return '{"name": ' + json.dumps(name) + ', "' + fmt.arguments_key + '": '


def parse_calls(fmt: ToolFormat, text: str) -> tuple[str | None, list[tuple[str, Any]]]:
    """(text before the calls or None, [(name, arguments)]) of an answer in ``fmt``.

    The answer is one the grammar accepted, so its shape is known; anything else raises
    :class:`~structgen.errors.ParseError`.

    >>> parse_calls(FORMATS["hermes"], 'Sure.\\n<tool_call>\\n{"name": "f", "arguments": {}}\\n</tool_call>')
    ('Sure.', [('f', {})])
    """
    content, spans, end = call_spans(fmt, text)
    if not spans and _trigger_at(fmt, text) >= 0:
        raise ParseError(f"no complete call after {fmt.trigger!r} in {text!r}")
    if spans and not text.startswith(fmt.list_close, end):
        raise ParseError(f"expected {fmt.list_close!r} at {end} in {text!r}")
    if spans and end + len(fmt.list_close) != len(text):
        raise ParseError(f"unexpected text after the calls: {text[end + len(fmt.list_close):]!r}")
    return content, [(name, args) for _, _, name, args in spans]


def call_spans(fmt: ToolFormat, text: str) -> tuple[str | None, list[tuple[int, int, str, Any]], int]:
    """The calls of a possibly unfinished answer: (text before them or None, [(start, end, name,
    arguments)] of each complete call, where the complete calls end).

    A call's span runs from its ``call_open`` to the end of its ``call_close``; ``end`` is where
    ``list_close`` would follow.

    >>> call_spans(FORMATS["json"], '<tool_call>[{"name": "f", "arguments": {}}, {"name": "g", "argu')
    (None, [(12, 42, 'f', {})], 42)
    """
    at = _trigger_at(fmt, text)
    if at < 0:
        return text, [], len(text)
    content = text[:at].strip() or None
    if not text.startswith(fmt.list_open, at):
        return content, [], at
    decoder = json.JSONDecoder()
    spans: list[tuple[int, int, str, Any]] = []
    pos = at + len(fmt.list_open)
    while True:
        start = pos
        if not text.startswith(fmt.call_open, pos):
            break
        try:
            obj, end = decoder.raw_decode(text, pos + len(fmt.call_open))
        except ValueError:
            break
        if not text.startswith(fmt.call_close, end) or not isinstance(obj, dict):
            break
        end += len(fmt.call_close)
        spans.append((start, end, obj["name"], obj[fmt.arguments_key]))
        if not text.startswith(fmt.separator, end) or text.startswith(fmt.list_close, end) and fmt.list_close:
            return content, spans, end
        pos = end + len(fmt.separator)
    return content, spans, spans[-1][1] if spans else at + len(fmt.list_open)


def _trigger_at(fmt: ToolFormat, text: str) -> int:
    """Where the calls open in ``text`` (-1: nowhere)."""
    return text.find(fmt.trigger) if fmt.text_first else (0 if text.startswith(fmt.trigger) else -1)
