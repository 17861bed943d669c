"""Prompts as chat messages: a prompt string or OpenAI-style ``system``/``user``/``assistant``
messages, checked, and the instruction a task adds to the user's last turn.

Example
-------
>>> chat_messages("Name a colour.")
[{'role': 'user', 'content': 'Name a colour.'}]
>>> with_instruction([{"role": "system", "content": "Be brief."},
...                   {"role": "user", "content": "Name a colour."}], "Answer in JSON.")[-1]
{'role': 'user', 'content': 'Name a colour.\\n\\nAnswer in JSON.'}
"""

from __future__ import annotations

from typing import Any, Sequence

from structgen.errors import MessagesError, shown

__all__ = ["CHAT_ROLES", "Prompt", "chat_messages", "content_text", "thinking_switches", "utf8_size", "with_instruction"]

#: The roles a plain chat prompt may hold (tool results belong to :mod:`structgen.tasks.tool_calls`).
CHAT_ROLES = ("system", "user", "assistant")

#: What the tasks take as a prompt: the user's text, or a conversation.
Prompt = "str | Sequence[dict[str, Any]]"


def chat_messages(prompt: Any) -> list[dict[str, str]]:
    """``prompt`` as checked messages ``[{"role", "content"}]``: a string is one user turn; a
    list of OpenAI-style messages keeps its turns (content text, or a list of parts whose
    ``text`` parts are joined).

    Raises
    ------
    MessagesError
        Not a string or a non-empty list of messages; a role outside :data:`CHAT_ROLES`; a
        message without text. The message says which one, by index.
    """
    if isinstance(prompt, str):
        utf8_size(prompt, "the prompt")
        return [{"role": "user", "content": prompt}]
    if not isinstance(prompt, (list, tuple)) or not prompt:
        raise MessagesError("a prompt is text or a non-empty list of {'role', 'content'} messages, "
                            f"not {type(prompt).__name__}")
    out = []
    for i, message in enumerate(prompt):
        if not isinstance(message, dict) or message.get("role") not in CHAT_ROLES:
            raise MessagesError(f"message {i}: needs a role among {CHAT_ROLES}, got {shown(message)}")
        content = content_text(message.get("content"), i)
        if content is None:
            raise MessagesError(f"message {i}: no content")
        out.append({"role": message["role"], "content": content})
    return out


def with_instruction(messages: Sequence[dict[str, str]], instruction: str) -> list[dict[str, str]]:
    """``messages`` with ``instruction`` after the text of the last user turn (a new user turn
    when the conversation does not end with one)."""
    out = [dict(m) for m in messages]
    if out and out[-1]["role"] == "user":
        out[-1]["content"] = out[-1]["content"] + "\n\n" + instruction
    else:
        out.append({"role": "user", "content": instruction})
    return out


def content_text(content: Any, i: int) -> str | None:
    """The text of message ``i``'s ``content``: a string, the ``text`` parts of a list of
    OpenAI content parts joined, or ``None``."""
    if content is None:
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if not all(isinstance(p, str) for p in parts):
            raise MessagesError(f"message {i}: a text part's text must be a string")
        content = "".join(parts)
    if isinstance(content, str):
        utf8_size(content, f"message {i}")
        return content
    raise MessagesError(f"message {i}: content must be text, a list of parts or None")


def utf8_size(text: str, where: str) -> int:
    """The size of ``text`` in UTF-8 bytes; :class:`MessagesError` when it has none: a lone
    surrogate (text read with ``errors="surrogateescape"`` holds bytes that were not UTF-8
    that way), which the tokenizer would refuse with a TypeError.

    >>> utf8_size("héllo", "the prompt")
    6
    >>> try:
    ...     utf8_size("ab" + chr(0xDCFF), "the prompt")
    ... except MessagesError as err:
    ...     print(err)
    the prompt is not valid Unicode text: a lone surrogate '\udcff' at character 2 (bytes that were not UTF-8?)
    """
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as err:
        raise MessagesError(f"{where} is not valid Unicode text: a lone surrogate {text[err.start]!r} at "
                            f"character {err.start} (bytes that were not UTF-8?)") from None


def thinking_switches(thinking: bool) -> dict[str, bool]:
    """The chat templates' own reasoning switches, set to ``thinking``: ``enable_thinking``
    (Qwen 3, SmolLM3, EXAONE 4, GLM) and ``thinking`` (DeepSeek V3.1, Kimi K3). Off, such a
    template closes the thinking in the prompt (Qwen 3 writes an empty ``<think></think>``), so a
    constrained answer starts where the model expects one; templates without them ignore both.

    >>> thinking_switches(False)
    {'enable_thinking': False, 'thinking': False}
    """
    return {"enable_thinking": bool(thinking), "thinking": bool(thinking)}
