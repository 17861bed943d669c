"""Tool calls on a model: the prompt (tools, earlier calls and results), decoding, the message.

The call format comes from the tokenizer's chat template when it has a known one (its source
shows ``<tool_call>``: Hermes/Qwen; ``"parameters": `` and ``ipython``: Llama 3) and it renders
``tools=``; then the template shows the tools, earlier calls and results itself. A template
without tools (SmolLM2's ignores ``tools=`` and fails on ``content: None``) gets the ``"json"``
format, and structgen renders the tool list into the system turn, earlier calls as text in the
assistant turn and results as a user turn, then applies the template to those plain messages.

Example
-------
>>> from structgen import Generator                                         # doctest: +SKIP
>>> tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
...     "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
>>> r = Generator().tool_calls(tools, [{"role": "user", "content": "Weather in Paris?"}],
...                            tool_choice="required")                       # doctest: +SKIP
>>> r.message["tool_calls"][0]["function"]                                   # doctest: +SKIP
{'name': 'get_weather', 'arguments': '{"city": "Paris"}'}
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, replace
from typing import Any

from structgen.decoding.config import DecodeConfig
from structgen.errors import DecodingError, IncompleteGenerationError, MessagesError, OptionError, shown
from structgen.frontends.structural_tag import read_structural_tag
from structgen.frontends.tool_calls import (FORMATS, ToolFormat, ToolSpec, call_spans, call_text, parse_calls,
                                            read_tool_choice, read_tools, tool_call_grammar)
from structgen.frontends.tool_formats import (CALL_FORMATS, CallFormat, call_spans_of, calls_of, ending_at_eos,
                                             format_structural_tag, write_calls)
from structgen.tasks.chat import content_text, thinking_switches
from structgen.tasks.context import ModelContext
from structgen.tasks.jobs import Decode, Job, run_job
from structgen.tasks.results import Result
from structgen.tasks.segments import segments_of

__all__ = ["ToolCallResult", "MessagesError", "generate_tool_calls_with", "read_format", "template_format",
           "tool_calls_job", "tool_prompt"]

_ROLES = ("system", "user", "assistant", "tool")




@dataclass(kw_only=True)
class ToolCallResult(Result):
    """One assistant turn: ``message`` is the OpenAI-style assistant message.

    ``message`` is ``{"role": "assistant", "content": str | None, "tool_calls": [...]}``, each
    call ``{"id", "type": "function", "function": {"name", "arguments": <JSON text>}}``;
    ``tool_calls`` is absent when the answer is text only. ``text`` is the raw output in
    ``format``; ``finish_reason`` and ``stats`` as in :class:`~structgen.JsonResult`, plus
    ``"repeated_call"``: the model began a call identical to an earlier one, and the answer was
    ended before it (see ``stop_repeated_calls``); ``stats`` count the passes spent on it too.
    """

    message: dict[str, Any]
    format: str
    #: how the prompt was made: "template" (the chat template showed the tools) or "structgen"
    rendered_by: str


def template_format(tokenizer: Any) -> ToolFormat | None:
    """The format the tokenizer's chat template writes calls in, if it renders ``tools=``.

    The template's source must carry the format's markers, and rendering one message with a
    tool must differ from rendering it without (SmolLM2's template ignores ``tools``).
    """
    source = getattr(tokenizer, "chat_template", None)
    if not isinstance(source, str):
        return None
    for fmt in FORMATS.values():
        if fmt.template_markers and all(m in source for m in fmt.template_markers):
            return fmt if _shows_tools(tokenizer) else None
    return None


#: names the formats answer to besides their own
ALIASES = {"llama": "llama3"}


def read_format(format: "str | ToolFormat | CallFormat | None") -> "ToolFormat | CallFormat | None":
    """The format a ``format`` option names: a :class:`ToolFormat` of ``FORMATS`` (``hermes``,
    ``llama3`` or ``llama``, ``json``), a native :class:`~structgen.frontends.tool_formats.CallFormat`
    of ``CALL_FORMATS`` (``qwen_3``, ``kimi``, ``deepseek_r1``, ``harmony``, ...), or a format
    object; ``None`` stays ``None`` (the caller's default: the template's format, else ``"json"``).

    >>> read_format("hermes").name, read_format("llama").name, read_format("kimi").name, read_format(None)
    ('hermes', 'llama3', 'kimi', None)
    """
    known = sorted({*FORMATS, *ALIASES, *CALL_FORMATS})
    if isinstance(format, str):
        format = ALIASES.get(format, format)
        if format in FORMATS:
            return FORMATS[format]
        if format in CALL_FORMATS:
            return CALL_FORMATS[format]
        raise OptionError(f"unknown tool-call format {format!r}; known: {known}")
    if not (format is None or isinstance(format, (ToolFormat, CallFormat))):
        raise OptionError(f"format must be a name from {known}, a ToolFormat, a CallFormat or None, "
                          f"not {type(format).__name__} ({format!r:.80})")
    return format


def tool_prompt(tokenizer: Any, specs: list[ToolSpec], messages: Any,
                fmt: "ToolFormat | CallFormat | None" = None, *, thinking: bool = False) -> tuple[str, Any, str]:
    """(prompt text, format, "template" or "structgen") for ``messages`` with the tools shown.

    ``fmt=None`` takes the template's own format when it has one (:func:`template_format`),
    else ``"json"``. A given format that is the template's is rendered by the template too; a
    native format (:class:`~structgen.frontends.tool_formats.CallFormat`, named for the model's
    family) is rendered by the template when it shows tools. ``thinking`` sets the template's
    reasoning switch (:func:`~structgen.tasks.chat.thinking_switches`).
    """
    checked = _checked_messages(messages)
    own = template_format(tokenizer)
    if fmt is None:
        fmt = own or FORMATS["json"]
    if isinstance(fmt, CallFormat):
        if _shows_tools(tokenizer):
            try:
                return _template_text(tokenizer, specs, checked, thinking), fmt, "template"
            except Exception:  # noqa: BLE001 - a template that refuses this history: structgen renders it
                pass
        return _rendered(tokenizer, specs, checked, _native_shown(fmt), thinking), fmt, "structgen"
    if own is not None and own == fmt:
        try:
            return _template_text(tokenizer, specs, checked, thinking), fmt, "template"
        except Exception:  # noqa: BLE001 - e.g. Llama 3.1's template refuses two calls in one turn
            pass
    return _rendered(tokenizer, specs, checked, fmt, thinking), fmt, "structgen"


def _shows_tools(tokenizer: Any) -> bool:
    """Whether the chat template renders ``tools=`` (a tool's name shows in the prompt)."""
    if not isinstance(getattr(tokenizer, "chat_template", None), str):
        return False
    probe = [{"role": "user", "content": "?"}]  # one message with a tool: a template ignoring tools= shows no name
    tool = {"type": "function", "function": {"name": "probe_tool", "description": "",
                                             "parameters": {"type": "object", "properties": {}}}}
    try:
        return "probe_tool" in tokenizer.apply_chat_template(probe, tools=[tool], tokenize=False)
    except Exception:  # noqa: BLE001 - a template that cannot show tools
        return False


def _template_text(tokenizer: Any, specs: list[ToolSpec], checked: list[dict[str, Any]],
                   thinking: bool = False) -> str:
    shaped = [_template_shape(m) for m in checked]
    return tokenizer.apply_chat_template(shaped, tools=[_openai_tool(s) for s in specs], add_generation_prompt=True,
                                         tokenize=False, **thinking_switches(thinking))


def _native_shown(fmt: CallFormat) -> ToolFormat:
    """A stand-in :class:`ToolFormat` that shows tools, calls and results to a model whose
    template has no tools, for a native format: the system text gives an example call in it."""
    example = write_calls(fmt, [("function_name", {"argument": "value"})])
    prompt = ("You may call one or more functions to assist with the user query. The functions, in JSON:\n"
              "<tools>\n{tools}\n</tools>\n\nTo call a function, write exactly:\n"
              + example.replace("{", "{{").replace("}", "}}") + "\nIf none of the functions fits, answer in plain text.")
    return ToolFormat(f"{fmt.name}-shown", call_open="", call_close="", separator="", trigger="{",
                      system_prompt=prompt, result_text="The function {name} returned: {content}",
                      writer=lambda calls: write_calls(fmt, calls))


def _checked_messages(messages: Any) -> list[dict[str, Any]]:
    """The messages, checked: roles, contents, assistant calls (arguments parsed to dicts) and
    tool results (their tool's name found from ``tool_call_id`` when not given)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise MessagesError("messages must be a non-empty list of {'role', 'content'} dicts")
    names: dict[str, str] = {}
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            raise MessagesError(f"message {i}: needs a role among {_ROLES}, got {shown(m)}")
        role, content = m["role"], m.get("content")
        content = content_text(content, i)
        calls = []
        listed = m.get("tool_calls") or []
        if not isinstance(listed, (list, tuple)):
            raise MessagesError(f"message {i}: tool_calls must be a list, not {type(listed).__name__}")
        for k, call in enumerate(listed):
            fn = call.get("function") if isinstance(call, dict) else None
            if role != "assistant" or not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise MessagesError(f"message {i}: tool_calls[{k}] must be an assistant's "
                                    '{"type": "function", "function": {"name", "arguments"}}')
            args = fn.get("arguments", "{}")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except RecursionError as err:
                    raise MessagesError(f"message {i}: tool_calls[{k}] arguments nest too deeply to read") from err
                except ValueError as err:  # not JSON, or an integer past Python's 4,300 digits
                    raise MessagesError(f"message {i}: tool_calls[{k}] arguments are not JSON: {err}") from err
            if not isinstance(args, dict):  # None, a list, a number: no call's arguments
                raise MessagesError(f"message {i}: tool_calls[{k}] arguments must be a JSON object (or its "
                                    f"text), not {type(args).__name__}")
            try:  # a dict given as Python data: it is written back as JSON into the prompt
                json.dumps(args)
            except (TypeError, ValueError, RecursionError) as err:
                raise MessagesError(f"message {i}: tool_calls[{k}] arguments are not JSON data: {err}") from err
            call_id = call.get("id") or f"call_{i}_{k}"
            if not isinstance(call_id, str):
                raise MessagesError(f"message {i}: tool_calls[{k}] id must be a string, not {type(call_id).__name__}")
            names[call_id] = fn["name"]
            calls.append({"id": call_id, "name": fn["name"], "arguments": args})
        item: dict[str, Any] = {"role": role, "content": content}
        if calls:
            item["tool_calls"] = calls
        if role == "tool":
            if not isinstance(m.get("tool_call_id", ""), str) or not isinstance(m.get("name", ""), str):
                raise MessagesError(f"message {i}: a tool result's tool_call_id and name must be strings")
            name = m.get("name") or names.get(m.get("tool_call_id", ""))
            if name is None:
                raise MessagesError(f"message {i}: a tool result needs the tool_call_id of an earlier "
                                    "call (or a name)")
            item.update(name=name, tool_call_id=m.get("tool_call_id", ""))
        elif content is None and not calls:
            raise MessagesError(f"message {i}: no content")
        out.append(item)
    return out


def _template_shape(m: dict[str, Any]) -> dict[str, Any]:
    """A message as Hugging Face chat templates take it (calls with dict arguments)."""
    out = {"role": m["role"], "content": m["content"] or ""}
    if "tool_calls" in m:
        out["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["name"], "arguments": c["arguments"]}}
                             for c in m["tool_calls"]]
    if m["role"] == "tool":
        out.update(name=m["name"], tool_call_id=m["tool_call_id"])
    return out


def _openai_tool(spec: ToolSpec) -> dict[str, Any]:
    return spec.openai()


def _rendered(tokenizer: Any, specs: list[ToolSpec], messages: list[dict[str, Any]], fmt: ToolFormat,
              thinking: bool = False) -> str:
    """The prompt with tools, calls and results written as text, for templates without tools."""
    listing = "\n".join(json.dumps(_openai_tool(s), ensure_ascii=False) for s in specs)
    system = fmt.system_prompt.format(tools=listing)
    plain: list[dict[str, str]] = []
    for m in messages:
        if m["role"] == "system":
            system = m["content"] + "\n\n" + system
        elif m["role"] == "tool":
            content = m["content"] or ""
            shown = fmt.result_text.format(name=m["name"], content=content,
                                           content_json=json.dumps(content, ensure_ascii=False))
            if plain and plain[-1].get("tool_results"):
                plain[-1]["content"] += "\n" + shown
            else:
                plain.append({"role": "user", "content": shown, "tool_results": "1"})
        elif "tool_calls" in m:
            pairs = [(c["name"], c["arguments"]) for c in m["tool_calls"]]
            calls = fmt.writer(pairs) if fmt.writer is not None else call_text(fmt, pairs)
            plain.append({"role": "assistant", "content": (m["content"] + "\n" if m["content"] else "") + calls})
        else:
            plain.append({"role": m["role"], "content": m["content"] or ""})
    chat = [{"role": "system", "content": system}] + [{"role": p["role"], "content": p["content"]} for p in plain]
    if not getattr(tokenizer, "chat_template", None):
        return "".join(f"{p['role']}: {p['content']}\n" for p in chat) + "assistant: "
    return tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False,
                                         **thinking_switches(thinking))


def generate_tool_calls_with(context: ModelContext, tools: Any, messages: Any, config: DecodeConfig, *,
                             tool_choice: Any = "auto", parallel_tool_calls: bool = True,
                             format: "str | ToolFormat | None" = None, strict: bool = True,
                             stop_repeated_calls: bool = True) -> ToolCallResult:
    """:meth:`structgen.Generator.tool_calls` on ``context`` (see there)."""
    return run_job(context, tool_calls_job(context, tools, messages, config, tool_choice=tool_choice,
                                           parallel_tool_calls=parallel_tool_calls, format=format, strict=strict,
                                           stop_repeated_calls=stop_repeated_calls))


def tool_calls_job(context: ModelContext, tools: Any, messages: Any, config: DecodeConfig, *,
                   tool_choice: Any = "auto", parallel_tool_calls: bool = True,
                   format: "str | ToolFormat | None" = None, strict: bool = True,
                   stop_repeated_calls: bool = True) -> Job[ToolCallResult]:
    """:func:`generate_tool_calls_with` as a job (:mod:`structgen.tasks.jobs`), to run in a batch."""
    specs = read_tools(tools)
    mode, names = read_tool_choice(tool_choice, specs)
    fmt = read_format(format)
    if config.reasoning is True and isinstance(fmt, CallFormat) and fmt.thinking is not None:
        config = replace(config, reasoning=fmt.thinking)  # the format's family's markers
    prompt, fmt, rendered_by = tool_prompt(context.tokenizer, specs, messages, fmt,
                                           thinking=bool(config.reasoning))
    ids = context.encode(prompt)
    context.check_fits(ids, config)  # 500 tools make a prompt longer than many contexts
    if isinstance(fmt, CallFormat):
        return (yield from _native_job(context, specs, fmt, ids, config, mode=mode, names=names,
                                       parallel=parallel_tool_calls, strict=strict, rendered_by=rendered_by,
                                       stop_repeated_calls=stop_repeated_calls))
    grammar = tool_call_grammar(specs, fmt, choice=mode, names=names, parallel=parallel_tool_calls,
                                strict=strict)
    compiled = context.compiler.marked(context.vocabulary.markers_in(fmt.markup)).grammar(grammar, source=tools)
    try:
        tokens, finish, stats = yield Decode(compiled.matcher(), ids, config)
    except IncompleteGenerationError as err:
        if not stop_repeated_calls:
            raise
        cut = _without_repeats(context, compiled, fmt, err.token_ids)
        if cut is None:
            raise
        tokens, finish, stats = cut, "repeated_call", err.stats
    else:
        cut = _without_repeats(context, compiled, fmt, tokens) if stop_repeated_calls else None
        if cut is not None:
            tokens, finish = cut, "repeated_call"
    text = compiled.vocabulary.text_bytes(tokens).decode("utf-8")
    try:
        content, calls = parse_calls(fmt, text)
    except (ValueError, KeyError) as err:
        raise DecodingError(f"internal error: the answer does not parse as {fmt.name} calls ({err}): {text!r}") from err
    return ToolCallResult(text=text, token_ids=tokens, finish_reason=finish, stats=stats,
                          message=_message(specs, content, calls, text), format=fmt.name, rendered_by=rendered_by)


def _native_job(context: ModelContext, specs: list[ToolSpec], fmt: CallFormat, ids: list[int], config: DecodeConfig, *,
                mode: str, names: tuple[str, ...], parallel: bool, strict: bool, rendered_by: str,
                stop_repeated_calls: bool) -> Job[ToolCallResult]:
    """Calls in a native format: its structural tag compiled, decoded, read back from the segments."""
    if not isinstance(parallel, bool):
        raise OptionError(f"parallel_tool_calls must be True or False, not {parallel!r:.40}")
    fmt = ending_at_eos(fmt, context.vocabulary.eos_texts)
    spec = format_structural_tag(fmt, specs, choice=mode, names=names, parallel=parallel)
    compiled = context.compiler.structural_tag(spec, whitespace="spaced", strict=strict, canonical=True)
    close = fmt.section[1] if fmt.section else ""
    tokens, finish, stats = yield Decode(compiled.matcher(), ids, config)
    if stop_repeated_calls:
        spans = _native_spans(fmt, spec, compiled.vocabulary.text_bytes(tokens).decode("utf-8", "ignore"))
        cut = _cut_before_repeat(context, compiled, tokens, spans, close)
        if cut is not None:
            tokens, finish = cut, "repeated_call"
    text = compiled.vocabulary.text_bytes(tokens).decode("utf-8")
    try:
        content, calls = calls_of(fmt, segments_of(read_structural_tag(spec), text))
    except (ValueError, KeyError) as err:
        raise DecodingError(f"internal error: the answer does not parse as {fmt.name} calls ({err}): {text!r}") from err
    return ToolCallResult(text=text, token_ids=tokens, finish_reason=finish, stats=stats,
                          message=_message(specs, content, calls, text), format=fmt.name, rendered_by=rendered_by)


def _message(specs: list[ToolSpec], content: str | None, calls: list[tuple[str, Any]], text: str) -> dict[str, Any]:
    """The OpenAI assistant message of an answer's text and calls (arguments checked again)."""
    by_name = {s.name: s for s in specs}
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = []
        for name, args in calls:
            if isinstance(args, str):  # a custom tool's raw input
                message["tool_calls"].append({"id": "call_" + secrets.token_hex(12), "type": "custom",
                                              "custom": {"name": name, "input": args}})
                continue
            _check_arguments(by_name[name], args, text)
            message["tool_calls"].append({
                "id": "call_" + secrets.token_hex(12), "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}})
    return message


def _without_repeats(context: ModelContext, compiled: Any, fmt: ToolFormat, tokens: list[int]) -> list[int] | None:
    """The answer ended before its first repeated call, or None when no call repeats.

    A small model, allowed parallel calls, tends to write the same call again and again until
    the budget runs out. A call identical to an earlier one (name and arguments) is never
    useful, so the answer ends after the call before it: the tokens up to there are kept and
    the rest of that call plus the list's close are written canonically, checked by the grammar.
    """
    data = compiled.vocabulary.token_bytes(tokens)
    text = data.decode("utf-8", errors="ignore")
    _, spans, _ = call_spans(fmt, text)
    return _cut_before_repeat(context, compiled, tokens, spans, fmt.list_close)


def _native_spans(fmt: CallFormat, spec: Any, text: str) -> list[tuple[int, int, str, Any]]:
    """The calls of a native-format answer: (start, end, name, arguments) in characters."""
    return call_spans_of(fmt, segments_of(read_structural_tag(spec), text))


def _cut_before_repeat(context: ModelContext, compiled: Any, tokens: list[int],
                       spans: list[tuple[int, int, str, Any]], close: str) -> list[int] | None:
    """``tokens`` ended after the call before the first repeated one (``spans``: each call's
    start and end in characters, name and arguments), ``close`` written after it; None when no
    call repeats or the ending does not fit the grammar."""
    vocab = compiled.vocabulary  # a format's special-token markers spell their text there
    data = vocab.token_bytes(tokens)
    text = data.decode("utf-8", errors="ignore")
    seen: set[tuple[str, str]] = set()
    for k, (_, _, name, args) in enumerate(spans):
        key = (name, json.dumps(args, sort_keys=True))
        if key in seen:
            break
        seen.add(key)
    else:
        return None
    end = len(text[:spans[k - 1][1]].encode())
    keep, length = [], 0
    for t in tokens:
        size = len(vocab.token_bytes([t]))
        if length + size > end:
            break
        keep.append(t)
        length += size
    tail = data[length:end] + close.encode()
    try:
        ended = keep + list(context.tokenizer.encode(tail.decode("utf-8"), add_special_tokens=False))
    except UnicodeDecodeError:  # the kept tokens end inside a character
        return None
    m = compiled.matcher()
    if not (all(m.advance(t) for t in ended) and m.can_end()):
        return None  # the tail's tokens do not fit: keep the model's own answer
    return ended


def _check_arguments(spec: ToolSpec, args: Any, text: str) -> None:
    """The grammar guarantees valid arguments; check anyway, as :meth:`Generator.json` does."""
    from jsonschema import Draft202012Validator

    error = next(iter(Draft202012Validator(spec.parameters).iter_errors(args)), None)
    if error is not None:
        raise DecodingError(f"internal error: arguments of {spec.name} do not validate ({error.message}): {text!r}")
