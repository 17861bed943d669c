"""Regenerate the README's generated blocks (``make readme``); tests/test_readme.py checks them.

A block sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->``; its text comes from
the code (e.g. the JSON Schema keyword table from the registry, structgen.frontends.json_schema.keywords), never by hand.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def blocks() -> dict[str, str]:
    from structgen.frontends.json_schema.keywords import keyword_table

    return {"keyword-table": keyword_table()}


def render(readme: str) -> str:
    for name, text in blocks().items():
        pattern = re.compile(rf"(<!-- generated: {name} -->\n).*?(<!-- end: {name} -->)", re.S)
        if not pattern.search(readme):
            raise SystemExit(f"README.md has no block '{name}'")
        readme = pattern.sub(lambda m: m.group(1) + text + m.group(2), readme)
    return readme


if __name__ == "__main__":
    path = ROOT / "README.md"
    path.write_text(render(path.read_text()))
    print(f"updated {path}")
