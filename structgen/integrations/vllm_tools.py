"""OpenAI ``tools`` on ``vllm serve`` through structgen: a tool parser plugin for vLLM.

With this parser, a plain OpenAI request (``tools=[...]``, ``tool_choice="required"``, ``"auto"``
or a named function) is decoded under structgen's tool-call grammar: the parser hands the request's
tools to :class:`~structgen.integrations.vllm.StructgenLogitsProcessor` (``vllm_xargs``), so names
and arguments are exact, and reads the calls back into ``message.tool_calls``. The call format
is the chat template's own when it shows tools (Hermes, Llama 3), else structgen's ``"json"``
format (:mod:`structgen.frontends.tool_calls`)::

    vllm serve MODEL_DIR \\
        --logits-processors structgen.integrations.vllm:StructgenLogitsProcessor \\
        --enable-auto-tool-choice --tool-call-parser structgen \\
        --tool-parser-plugin "$(python -c 'import structgen.integrations.vllm_tools as m; print(m.__file__)')"

Streamed (``stream=True``), text before the calls arrives as it is written and each call arrives
whole, name and arguments in one chunk, once the grammar has closed it.
"""

from __future__ import annotations

import json
from typing import Any

from vllm.entrypoints.generate.base.protocol import (DeltaFunctionCall, DeltaMessage, DeltaToolCall,
                                                     ExtractedToolCallInformation, FunctionCall, ToolCall)
from vllm.renderers.chat_utils import make_tool_call_id
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager

from structgen.frontends.tool_calls import FORMATS, parse_calls
from structgen.integrations.vllm import EXTRA_ARG
from structgen.tasks.tool_calls import template_format

__all__ = ["StructgenToolParser", "PARSER_NAME"]

#: What ``--tool-call-parser`` takes.
PARSER_NAME = "structgen"


@ToolParserManager.register_module(PARSER_NAME)
class StructgenToolParser(ToolParser):
    """Tool calls decoded under structgen's grammar, parsed back into OpenAI ``tool_calls``."""

    # vLLM must not force its own JSON tool-call format on "required" or a named tool: structgen
    # masks those, and this parser reads them.
    supports_required_and_named = False

    def __init__(self, tokenizer: Any, tools: Any = None, **_: Any) -> None:
        super().__init__(tokenizer, tools)
        own = template_format(tokenizer)
        self.format = own if own is not None else FORMATS["json"]
        self._content_sent = 0  # streaming: characters of text before the calls already sent

    def adjust_request(self, request: Any) -> Any:
        """Carry the request's tools to the logits processor (unless it names a structgen
        constraint itself)."""
        if not request.tools or request.tool_choice == "none":
            return request
        xargs = dict(getattr(request, "vllm_xargs", None) or {})
        if EXTRA_ARG in xargs:
            return request
        choice = request.tool_choice
        if hasattr(choice, "model_dump"):
            choice = choice.model_dump(exclude_none=True)
        xargs[EXTRA_ARG] = json.dumps({
            "tools": [t.model_dump(exclude_none=True) for t in request.tools],
            "tool_choice": choice if choice is not None else "auto",
            "parallel_tool_calls": request.parallel_tool_calls is not False,
            "format": self.format.name})
        request.vllm_xargs = xargs
        return request

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        try:
            content, calls = parse_calls(self.format, model_output)
        except (ValueError, KeyError):  # a run cut at max_tokens: no complete call to read
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output)
        tool_calls = [ToolCall(type="function", function=FunctionCall(
            name=name, arguments=json.dumps(arguments, ensure_ascii=False))) for name, arguments in calls]
        return ExtractedToolCallInformation(tools_called=bool(tool_calls), tool_calls=tool_calls,
                                            content=content or None)

    def extract_tool_calls_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                     previous_token_ids: Any, current_token_ids: Any, delta_token_ids: Any,
                                     request: Any) -> DeltaMessage | None:
        trigger = self.format.trigger
        at = current_text.find(trigger)
        text = current_text if at < 0 else current_text[:at]
        if at < 0:  # hold back an end that may be the start of the trigger
            text = text[:len(text) - _overlap(text, trigger)]
        delta = DeltaMessage()
        if len(text) > self._content_sent:
            delta.content = text[self._content_sent:]
            self._content_sent = len(text)
        if at >= 0:
            try:
                _, calls = parse_calls(self.format, current_text)
            except (ValueError, KeyError):  # the calls are not closed yet
                calls = []
            for index in range(len(self.prev_tool_call_arr), len(calls)):
                name, arguments = calls[index]
                arguments_text = json.dumps(arguments, ensure_ascii=False)
                # what vLLM reads back at the end (get_remaining_unstreamed_args): all of it was sent
                self.prev_tool_call_arr.append({"name": name, "arguments": arguments})
                self.streamed_args_for_tool.append(arguments_text)
                delta.tool_calls.append(DeltaToolCall(index=index, id=make_tool_call_id(), type="function",
                                                      function=DeltaFunctionCall(name=name, arguments=arguments_text)))
        return delta if delta.content or delta.tool_calls else None


def _overlap(text: str, trigger: str) -> int:
    """Length of the longest end of ``text`` that begins ``trigger``."""
    for n in range(min(len(text), len(trigger) - 1), 0, -1):
        if trigger.startswith(text[-n:]):
            return n
    return 0
