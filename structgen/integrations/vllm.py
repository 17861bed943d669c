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

One class serves both of vLLM's model runners under one name: the V1 runner (vLLM's CPU
backend, and GPUs where Model Runner V2 is off) builds it with ``(vllm_config, device,
is_pin_memory)`` and tells it of batch changes; Model Runner V2 (vLLM's default for dense models
on a GPU) builds it with ``(vllm_config, req_states)``, tells it of each request entering a slot
(:meth:`~StructgenLogitsProcessor.add_request`) and hands :meth:`~StructgenLogitsProcessor.apply`
a batch layout whose rows are logits rows: under speculative decoding (EAGLE, MTP, n-gram
drafts) one per draft position, each masked for its own prefix
(:class:`~structgen.integrations.slot_rows.SlotRows`), committed tokens read from the runner's
token history. The V1 runner refuses custom logits processors when speculative decoding is on
(``build_logitsprocs``: "Custom logits processors are not supported when speculative decoding
is enabled."); Model Runner V2 runs them with drafts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from vllm import SamplingParams
from vllm.exceptions import VLLMValidationError
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

try:  # Model Runner V2's interface (vLLM 0.32 has it)
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext, LogitsProcRequestState
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as RunnerV2LogitsProcessor
except ImportError:  # an older vLLM: the V1 runner only
    LogitsContext = LogitsProcRequestState = None  # type: ignore[assignment,misc]
    RunnerV2LogitsProcessor = object  # type: ignore[assignment,misc]

from structgen.engine.vocab import Vocabulary
from structgen.errors import StructgenError
from structgen.integrations.constraints import BYTES, compile_constraint, constraint_matcher, read_constraint
from structgen.integrations.rows import BatchRows
from structgen.integrations.slot_rows import SlotRows

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


def _limit(params: SamplingParams) -> int | None:
    """The request's token budget for the budget rule: its ``max_tokens``, unless the constraint
    says ``"budget": "none"`` (a constraint that does not read is refused elsewhere)."""
    spec = _constraint_of(params)
    try:
        if spec is None or read_constraint(spec).option("budget", "complete") == "none":
            return None
    except StructgenError:
        return None
    return params.max_tokens if isinstance(params.max_tokens, int) and params.max_tokens > 0 else None


class StructgenLogitsProcessor(LogitsProcessor, RunnerV2LogitsProcessor):  # type: ignore[misc]
    """Masks each row of vLLM's batch with its request's structgen constraint (see the module).

    A subclass of both runners' ``LogitsProcessor``: each runner's loader accepts it, and its
    constructor's arguments say which runner built it.
    """

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

    def __init__(self, vllm_config: "VllmConfig", *runner: Any) -> None:
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
        #: Model Runner V2's request state (None under the V1 runner)
        self.req_states = runner[0] if len(runner) == 1 and LogitsProcRequestState is not None and \
            isinstance(runner[0], LogitsProcRequestState) else None
        self.rows = BatchRows(width, self.vocabulary.eos_ids)
        self.slots = SlotRows(width, self.vocabulary.eos_ids)
        self._pending: dict[int, Any] = {}  # V2 slots added this step, their matcher made once the tokens are in

    # -- the V1 runner ------------------------------------------------------------------------

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes which token is greedy

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.remove(index)
        for index, params, prompt_ids, output_ids in batch_update.added:
            self.rows.add(index, self._matcher(params, prompt_ids or ()), output_ids, limit=_limit(params))
        for source, target, direction in batch_update.moved:
            self.rows.move(source, target, swap=direction == MoveDirectionality.SWAP)

    def apply(self, logits: "torch.Tensor", ctx: Any = None) -> "torch.Tensor":
        if self.req_states is None:
            return self.rows.mask(logits)
        self._make_pending()
        return self.slots.mask(logits, slots=ctx.expanded_idx_mapping.tolist(), local=ctx.expanded_local_pos.tolist(),
                               inputs=ctx.input_ids.tolist(), committed=self._committed)

    # -- Model Runner V2 ----------------------------------------------------------------------

    def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
        """A request enters slot ``req_idx``: whatever the slot held is dropped."""
        self.slots.set(req_idx, None)
        self._pending.pop(req_idx, None)
        if _constraint_of(sampling_params) is None:
            return False
        self._pending[req_idx] = sampling_params
        return True

    def _make_pending(self) -> None:
        """Matchers for the slots added since the last step (their prompts are on the device by now:
        a reasoning constraint reads whether the prompt opened the thinking)."""
        for slot, params in self._pending.items():
            prompt = self.req_states.all_token_ids.gpu[slot, :int(self.req_states.prompt_len.np[slot])].tolist()
            self.slots.set(slot, self._matcher(params, prompt), limit=_limit(params))
        self._pending.clear()

    def _committed(self, slots: list[int]) -> dict[int, list[int]]:
        """Each slot's committed output tokens, read from the runner's token history."""
        import torch

        index = torch.tensor(slots, dtype=torch.long, device=self.req_states.all_token_ids.gpu.device)
        total = self.req_states.total_len.gpu[index].tolist()
        prompt = [int(self.req_states.prompt_len.np[s]) for s in slots]
        low, high = min(prompt), max(total)
        tokens = self.req_states.all_token_ids.gpu[index, low:high].tolist() if high > low else [[] for _ in slots]
        return {s: tokens[k][p - low:t - low] for k, (s, p, t) in enumerate(zip(slots, prompt, total))}

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
