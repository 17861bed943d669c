"""BFCL tool-call cases from ``../shared/data/toolcalls`` and the canonical text of their calls.

Each case has OpenAI-style ``tools``, ``messages``, the ``ground_truth`` and one concrete
``example_calls`` entry per ground-truth call, flagged ``valid_against_normalized_schema``
(``false`` for 22 calls whose ground truth breaks its own schema; ``null`` for Java and
JavaScript, whose values are language-typed). See ``../shared/data/README.md``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, Iterator

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "toolcalls"
#: The categories whose example calls are typed JSON (Java/JavaScript ones are not).
CALL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple",
                   "live_multiple", "live_parallel", "live_parallel_multiple")


def cases(category: str) -> Iterator[dict[str, Any]]:
    """The cases of one BFCL category, in file order."""
    path = DATA / f"bfcl_{category}.jsonl"
    if not path.exists():
        path = path.with_suffix(".jsonl.gz")
    with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")) as f:
        for line in f:
            yield json.loads(line)


def canonical(schema: Any, value: Any) -> Any:
    """``value`` with object keys in its schema's property order (undeclared ones after), the
    order the generation grammar writes them in."""
    if isinstance(value, dict):
        props = schema.get("properties", {}) if isinstance(schema, dict) else {}
        extra = schema.get("additionalProperties") if isinstance(schema, dict) else None
        keys = [k for k in props if k in value] + [k for k in value if k not in props]
        return {k: canonical(props.get(k, extra if isinstance(extra, dict) else {}), value[k]) for k in keys}
    if isinstance(value, list):
        items = schema.get("items", {}) if isinstance(schema, dict) else {}
        return [canonical(items if isinstance(items, dict) else {}, v) for v in value]
    return value


def undeclared_keys(schema: Any, value: Any) -> bool:
    """Whether ``value`` uses an object key that its schema does not declare."""
    if isinstance(value, dict) and isinstance(schema, dict):
        props = schema.get("properties")
        if props is not None and any(k not in props for k in value):
            return True
        return any(undeclared_keys((props or {}).get(k, {}), v) for k, v in value.items())
    if isinstance(value, list) and isinstance(schema, dict):
        return any(undeclared_keys(schema.get("items", {}), v) for v in value)
    return False
