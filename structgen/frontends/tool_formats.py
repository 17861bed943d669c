"""Model families' native tool-call formats, as data that becomes a structural tag.

A :class:`CallFormat` says how one family writes calls: the text before a call's arguments
(``call_begin``, with ``{name}``), the arguments' style (JSON, or XML parameters:
:mod:`structgen.frontends.xml_arguments`), the text after them, an optional section around all
the calls and the separator between calls, the string that opens calls in free text, and the
family's thinking markers. :func:`format_structural_tag` turns a format, the tools and the
``tool_choice`` into a structural tag (xgrammar's JSON format, the one xgrammar's
``get_model_structural_tag`` builds for the same names), which compiles like any other
(:mod:`structgen.frontends.structural_tag`); :func:`calls_of` reads an answer back into calls,
from the answer's segments.

The facts of each format come from the family's published chat template (kept under
``tests/fixtures/chat_templates/``, sources in its ``SOURCES.md``) and its serving parser; the
format's ``source`` names them. ``special_tokens`` lists the markers that are single special
tokens in the family's own vocabulary: on a tokenizer that has them (the family's), the grammar's
marker matches that token (:meth:`~structgen.engine.vocab.Vocabulary.with_markers`), which
forced text drafts as the model writes it; on one that lacks them (the default model's), the
marker is written as text.

Example
-------
>>> from structgen.frontends.tool_calls import read_tools
>>> tools = read_tools([{"type": "function", "function": {"name": "f", "parameters": {
...     "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}])
>>> spec = format_structural_tag(CALL_FORMATS["kimi"], tools, choice="required")
>>> spec["format"]["begin"], spec["format"]["content"]["tags"][0]["begin"]
('<|tool_calls_section_begin|>', '<|tool_call_begin|>functions.f:')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from structgen.errors import OptionError, ParseError, ToolSpecError
from structgen.frontends.tool_calls import ToolSpec, argument_json, open_free_objects, opened

__all__ = ["CallFormat", "CALL_FORMATS", "register_call_format", "format_structural_tag", "calls_of",
           "call_spans_of", "write_calls", "ending_at_eos"]


@dataclass(frozen=True)
class CallFormat:
    """How a model family writes tool calls (see the module notes)."""

    name: str
    #: the text before a call's arguments, with ``{name}`` (and ``{id}`` where the call's number
    #: comes before its name, as Cohere's ``<cofl:tool_call id="0" name="f">``)
    call_begin: str
    call_end: str
    #: "json", or an XML style of :data:`~structgen.frontends.xml_arguments.XML_STYLES`
    style: str = "json"
    #: (begin, end) around all the calls of an answer, or None
    section: tuple[str, str] | None = None
    separator: str = ""
    #: what opens the calls in free text (default: the section's begin, else ``call_begin``
    #: up to the name)
    trigger: str | None = None
    #: a regex written between ``call_begin`` and the arguments, then this text (Kimi's call
    #: index); where ``call_begin`` holds ``{id}``, the regex is written there (the text unused)
    call_id: tuple[str, str] | None = None
    #: the family's thinking markers, for ``reasoning=True`` where the template has none
    thinking: tuple[str, str] | None = None
    #: whether text may come before the calls (False: an answer is text or calls, as the
    #: serving parser reads only an answer that is all calls)
    text_first: bool = True
    #: what ends an answer without calls (Kimi-K3 closes its response and message blocks)
    text_end: str = ""
    #: the number of an answer's first call (``call_id``'s, when the format numbers calls)
    first_index: int = 0
    #: one call per answer (the end of sequence ends the call: :func:`ending_at_eos`)
    one_call: bool = False
    #: markers that are single special tokens in the family's vocabulary (documentation and the
    #: tests' family tokenizers; any tokenizer's special tokens are found by their text)
    special_tokens: tuple[str, ...] = ()
    #: where the facts come from
    source: str = ""

    def __post_init__(self) -> None:
        if "{name}" not in self.call_begin:
            raise OptionError(f"format {self.name!r}: call_begin must hold '{{name}}'")
        if "{id}" in self.call_begin and (self.call_id is None or
                                          self.call_begin.index("{id}") > self.call_begin.index("{name}")):
            raise OptionError(f"format {self.name!r}: '{{id}}' in call_begin needs call_id, and comes before '{{name}}'")

    @property
    def opens_with(self) -> str:
        """The trigger: the text that opens the calls."""
        if self.trigger is not None:
            return self.trigger
        return self.section[0] if self.section else self.call_begin.split("{name}")[0]

    def begin(self, name: str) -> str:
        return self.call_begin.replace("{name}", name)

    def tag_begin(self, name: str) -> tuple[str, str]:
        """(the tag's begin, the text after the call's number): a call's begin cut at ``{id}``,
        or whole before ``call_id``'s regex."""
        begin = self.begin(name)
        if "{id}" in begin:
            head, after = begin.split("{id}")
            return head, after
        return begin, self.call_id[1] if self.call_id is not None else ""

    def numbered(self, name: str, index: int) -> str:
        """A call's begin with its number written, as :func:`write_calls` writes the ``index``-th."""
        if self.call_id is None:
            return self.begin(name)
        head, after = self.tag_begin(name)
        return head + str(self.first_index + index) + after


_THINK = ("<think>", "</think>")
_DS_CALLS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")
#: special tokens of the families' vocabularies (ids in Qwen 3: 151657-8, 151667-8; DeepSeek V3: 128798-9,
#: 128806-128814), from their published tokenizer tables
_QWEN_TOKENS = ("<tool_call>", "</tool_call>", *_THINK)
_DS_TOKENS = (*_DS_CALLS, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", *_THINK)
_QWEN_XML = dict(call_begin="<tool_call>\n<function={name}>\n", call_end="\n</function>\n</tool_call>",
                 style="qwen_xml", separator="\n", trigger="<tool_call>\n<function=")


def _dsml(name: str, block: str, tag: str, style: str, source: str) -> CallFormat:
    """DeepSeek's DSML markup (V3.2, V4, V4.1): invokes of XML parameters inside one block."""
    return CallFormat(name, call_begin=f'<｜DSML｜{tag}invoke name="{{name}}">\n', call_end=f"\n</｜DSML｜{tag}invoke>",
                      style=style, section=(f"\n\n<｜DSML｜{block}>\n", f"\n</｜DSML｜{block}>"), separator="\n",
                      thinking=_THINK, special_tokens=("｜DSML｜", *_THINK), source=source)


CALL_FORMATS: dict[str, CallFormat] = {f.name: f for f in (
    CallFormat("qwen_3", call_begin='<tool_call>\n{"name": "{name}", "arguments": ', call_end="}\n</tool_call>",
               separator="\n", trigger="<tool_call>", thinking=_THINK, special_tokens=_QWEN_TOKENS,
               source="Qwen3 chat template (qwen3.jinja); vLLM hermes parser; xgrammar get_qwen_3_structural_tag"),
    CallFormat("qwen_3_5", **_QWEN_XML, thinking=_THINK, special_tokens=_QWEN_TOKENS,
               source="Qwen3.5 chat template (qwen3_5.jinja); vLLM qwen3_coder parser; xgrammar qwen_3_5"),
    CallFormat("qwen_3_coder", **_QWEN_XML, special_tokens=_QWEN_TOKENS[:2],
               source="Qwen3-Coder chat template (qwen3_coder.jinja); vLLM qwen3_coder parser"),
    CallFormat("kimi", call_begin="<|tool_call_begin|>functions.{name}:", call_end="<|tool_call_end|>",
               call_id=(r"[0-9]+", "<|tool_call_argument_begin|>"),
               section=("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"), thinking=_THINK,
               special_tokens=("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                               "<|tool_call_argument_begin|>", "<|tool_call_end|>", *_THINK),
               source="Kimi-K2 chat template (kimi_k2.jinja); vLLM kimi_k2 parser; xgrammar get_kimi_structural_tag"),
    CallFormat("deepseek_r1", call_begin="<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n",
               call_end="\n```<｜tool▁call▁end｜>", section=_DS_CALLS, separator="\n", thinking=_THINK,
               special_tokens=_DS_TOKENS,
               source="DeepSeek-R1 chat template (deepseek_r1.jinja); vLLM deepseek_v3 parser; xgrammar deepseek_r1"),
    CallFormat("deepseek_v3_1", call_begin="<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>", call_end="<｜tool▁call▁end｜>",
               section=_DS_CALLS, thinking=_THINK, special_tokens=_DS_TOKENS,
               source="DeepSeek-V3.1 chat template (deepseek_v3_1.jinja); vLLM deepseek_v31 parser; xgrammar"),
    _dsml("deepseek_v3_2", "function_calls", "", "deepseek_xml",
          "DeepSeek-V3.2 encoding_dsv32.py (as copied in xgrammar's tests); vLLM deepseek_v32 parser"),
    _dsml("deepseek_v4", "tool_calls", "", "deepseek_xml",
          "DeepSeek-V4 encoding_dsv4.py (as copied in xgrammar's tests); vLLM deepseek_v4 parser"),
    _dsml("deepseek_v4_1", " calls", " ", "deepseek_v4_1_xml", "SGLang encoding_dsv41.py (DeepSeek-V4.1)"),
    CallFormat("harmony", call_begin="<|start|>assistant to=functions.{name}<|channel|>commentary json<|message|>",
               call_end="<|call|>", trigger="<|start|>assistant to=functions.",
               thinking=("<|channel|>analysis<|message|>", "<|end|>"),
               special_tokens=("<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|call|>", "<|end|>"),
               source="gpt-oss chat template (gpt_oss.jinja); vLLM openai parser; xgrammar harmony"),
    CallFormat("minimax", call_begin='<invoke name="{name}">\n', call_end="</invoke>\n", style="minimax_xml",
               section=("<minimax:tool_call>\n", "</minimax:tool_call>"), thinking=_THINK,
               source="MiniMax-M2 chat template (minimax_m2.jinja); vLLM minimax_m2 parser; xgrammar minimax"),
    CallFormat("glm_4_7", call_begin="<tool_call>{name}", call_end="</tool_call>", style="glm_xml",
               trigger="<tool_call>", thinking=_THINK,
               special_tokens=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
                               *_THINK),
               source="GLM-4.7 chat template (glm_4_7.jinja); vLLM glm47 parser; xgrammar glm_4_7"),
    CallFormat("exaone", call_begin='<tool_call>{"name": "{name}", "arguments": ', call_end="}</tool_call>",
               separator="\n", trigger="<tool_call>", thinking=_THINK,
               source="EXAONE 4.0 chat template (exaone4.jinja, BFCL's copy); vLLM hermes parser; xgrammar exaone"),
    CallFormat("mistral", call_begin="[TOOL_CALLS]{name}[ARGS]", call_end="", trigger="[TOOL_CALLS]",
               special_tokens=("[TOOL_CALLS]", "[ARGS]"),
               source="Mistral Small 3.2 chat template (mistral_small_3_2.jinja) without call ids, as "
                      "mistral-common's tokenizer v13 writes; vLLM mistral parser"),
    CallFormat("kimi_k3", call_begin='<|open|>call tool="{name}" index="', call_end="<|close|>call<|sep|>",
               call_id=(r"[1-9][0-9]*", '"<|sep|>'), first_index=1, style="kimi_k3_xml",
               section=("<|close|>response<|sep|><|open|>tools<|sep|>", "<|close|>tools<|sep|><|close|>message<|sep|>"),
               text_end="<|close|>response<|sep|><|close|>message<|sep|>",
               thinking=("<|open|>think<|sep|>", "<|close|>think<|sep|><|open|>response<|sep|>"),
               special_tokens=("<|open|>", "<|close|>", "<|sep|>"),
               source="Kimi-K3 chat template (kimi_k3.jinja, thinking off: the prompt opens the response block); "
                      "vLLM kimi_k3 parser; xgrammar get_kimi_k3_structural_tag"),
    CallFormat("llama4_pythonic", call_begin="{name}(", call_end=")", style="pythonic", section=("[", "]"),
               separator=", ", text_first=False,
               source="vLLM's Llama 4 pythonic template (llama4_pythonic.jinja) and llama4_pythonic parser (a Python "
                      "list of calls with literal keyword arguments, the whole answer)"),
    CallFormat("cohere", call_begin='<cofl:tool_call id="{id}" name="{name}">', call_end="</cofl:tool_call>",
               call_id=(r"0|[1-9][0-9]*", ""), style="cohere_xml", section=("<cofl:tool_calls>", "</cofl:tool_calls>"),
               text_first=False, thinking=("<|START_THINKING|>", "<|END_THINKING|>"),
               special_tokens=("<|START_THINKING|>", "<|END_THINKING|>"),
               source="Cohere's CMD5 renderer (cohere-melody render_cmd5: a tool-calling turn's text is its plan, "
                      "in the thinking) and parser (PyFilter cmd5, nested cofl values); xgrammar get_cohere_structural_tag"),
    CallFormat("granite", call_begin='{"name": "{name}", "arguments": ', call_end="}", separator=", ",
               section=("<|tool_call|>[", "]"), special_tokens=("<|tool_call|>",),
               source="vLLM's Granite 3 template (granite.jinja) and granite parser (a JSON list after <|tool_call|>)"),
)}


def ending_at_eos(fmt: CallFormat, eos_texts: "set[str] | frozenset[str]") -> CallFormat:
    """``fmt`` for a tokenizer whose end-of-sequence tokens spell ``eos_texts``: where a call ends
    with one of them (gpt-oss ends a call with ``<|call|>``, an end of sequence in its generation
    config), the call is left open for that token to end it, and an answer holds one call.

    >>> ending_at_eos(CALL_FORMATS["harmony"], {"<|call|>"}).call_end
    ''
    """
    if fmt.call_end and fmt.call_end in eos_texts and fmt.section is None:
        from dataclasses import replace

        return replace(fmt, call_end="", one_call=True)
    return fmt


def register_call_format(fmt: CallFormat) -> None:
    """Add a format (or replace one of the same name) for ``Generator.tool_calls(format=...)``.

    >>> register_call_format(CallFormat("mine", call_begin="<call {name}>", call_end="</call>"))
    >>> CALL_FORMATS["mine"].opens_with
    '<call '
    >>> del CALL_FORMATS["mine"]
    """
    if not isinstance(fmt, CallFormat):
        raise OptionError(f"register_call_format takes a CallFormat, not {type(fmt).__name__}")
    CALL_FORMATS[fmt.name] = fmt


def _tag(fmt: CallFormat, spec: ToolSpec) -> dict[str, Any]:
    if spec.custom is not None:
        return {"type": "tag", "begin": fmt.begin(spec.name), "content": _custom_input(fmt, spec),
                "end": fmt.call_end}
    schema = open_free_objects(spec.parameters)
    arguments: dict[str, Any] = {"type": "json_schema", "json_schema": schema if spec.strict else opened(schema)}
    if fmt.style != "json":
        arguments["style"] = fmt.style
    content = arguments
    begin, after_id = fmt.tag_begin(spec.name)
    if fmt.call_id is not None:
        content = {"type": "sequence", "elements": [{"type": "regex", "pattern": fmt.call_id[0]},
                                                    {"type": "const_string", "value": after_id}, arguments]}
    return {"type": "tag", "begin": begin, "content": content, "end": fmt.call_end}


def _custom_input(fmt: CallFormat, spec: ToolSpec) -> dict[str, Any]:
    """The content of a custom tool's call: its input raw, under its grammar (or free)."""
    if fmt.style != "json" or fmt.call_begin.rstrip().endswith(":") or fmt.call_id is not None:
        raise ToolSpecError(f"custom tools are written raw, and format {fmt.name!r} writes a call's arguments as "
                            "JSON or XML parameters; use a format whose call body is free (e.g. 'harmony', "
                            "'deepseek_v3_1', 'mistral')", tool=spec.name, pointer=f"/{spec.index}")
    kind, definition = spec.custom or ("text", "")
    if kind == "lark":
        return {"type": "grammar", "grammar": definition}
    if kind == "regex":
        return {"type": "regex", "pattern": definition}
    return {"type": "any_text"}


def format_structural_tag(fmt: CallFormat, specs: list[ToolSpec], *, choice: str = "auto",
                          names: tuple[str, ...] | None = None, parallel: bool = True) -> dict[str, Any]:
    """The structural tag of an answer in ``fmt`` calling the tools in ``names`` (default: all).

    ``choice``: ``"required"`` (calls from the first byte), ``"auto"`` (free text that never
    holds the trigger, then calls; or calls alone), ``"none"`` (free text only). ``parallel``:
    one or more calls (False: exactly one).
    """
    tags = [_tag(fmt, s) for s in specs if names is None or s.name in names]
    parallel = parallel and not fmt.one_call
    if fmt.text_end:  # text, then the format's end of a text answer, or the calls' section
        text = {"type": "any_text", "excludes": [fmt.text_end, fmt.opens_with]}
        end: dict[str, Any] = {"type": "const_string", "value": fmt.text_end}
        if choice == "none" or not tags:
            return {"type": "structural_tag", "format": {"type": "sequence", "elements": [text, end]}}
        calls = _calls(fmt, tags, parallel)
        if choice == "required":
            return {"type": "structural_tag", "format": calls}
        return {"type": "structural_tag", "format": {"type": "sequence", "elements": [
            text, {"type": "or", "elements": [calls, end]}]}}
    if choice == "none" or not tags:
        return {"type": "structural_tag", "format": {"type": "any_text"}}
    calls = _calls(fmt, tags, parallel)
    if choice == "required":
        return {"type": "structural_tag", "format": calls}
    if not fmt.text_first:  # text, or calls alone
        text = {"type": "any_text", "excludes": [fmt.opens_with]}
        return {"type": "structural_tag", "format": {"type": "or", "elements": [calls, text]}}
    if calls["type"] == "tag":  # the section is the one triggered tag
        trigger = fmt.opens_with
        body = {"type": "triggered_tags", "triggers": [trigger], "tags": [calls], "stop_after_first": True}
    else:  # free text, then the calls; between and after them nothing but the separators
        body = {"type": "sequence", "elements": [
            {"type": "any_text", "excludes": [fmt.opens_with]}, {"type": "optional", "content": calls}]}
    return {"type": "structural_tag", "format": body}


def _calls(fmt: CallFormat, tags: list[dict[str, Any]], parallel: bool) -> dict[str, Any]:
    """One or more calls (exactly one unless ``parallel``), in the format's section if it has one."""
    calls: dict[str, Any] = {"type": "tags_with_separator", "tags": tags, "separator": fmt.separator,
                             "at_least_one": True, "stop_after_first": not parallel}
    if fmt.section is not None:
        calls = {"type": "tag", "begin": fmt.section[0], "content": calls, "end": fmt.section[1]}
    return calls


def calls_of(fmt: CallFormat, segments: list[Any]) -> tuple[str | None, list[tuple[str, Any]]]:
    """(text before the calls or None, [(name, arguments)]) from an answer's segments
    (:func:`structgen.tasks.segments.segments_of` on :func:`format_structural_tag`'s tag)."""
    spans = call_spans_of(fmt, segments)
    first = spans[0][0] if spans else None
    text = [seg.text for seg in segments if seg.kind == "any_text" and (first is None or seg.end <= first)]
    return "".join(text).strip() or None, [(name, args) for _, _, name, args in spans]


def call_spans_of(fmt: CallFormat, segments: list[Any]) -> list[tuple[int, int, str, Any]]:
    """Each call of an answer's segments: (start, end, name, arguments), in characters."""
    numbered_first = "{id}" in fmt.call_begin  # the name comes after the number, in a const of the content
    shared_begin, named = fmt.call_begin.split("{id}") if numbered_first else ("", fmt.call_begin)
    head, tail = named.split("{name}")
    spans: list[tuple[int, int, str, Any]] = []
    start, name, call = 0, None, None
    for seg in segments:
        begin = seg.tag
        if begin is None:
            continue
        if numbered_first:
            if begin != shared_begin:
                continue
            if seg.pointer.endswith("/begin"):
                name = None
            elif seg.kind == "const_string" and seg.text.startswith(head) and seg.text.endswith(tail):
                name = seg.text[len(head):len(seg.text) - len(tail)]
        elif begin.startswith(head) and begin.endswith(tail):
            name = begin[len(head):len(begin) - len(tail)]
        elif seg.kind == "json_schema":
            raise ParseError(f"a call's arguments sit in {begin!r}, not a call of format {fmt.name!r}")
        else:
            continue
        if seg.pointer.endswith("/begin"):
            start, call = seg.start, None
        elif seg.kind == "json_schema" or (seg.kind in ("grammar", "regex", "any_text")
                                           and seg.pointer.endswith("/content")):
            if name is None:
                raise ParseError(f"a call of format {fmt.name!r} has no name before its arguments")
            call = (name, seg.value)
        elif seg.pointer.endswith("/end") and call is not None:
            spans.append((start, seg.end, *call))
            call = None
    return spans


def write_calls(fmt: CallFormat, calls: list[tuple[str, Any]]) -> str:
    """``calls`` ((name, arguments) pairs) written in ``fmt``, as its grammar spells them.

    >>> write_calls(CALL_FORMATS["glm_4_7"], [("f", {"city": "Paris", "days": 3})])
    '<tool_call>f<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>'
    """
    from structgen.frontends.xml_arguments import XML_STYLES, write_xml_arguments

    parts = []
    for k, (name, args) in enumerate(calls):
        if isinstance(args, str):  # a custom tool's raw input
            body = args
        elif fmt.style == "json":
            body = argument_json(args)
        elif XML_STYLES[fmt.style].quoted:
            body = ", ".join(f"{key}={argument_json(value, python=True)}" for key, value in args.items())
        else:
            body = write_xml_arguments(fmt.style, args, argument_json)
        parts.append(fmt.numbered(name, k) + body + fmt.call_end)
    text = fmt.separator.join(parts)
    if not parts:
        return fmt.text_end
    return fmt.section[0] + text + fmt.section[1] if fmt.section else text


