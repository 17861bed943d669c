"""structgen's masks inside vLLM: a V1 logits processor, no patch to vLLM.

Each request says what its output must be in ``SamplingParams(extra_args={"structgen": ...})``
(a dict or its JSON text, read by :mod:`structgen.integrations.constraints`): a JSON schema, a
grammar, a regex, a SQLite database or OpenAI tools. Requests without it run free in the same
batch. The processor compiles each constraint once per process, keeps a matcher per row of
vLLM's persistent batch and, before every sampling step, brings it to the row's output tokens and
masks the row (:class:`~structgen.integrations.rows.BatchRows`): requests joining, leaving,
moving, preempted and recomputed all come down to a row's tokens.

A constraint structgen refuses (a schema keyword it cannot honour, a grammar error, an unknown
database) is refused when the request arrives: :meth:`StructgenLogitsProcessor.validate_params`
compiles it over bytes and raises, which the OpenAI server answers with HTTP 400.

Offline::

    from vllm import LLM, SamplingParams
    from structgen.integrations.vllm import StructgenLogitsProcessor, constrained

    if __name__ == "__main__":
        llm = LLM(model=path, logits_processors=[StructgenLogitsProcessor])
        params = constrained({"json_schema": {"type": "object", ...}}, max_tokens=200)
        print(llm.generate(["..."], params)[0].outputs[0].text)

Served (``vllm serve PATH --logits-processors structgen.integrations.vllm:StructgenLogitsProcessor``),
with the ``openai`` client::

    client.chat.completions.create(model=..., messages=[...],
        extra_body={"vllm_xargs": {"structgen": json.dumps({"json_schema": schema})}})

vLLM refuses custom logits processors when speculative decoding is on (``build_logitsprocs``:
"Custom logits processors are not supported when speculative decoding is enabled."), so
structgen's forced text cannot be drafted through vLLM's ``custom_class`` proposer beside these
masks in this version (README, "vLLM").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from vllm import SamplingParams
from vllm.exceptions import VLLMValidationError
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from structgen.engine.vocab import Vocabulary
from structgen.errors import StructgenError
from structgen.integrations.constraints import BYTES, compile_constraint, constraint_matcher, read_constraint
from structgen.integrations.rows import BatchRows

if TYPE_CHECKING:
    import torch
    from vllm.config import VllmConfig

__all__ = ["StructgenLogitsProcessor", "constrained", "EXTRA_ARG", "QUALIFIED_NAME"]

log = logging.getLogger(__name__)

#: The key of ``SamplingParams.extra_args`` (and of ``vllm_xargs`` over HTTP) that holds the constraint.
EXTRA_ARG = "structgen"
#: What ``vllm serve --logits-processors`` takes.
QUALIFIED_NAME = "structgen.integrations.vllm:StructgenLogitsProcessor"


def constrained(constraint: Any, **sampling: Any) -> SamplingParams:
    """``SamplingParams(**sampling)`` carrying ``constraint`` for :class:`StructgenLogitsProcessor`.

    Example
    -------
    >>> constrained({"regex": "yes|no"}, max_tokens=4).extra_args          # doctest: +SKIP
    {'structgen': {'regex': 'yes|no'}}
    """
    extra = dict(sampling.pop("extra_args", None) or {})
    extra[EXTRA_ARG] = constraint
    return SamplingParams(extra_args=extra, **sampling)


def _constraint_of(params: SamplingParams) -> Any:
    return (params.extra_args or {}).get(EXTRA_ARG)


class StructgenLogitsProcessor(LogitsProcessor):
    """Masks each row of vLLM's batch with its request's structgen constraint (see the module)."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Refuse a request whose constraint does not read or compile (over bytes: the same
        verdict as over any tokenizer, without one); the OpenAI server answers HTTP 400."""
        spec = _constraint_of(sampling_params)
        if spec is None:
            return
        try:
            compile_constraint(read_constraint(spec), BYTES)
        except StructgenError as err:
            raise VLLMValidationError(f"structgen refused the constraint: {type(err).__name__}: {err}",
                                      parameter=f"extra_args.{EXTRA_ARG}") from err

    def __init__(self, vllm_config: "VllmConfig", device: "torch.device", is_pin_memory: bool) -> None:
        from transformers import AutoTokenizer, GenerationConfig

        model_config = vllm_config.model_config
        self.tokenizer = AutoTokenizer.from_pretrained(model_config.tokenizer,
                                                       revision=model_config.tokenizer_revision,
                                                       trust_remote_code=model_config.trust_remote_code)
        try:  # vLLM stops on the generation config's end-of-sequence ids too
            generation_config = GenerationConfig.from_pretrained(model_config.model, revision=model_config.revision)
        except OSError:
            generation_config = None
        width = model_config.get_vocab_size()
        self.vocabulary = Vocabulary.from_tokenizer(self.tokenizer, vocab_size=max(width, len(self.tokenizer)),
                                                    generation_config=generation_config)
        self.rows = BatchRows(width, self.vocabulary.eos_ids)

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes which token is greedy

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.remove(index)
        for index, params, prompt_ids, output_ids in batch_update.added:
            self.rows.add(index, self._matcher(params, prompt_ids or ()), output_ids)
        for source, target, direction in batch_update.moved:
            self.rows.move(source, target, swap=direction == MoveDirectionality.SWAP)

    def apply(self, logits: "torch.Tensor") -> "torch.Tensor":
        return self.rows.mask(logits)

    def _matcher(self, params: SamplingParams, prompt_ids: Any = ()) -> Any:
        spec = _constraint_of(params)
        if spec is None:
            return None
        try:
            return constraint_matcher(read_constraint(spec), self.vocabulary, self.tokenizer, prompt_ids)
        except StructgenError as err:  # validate_params saw it over bytes; this vocabulary refuses it
            log.error("structgen: constraint refused for this vocabulary (%s: %s); the request may only end",
                      type(err).__name__, err)
            return compile_constraint(read_constraint({"regex": ""}), self.vocabulary).matcher()
