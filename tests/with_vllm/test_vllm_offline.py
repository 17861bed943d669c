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
