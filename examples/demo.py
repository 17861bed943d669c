"""Demo: SmolLM2 (the embedded default model) constrained to a JSON schema, with drafts.

Run it with ``make demo``. The same extraction runs twice: step by step (one forward pass per
token, ``speculate=False``) and with forced-text drafts (keys, punctuation, enum tails checked
several tokens per pass). The outputs are identical token for token; the passes are not.
"""

from __future__ import annotations

import time

import torch

import structgen

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer"},
        "city": {"type": "string", "maxLength": 40},
        "languages": {"type": "array", "items": {"enum": ["English", "French", "Italian"]}},
    },
    "required": ["name", "age", "city", "languages"],
}
PROMPT = ("Extract the person as JSON: Ada Lovelace, 36, lived in London and wrote in "
          "English and French.")


def main() -> None:
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    gen = structgen.Generator()
    print(f"model loaded in {time.perf_counter() - t0:.1f} s")
    costs = gen.pass_costs
    print("forward pass cost by new positions (relative to 1):",
          ", ".join(f"{n}: {c:.2f}" for n, c in sorted(costs.relative.items())))
    runs = {}
    for speculate in (False, True):
        r = gen.json(SCHEMA, PROMPT, speculate=speculate)
        s = r.stats
        runs[speculate] = r
        label = "drafted     " if speculate else "step by step"
        print(f"\n{label}: {r.text}")
        print(f"  {s.new_tokens} tokens, {s.forward_passes} forward passes, {s.seconds:.2f} s "
              f"({s.new_tokens / s.seconds:.1f} tokens/s); drafted {s.drafted_tokens}, "
              f"accepted {s.accepted_tokens}")
    assert runs[True].token_ids == runs[False].token_ids
    print("\nidentical tokens; value:", runs[True].value)


if __name__ == "__main__":
    main()
