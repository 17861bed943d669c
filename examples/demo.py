"""Demo: constrain SmolLM2 (the embedded default model) to a JSON schema, token by token.

Run it with ``make demo``. It compiles a schema against the model's tokenizer, then decodes
greedily one forward pass per token, masking every step with the grammar's exact token mask.
(Drafting forced text — several tokens per pass — is the next milestone; this loop is the
step-by-step reference it must equal.)
"""

from __future__ import annotations

import json
import time

import numpy as np
import torch

import structgen
from structgen.models import load_default_model

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer"},
        "city": {"type": "string", "maxLength": 40},
        "languages": {"type": "array", "items": {"enum": ["English", "French", "Italian"]}},
    },
    "required": ["name", "age", "city", "languages"],
    "additionalProperties": False,
}
PROMPT = ("Extract the person as JSON: Ada Lovelace, 36, lived in London and wrote in "
          "English and French.")


def main() -> None:
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    model, tok = load_default_model()
    print(f"model loaded in {time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    vocab = structgen.Vocabulary.from_tokenizer(tok, vocab_size=model.config.vocab_size,
                                                generation_config=model.generation_config)
    compiled = structgen.compile_json_schema(SCHEMA, vocab, whitespace="compact")
    matcher = compiled.matcher()
    matcher.mask_words()
    print(f"schema compiled in {(time.perf_counter() - t0) * 1000:.0f} ms; "
          f"forced at start: {matcher.forced_text()!r}")

    messages = [{"role": "user", "content": PROMPT + "\nSchema: " + json.dumps(SCHEMA)}]
    prompt_ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    if not isinstance(prompt_ids, torch.Tensor):  # transformers 5 may return a BatchEncoding
        prompt_ids = prompt_ids["input_ids"]
    bitmask = np.zeros(vocab.words, dtype=np.int32)
    past, inputs, forced_tokens, steps = None, prompt_ids, 0, 0
    t0 = time.perf_counter()
    with torch.no_grad():
        while not matcher.is_finished() and steps < 200:
            out = model(input_ids=inputs, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1, : vocab.size]
            matcher.fill_bitmask(bitmask)
            allowed = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[: vocab.size]
            logits = logits.masked_fill(torch.from_numpy(allowed == 0), float("-inf"))
            forced_tokens += int(allowed.sum() == 1)
            token = int(torch.argmax(logits))
            if token in vocab.eos_ids:
                break
            if not matcher.advance(token):
                raise structgen.DecodingError(matcher.last_rejection or "token rejected")
            inputs = torch.tensor([[token]])
            steps += 1
    seconds = time.perf_counter() - t0
    text = tok.decode(matcher.token_ids)
    print(f"\n{text}\n")
    print(f"{steps} tokens in {seconds:.2f} s ({steps / seconds:.1f} tokens/s, one pass each); "
          f"{forced_tokens} steps had a single legal token")
    value = json.loads(text)
    import jsonschema

    jsonschema.validate(value, SCHEMA)
    print("valid against the schema:", value)


if __name__ == "__main__":
    main()
