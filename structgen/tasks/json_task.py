"""JSON values: a schema (or a Pydantic model) and a prompt in, a value that validates out.

The schema is compiled with strict objects and compact whitespace by default (a small model
stays on the rails and the output still validates), shown to the model in the user's turn of
the chat template, decoded with drafts, parsed and checked with ``jsonschema``.

Example
-------
>>> from structgen.tasks.json_task import as_schema, validation_error
>>> as_schema('{"type": "integer"}')
({'type': 'integer'}, None)
>>> validation_error({"type": "integer", "minimum": 3}, 2)
'2 is less than the minimum of 3'
"""

from __future__ import annotations

import decimal
import json
from typing import Any, Literal

from structgen.decoding.config import DecodeConfig
from structgen.engine.compiler import parse_schema, pydantic_model
from structgen.errors import DecodingError, OptionError
from structgen.tasks.chat import chat_messages, with_instruction
from structgen.tasks.context import ModelContext
from structgen.tasks.jobs import Decode, Job, run_job
from structgen.tasks.results import JsonResult

__all__ = ["Whitespace", "as_schema", "generate_json_with", "json_job", "prompt_ids", "user_turn", "validation_error"]

Whitespace = Literal["compact", "spaced", "flexible"]


def as_schema(schema: Any) -> tuple[Any, Any]:
    """(JSON schema, Pydantic model class or None) for a schema dict, JSON text or model class."""
    return parse_schema(schema), pydantic_model(schema)


def validation_error(schema: Any, value: Any) -> str | None:
    """jsonschema's first error for ``value`` (formats checked too), or ``None``."""
    from jsonschema import validators

    cls = validators.validator_for(schema if isinstance(schema, dict) else {})
    try:
        error = next(iter(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value)), None)
    except ValueError as err:  # jsonschema writes the value into its message: past 4,300 digits it cannot
        return f"the value does not validate, and jsonschema cannot say why ({err})"
    return None if error is None else error.message


def prompt_ids(context: ModelContext, schema: Any, prompt: Any, *, include_schema: bool = True,
               raw: bool = False, thinking: bool = False) -> list[int]:
    """The token ids fed to the model: the chat template (when the tokenizer has one) around
    the prompt (a string, or chat messages), with the schema shown after the user's last turn
    unless ``include_schema=False``; ``raw=True`` encodes a prompt string as it is; ``thinking``
    sets the template's reasoning switch."""
    if raw:
        if not isinstance(prompt, str):
            raise OptionError("raw=True encodes a prompt string as it is; chat messages need the chat template")
        return context.encode(prompt)
    if not include_schema:
        return context.chat_ids(prompt, thinking=thinking)
    if isinstance(prompt, str):
        return context.chat_ids(user_turn(schema, prompt), thinking=thinking)
    return context.chat_ids(with_instruction(chat_messages(prompt), SCHEMA_INSTRUCTION + _schema_text(schema)),
                            thinking=thinking)


#: What the user's turn says before the schema.
SCHEMA_INSTRUCTION = "Answer with only a JSON value that follows this JSON schema:\n"


def user_turn(schema: Any, prompt: str) -> str:
    """The user's turn ``prompt_ids`` puts in the chat template: the prompt, then the schema.

    >>> user_turn({"type": "integer"}, "How many?")
    'How many?\\n\\nAnswer with only a JSON value that follows this JSON schema:\\n{"type": "integer"}'
    """
    return prompt + "\n\n" + SCHEMA_INSTRUCTION + _schema_text(schema)


def _schema_text(schema: Any) -> str:
    return json.dumps(as_schema(schema)[0], ensure_ascii=False)


def generate_json_with(context: ModelContext, schema: Any, prompt: str, config: DecodeConfig, *,
                       whitespace: Whitespace = "compact", strict: bool = True, include_schema: bool = True,
                       raw: bool = False, lenient: bool = False) -> JsonResult:
    """:meth:`structgen.Generator.json` on ``context`` (see there)."""
    return run_job(context, json_job(context, schema, prompt, config, whitespace=whitespace, strict=strict,
                                     include_schema=include_schema, raw=raw, lenient=lenient))


def json_job(context: ModelContext, schema: Any, prompt: str, config: DecodeConfig, *,
             whitespace: Whitespace = "compact", strict: bool = True, include_schema: bool = True,
             raw: bool = False, lenient: bool = False) -> Job[JsonResult]:
    """:func:`generate_json_with` as a job (:mod:`structgen.tasks.jobs`), to run in a batch."""
    plain, model_class = as_schema(schema)
    ids = prompt_ids(context, plain, prompt, include_schema=include_schema, raw=raw,
                     thinking=bool(config.reasoning))
    context.check_fits(ids, config)  # before compiling: a prompt that cannot fit wastes the compile
    compiled = context.compiler.json_schema(plain, whitespace=whitespace, strict=strict,
                                            canonical=True, lenient=lenient)
    tokens, finish, stats = yield Decode(compiled.matcher(), ids, config)
    text = context.text_of(tokens)
    try:
        value = json.loads(text, parse_int=_integer)
    except json.JSONDecodeError as err:
        raise DecodingError(f"internal error: the output is not JSON ({err}): {text!r}") from err
    error = validation_error(plain, value)
    if error is not None and not compiled.relaxed:
        raise DecodingError(f"internal error: the output does not validate ({error}): {text!r}")
    if model_class is not None and error is None:
        value = model_class.model_validate(value)
    return JsonResult(value=value, text=text, token_ids=tokens, finish_reason=finish, stats=stats,
                      relaxed=compiled.relaxed, validation_error=error)


def _integer(digits: str) -> int:
    """A JSON integer, however long: ``int()`` refuses text past 4,300 digits (a guard against
    slow conversions), and a budget of thousands of tokens can write one."""
    return int(digits) if len(digits) <= 4_000 else int(decimal.Decimal(digits))
