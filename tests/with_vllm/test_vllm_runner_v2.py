"""structgen's processor under vLLM's Model Runner V2, driven as the runner drives it.

The V2 runner needs Triton and a GPU (on this CPU vLLM falls back to the V1 runner), so the test
plays the runner's part with vLLM's own classes on CPU tensors: a ``RequestState`` (slots, the
token history ``all_token_ids``, ``prompt_len``, ``total_len``), the processor built through
``LogitsProcRequestState.from_request_state`` and called with ``LogitsContext`` batches. A seeded
schedule adds requests to free slots (slots are reused), preempts and resumes them (a resumed
request comes back in another slot with its partial output as history), reorders the batch every
step and gives each request 0-4 draft rows whose draft tokens sit in ``input_ids`` (some of them
outside the grammar). Every constrained row's mask must equal a fresh matcher's on that row's
prefix (committed output + the drafts before it; end-of-sequence only after a refused draft),
within the request's ``max_tokens`` (the budget rule: the last tokens leave a completion that
fits, every answer ending valid); unconstrained rows must come back untouched.

One shim: vLLM reports unified memory as available on a CPU platform, then pins memory, which a
CPU-only torch cannot; ``is_uva_available`` is answered False so its buffers use plain memory.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from structgen.decoding.budget import within_budget
from structgen.integrations.constraints import constraint_matcher, read_constraint
from structgen.integrations.vllm import StructgenLogitsProcessor, constrained

from cases import DATE_REGEX, SUM_GRAMMAR, extraction_pairs

MAX_SLOTS, MAX_LEN, MAX_DRAFTS, MAX_OUTPUT = 6, 512, 4, 24


@pytest.fixture(scope="module")
def runner(model_dir):
    import vllm.v1.worker.gpu.buffer_utils as buffers
    from vllm.config import ModelConfig, VllmConfig
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcRequestState
    from vllm.v1.worker.gpu.states import RequestState

    config = VllmConfig(model_config=ModelConfig(model=model_dir))
    available = buffers.is_uva_available
    buffers.is_uva_available = lambda: False
    try:
        states = RequestState(MAX_SLOTS, MAX_LEN, MAX_LEN, MAX_DRAFTS, config.model_config.get_vocab_size(),
                              torch.device("cpu"))
    finally:
        buffers.is_uva_available = available
    return config, states, LogitsProcRequestState.from_request_state(states)


def _specs() -> list:
    pair = extraction_pairs(1)[0]
    return [{"json_schema": pair["schema"]}, {"regex": DATE_REGEX}, {"grammar": SUM_GRAMMAR}, None]


class _Request:
    def __init__(self, rid: int, spec, prompt: list[int]) -> None:
        self.rid, self.spec, self.prompt, self.output, self.slot = rid, spec, prompt, [], None


def _allowed(processor, request: _Request, tokens: list[int], budget: bool = True) -> np.ndarray | None:
    """The ids a fresh matcher allows after ``tokens`` of output, within the request's
    ``max_tokens`` (the budget rule) unless ``budget`` is False; None where it refuses them."""
    matcher = constraint_matcher(read_constraint(request.spec), processor.vocabulary, processor.tokenizer,
                                 request.prompt)
    if any(not matcher.advance(t) for t in tokens):
        return None
    words = matcher.mask_words().copy()
    if budget:
        within_budget(matcher, words, MAX_OUTPUT - len(tokens))
    width = processor.slots.masker.width
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:width].astype(bool)
    return np.flatnonzero(bits) if bits.any() else None


def run_schedule(runner, processor_class, seed: int, steps: int = 30) -> dict[str, int]:
    """Play the runner for ``steps`` steps; returns what it exercised (rows checked, draft rows
    after a refused draft, resumptions with output, slots reused)."""
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsContext

    config, states, lp_states = runner
    processor = processor_class(config, lp_states)
    eos = np.array(sorted(processor.vocabulary.eos_ids))
    rng = random.Random(seed)
    free = list(range(MAX_SLOTS))
    waiting = [_Request(i, rng.choice(_specs()), [rng.randrange(1, 1000) for _ in range(rng.randint(3, 12))])
               for i in range(12)]
    running: list[_Request] = []
    seen = {"checked": 0, "after a refused draft": 0, "resumed with output": 0, "slot reused": 0}
    used: set[int] = set()

    def admit(request: _Request) -> None:
        slot = free.pop()  # the runner's free list: slots are reused
        seen["slot reused"] += slot in used
        seen["resumed with output"] += bool(request.output)
        used.add(slot)
        history = request.prompt + request.output  # a resumed request brings its partial output
        states.all_token_ids.gpu[slot, :len(history)] = torch.tensor(history, dtype=torch.int32)
        states.prompt_len.np[slot], states.prefill_len.np[slot] = len(request.prompt), len(history)
        states.prompt_len.copy_to_uva(), states.prefill_len.copy_to_uva()
        states.total_len.gpu[slot] = len(history)
        request.slot = slot
        assert processor.add_request(slot, constrained(request.spec, max_tokens=MAX_OUTPUT)) == \
            (request.spec is not None)
        running.append(request)

    for _ in range(steps):
        while waiting and free and rng.random() < 0.7:
            admit(waiting.pop(rng.randrange(len(waiting))))
        if running and rng.random() < 0.15:  # preemption: the slot is freed, the request waits with its output
            victim = running.pop(rng.randrange(len(running)))
            free.append(victim.slot)
            waiting.append(victim)
        if not running:
            continue
        rng.shuffle(running)  # rows are reordered every step
        drafts, rows = {}, []
        for request in running:
            proposal, walked = [], list(request.output)
            for _ in range(rng.randint(0, MAX_DRAFTS)):
                allowed = _allowed(processor, request, walked) if request.spec is not None else None
                token = int(rng.choice(allowed)) if allowed is not None and rng.random() < 0.85 \
                    else rng.randrange(processor.slots.masker.width)
                proposal.append(token)
                walked.append(token)
            drafts[request.rid] = proposal
            last = (request.prompt + request.output)[-1]
            rows += [(request, j, last if j == 0 else proposal[j - 1]) for j in range(len(proposal) + 1)]
        total = {r.rid: len(r.prompt) + len(r.output) for r in running}
        ctx = LogitsContext(
            expanded_idx_mapping=torch.tensor([r.slot for r, _, _ in rows], dtype=torch.int32),
            idx_mapping=torch.tensor([r.slot for r in running], dtype=torch.int32),
            idx_mapping_np=np.array([r.slot for r in running], dtype=np.int32),
            expanded_local_pos=torch.tensor([j for _, j, _ in rows], dtype=torch.int32),
            input_ids=torch.tensor([t for _, _, t in rows], dtype=torch.int32),
            pos=torch.tensor([total[r.rid] - 1 + j for r, j, _ in rows], dtype=torch.int32),
            seq_lens_upper_bound_np=np.array([total[r.rid] + len(drafts[r.rid]) for r in running], dtype=np.int32))
        logits = torch.randn(len(rows), processor.slots.masker.width)
        before = logits.clone()
        out = processor.apply(logits, ctx)
        for k, (request, j, _) in enumerate(rows):
            if request.spec is None:
                assert torch.equal(out[k], before[k]), "an unconstrained row was changed"
                continue
            expected = _allowed(processor, request, request.output + drafts[request.rid][:j])
            got = np.flatnonzero(torch.isfinite(out[k]).numpy())
            assert np.array_equal(got, eos if expected is None else expected), \
                (seed, request.rid, j, len(got), None if expected is None else len(expected))
            seen["checked"] += 1
            seen["after a refused draft"] += expected is None and j > 0
        for request in list(running):  # the runner accepts a prefix of the drafts, then samples one token
            proposal = drafts[request.rid]
            accepted = rng.randint(0, len(proposal))
            mine = [k for k, (r, _, _) in enumerate(rows) if r is request]  # its rows, by local position
            if request.spec is not None:  # a draft the row before gives no probability is rejected there
                valid = 0
                while valid < len(proposal) and bool(torch.isfinite(out[mine[valid], proposal[valid]])):
                    valid += 1
                accepted = min(accepted, valid)
            k = mine[accepted]
            choices = np.flatnonzero(torch.isfinite(out[k]).numpy())
            new = proposal[:accepted] + [int(rng.choice(choices))]
            slot, end = request.slot, len(request.prompt) + len(request.output)
            states.all_token_ids.gpu[slot, end:end + len(new)] = torch.tensor(new, dtype=torch.int32)
            states.total_len.gpu[slot] = end + len(new)
            request.output += new
            if new[-1] in processor.vocabulary.eos_ids or len(request.output) >= MAX_OUTPUT:
                running.remove(request)
                free.append(request.slot)
    return seen


def test_every_draft_row_is_masked_for_its_own_prefix(runner):
    seen = [run_schedule(runner, StructgenLogitsProcessor, seed) for seed in (1, 2, 3)]
    assert all(s["checked"] >= 40 for s in seen), seen
    assert all(sum(s[k] for s in seen) > 0 for k in seen[0]), seen  # the schedule did all it should


def test_the_check_fails_when_draft_rows_share_the_first_rows_mask(runner):
    """The check has teeth: a processor that masks every draft row as the request's first row
    (the prefix without its drafts) is caught."""

    class Undrafted(StructgenLogitsProcessor):
        def apply(self, logits, ctx=None):
            ctx = type(ctx)(**{**ctx.__dict__, "expanded_local_pos": torch.zeros_like(ctx.expanded_local_pos)})
            return super().apply(logits, ctx)

    with pytest.raises(AssertionError):
        for seed in (1, 2, 3):
            run_schedule(runner, Undrafted, seed)


def test_both_runners_load_it_under_one_name():
    from vllm.v1.sample.logits_processor import LogitsProcessor as V1
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2
    from vllm.v1.worker.gpu.sample.logits_processor.loader import _load_v2_logitsprocs_by_fqcns

    from structgen.integrations.vllm import QUALIFIED_NAME

    assert issubclass(StructgenLogitsProcessor, V1) and issubclass(StructgenLogitsProcessor, V2)
    assert _load_v2_logitsprocs_by_fqcns([QUALIFIED_NAME]) == [StructgenLogitsProcessor]
