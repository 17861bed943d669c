"""Constrained ``model.generate`` under transformers' assisted generation: structgen's
``LogitsProcessor`` and xgrammar's ``xgr.contrib.hf.LogitsProcessor``, side by side.

transformers checks drafts (``prompt_lookup_num_tokens``, ``assistant_model``) by calling the
logits processors once per draft position on a growing prefix, then drops what it refuses; a
processor that keeps its own state by counting calls goes wrong there. For each engine and
mode this prints whether ``generate`` completes and whether its greedy output equals the
plain (unassisted) run. llguidance ships no transformers processor, so it has no row.

Run: ``.venv/bin/python benchmarks/assisted_peers.py`` (needs the ``bench`` extra:
``make bench`` installs it). Results: ``benchmarks/results/assisted_peers.md``.
"""

from __future__ import annotations

import json

SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
     "required": ["city", "country"], "additionalProperties": False},
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
     "required": ["name", "age"], "additionalProperties": False},
]
PROMPTS = ["Which city is the Eiffel Tower in? Answer in JSON.",
           "Extract the person as JSON: Ada Lovelace, 36, mathematician."]


def main() -> None:
    import torch
    import xgrammar as xgr

    import structgen
    from structgen.decoding.draft_model import quantized_model
    from structgen.decoding.models import default_model

    torch.manual_seed(0)
    model, tokenizer = default_model()
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
    xgr_compiler = xgr.GrammarCompiler(info)
    engines = {
        "structgen": lambda schema: structgen.LogitsProcessor(
            structgen.compile_json_schema(schema, tokenizer, model=model)),
        "xgrammar": lambda schema: xgr.contrib.hf.LogitsProcessor(
            xgr_compiler.compile_json_schema(json.dumps(schema))),
    }
    modes = {"prompt lookup (4)": {"prompt_lookup_num_tokens": 4},
             "assistant model (int8 copy)": {"assistant_model": quantized_model(model)}}
    print("| engine | mode | completes | equals plain greedy |")
    print("|---|---|---|---|")
    for engine, make in engines.items():
        for mode, options in modes.items():
            done = same = 0
            errors = set()
            for schema, prompt in zip(SCHEMAS, PROMPTS):
                inputs = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                       add_generation_prompt=True, return_tensors="pt",
                                                       return_dict=True)
                plain = model.generate(**inputs, max_new_tokens=48, do_sample=False,
                                       logits_processor=[make(schema)])
                try:
                    drafted = model.generate(**inputs, max_new_tokens=48, do_sample=False,
                                             logits_processor=[make(schema)], **options)
                except Exception as err:  # noqa: BLE001 -- what the peer raises is the finding
                    errors.add(type(err).__name__)
                    continue
                done += 1
                same += int(drafted.shape == plain.shape and bool((drafted == plain).all()))
            total = len(SCHEMAS)
            failed = f" (raises {', '.join(sorted(errors))})" if errors else ""
            print(f"| {engine} | {mode} | {done}/{total}{failed} | {same}/{total} |")


if __name__ == "__main__":
    main()
