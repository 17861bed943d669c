"""structgen's logits processor in vLLM's offline engine (``LLM.generate``), on the default model.

One batch mixes every kind of constraint (JSON schemas of the extraction pairs, Lark grammars,
regexes, SQL on a real database, OpenAI tools in two formats) with unconstrained requests. The
engine gets a KV cache too small for all of them at once, so vLLM preempts requests and
recomputes them later: the processor must follow rows that join, leave, move and come back.
Every answer is checked by :func:`cases.problem`, independently of the processor.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from vllm import LLM, SamplingParams
from vllm.exceptions import VLLMValidationError

from structgen.integrations.vllm import StructgenLogitsProcessor, constrained

from cases import (MEMORY_SHARE, chat, extraction_pairs, grammar_requests, json_request, problem, sql_requests,
                   tool_requests)

MAX_TOKENS = 200


@pytest.fixture(scope="module")
def llm(model_dir):
    # 36 blocks of 32 tokens (one kept by vLLM): a few requests at a time, so a batch of 23 is preempted.
    engine = LLM(model=model_dir, logits_processors=[StructgenLogitsProcessor], gpu_memory_utilization=MEMORY_SHARE,
                 max_model_len=1024, block_size=32, num_gpu_blocks_override=36, enforce_eager=True, seed=0,
                 disable_log_stats=False)
    yield engine
    del engine


@pytest.fixture(scope="module")
def mixed(llm):
    """(constraint or None, prompt, output) for one batch of every kind."""
    tok = llm.get_tokenizer()
    requests = [json_request(tok, pair) for pair in extraction_pairs(10)]
    requests += grammar_requests(tok) + sql_requests(tok, 3) + tool_requests(tok, 2) + tool_requests(tok, 2, "hermes")
    requests += [(chat(tok, "Say hello in French."), None), (chat(tok, "Write a haiku about the sea."), None)]
    params = [constrained(c, max_tokens=MAX_TOKENS, temperature=0) if c is not None
              else SamplingParams(max_tokens=40, temperature=0) for _, c in requests]
    outputs = llm.generate([p for p, _ in requests], params, use_tqdm=False)
    return [(c, p, o.outputs[0]) for (p, c), o in zip(requests, outputs)]


def _preemptions(llm) -> float:
    return sum(m.value for m in llm.get_metrics() if m.name == "vllm:num_preemptions")


def test_every_constrained_answer_is_valid(llm, mixed):
    tok = llm.get_tokenizer()
    problems = [f"{c}: {err}" for c, _, out in mixed if c is not None
                and (err := problem(c, out.text, out.finish_reason, tok))]
    assert not problems, "\n".join(problems)
    finished = [out.finish_reason == "stop" for c, _, out in mixed if c is not None]
    assert sum(finished) >= 0.8 * len(finished), [(c and list(c)[0], out.text[-60:]) for c, _, out in mixed]
    kinds = {list(c)[0] for c, _, out in mixed if c is not None and out.finish_reason == "stop"}
    assert kinds == {"json_schema", "grammar", "regex", "sql", "tools"}


def test_requests_were_preempted_and_recomputed(llm, mixed):
    assert _preemptions(llm) > 0


def test_unconstrained_requests_in_the_same_batch_run_free(llm, mixed):
    free = [out for c, _, out in mixed if c is None]
    assert len(free) == 2 and all(out.text for out in free)
    alone = llm.generate([p for c, p, _ in mixed if c is None], SamplingParams(max_tokens=40, temperature=0),
                         use_tqdm=False)
    # The same greedy start as without any constrained neighbour. Only the first token is
    # compared: batches that preempt and recompute change the float sums, and a near-tie a few
    # tokens in ("Bonjour! I" / "Bonjour in") has been seen to go either way.
    for out, single in zip(free, alone):
        assert list(out.token_ids[:1]) == list(single.outputs[0].token_ids[:1])


def test_a_constraint_structgen_refuses_is_refused_at_the_door(llm):
    tok = llm.get_tokenizer()
    with pytest.raises(VLLMValidationError, match="structgen refused the constraint: SchemaError"):
        llm.generate([chat(tok, "x")], constrained({"json_schema": {"type": "strnig"}}, max_tokens=4), use_tqdm=False)
    with pytest.raises(VLLMValidationError, match="OptionError: the structgen constraint must name exactly one of"):
        llm.generate([chat(tok, "x")], constrained({"regex": "a", "grammar": "start: \"a\""}, max_tokens=4),
                     use_tqdm=False)
    # The engine goes on serving.
    out = llm.generate([chat(tok, "Is the sky blue? Answer yes or no.")],
                       constrained('{"regex": "(yes|no)"}', max_tokens=4, temperature=0), use_tqdm=False)
    assert out[0].outputs[0].text in ("yes", "no")


def test_speculative_decoding_with_structgen_masks_is_refused_by_vllm(model_dir, tmp_path):
    """vLLM 0.32 refuses custom logits processors when speculative decoding is on, a custom
    drafter included: structgen's forced text cannot be drafted beside its masks there (README)."""
    drafter = tmp_path / "forced_text_drafter.py"
    drafter.write_text(textwrap.dedent('''
        class ForcedText:
            """The smallest proposer vLLM's custom_class accepts."""
            def __init__(self, vllm_config):
                self.k = vllm_config.speculative_config.num_speculative_tokens
            def propose(self, *args, **kwargs):
                raise NotImplementedError("never reached: vLLM refuses the engine first")
        '''))
    script = textwrap.dedent(f'''
        from vllm import LLM
        from structgen.integrations.vllm import StructgenLogitsProcessor
        if __name__ == "__main__":
            LLM(model={model_dir!r}, logits_processors=[StructgenLogitsProcessor], enforce_eager=True,
                gpu_memory_utilization={MEMORY_SHARE}, max_model_len=1024,
                speculative_config={{"method": "custom_class", "model": "forced_text_drafter.ForcedText",
                                    "num_speculative_tokens": 4}})
        ''')
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode != 0
    assert "Custom logits processors are not supported when speculative decoding is enabled." in run.stdout + run.stderr


def test_max_tokens_is_a_budget_every_answer_ends_valid(llm, model_dir):
    """20 runaway-prone schemas (the budget tests' five and extraction schemas whose shortest
    answer fits) at ``max_tokens`` 24 and 64: every answer parses and validates within its
    budget, many of them closed by the budget rule (``finish_reason == "length"``)."""
    import json

    from transformers import AutoTokenizer

    from structgen.integrations.constraints import compile_constraint, read_constraint
    from structgen.tasks.json_task import validation_error

    from runaway_schemas import RUNAWAYS

    tok, hf = llm.get_tokenizer(), AutoTokenizer.from_pretrained(model_dir)
    candidates = list(RUNAWAYS.values()) + [(pair["schema"], pair["prompt"]) for pair in extraction_pairs(60)]
    picked = []
    for schema, prompt in candidates:
        need = compile_constraint(read_constraint({"json_schema": schema}), hf).matcher().completion_length()
        if need is not None and need <= 20:
            picked.append((schema, prompt))
    picked = picked[:20]
    assert len(picked) == 20
    requests = [(schema, chat(tok, f"{prompt}\n\nAnswer in JSON."), budget) for schema, prompt in picked
                for budget in (24, 64)]
    outputs = llm.generate([p for _, p, _ in requests],
                           [constrained({"json_schema": s}, max_tokens=b, temperature=0) for s, _, b in requests],
                           use_tqdm=False)
    closed = 0
    for (schema, _, budget), out in zip(requests, outputs):
        answer = out.outputs[0]
        assert len(answer.token_ids) <= budget
        value = json.loads(answer.text)
        assert validation_error(schema, value) is None, (answer.text, validation_error(schema, value))
        closed += answer.finish_reason == "length"
    assert closed >= 10, closed
