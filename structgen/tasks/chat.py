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

from structgen.errors import MessagesError

__all__ = ["CHAT_ROLES", "Prompt", "chat_messages", "content_text", "with_instruction"]

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
        return [{"role": "user", "content": prompt}]
    if not isinstance(prompt, (list, tuple)) or not prompt:
        raise MessagesError("a prompt is text or a non-empty list of {'role', 'content'} messages, "
                            f"not {type(prompt).__name__}")
    out = []
    for i, message in enumerate(prompt):
        if not isinstance(message, dict) or message.get("role") not in CHAT_ROLES:
            raise MessagesError(f"message {i}: needs a role among {CHAT_ROLES}, got {message!r:.80}")
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
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise MessagesError(f"message {i}: content must be text, a list of parts or None")
