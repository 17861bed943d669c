"""Pieces every benchmark report shares: package versions, commit, CPU, MaskBench sources, tables."""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parent.parent


def package_versions(packages: Iterable[str]) -> str:
    """``"torch 2.13.0, numpy 2.4.6"`` for the installed ones among ``packages``."""
    got = []
    for pkg in dict.fromkeys(packages):
        try:
            got.append(f"{pkg} {importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return ", ".join(got)


def git_commit() -> str:
    """The checkout's commit, ``+dirty`` when structgen/ has uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+dirty" if git("status", "--porcelain", "--", "structgen") else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_lines(threads: int, load: tuple[list[float], list[float]], wall_s: float, versions: str) -> list[str]:
    """The report lines every model benchmark opens with: the command, the date and wall time,
    the machine (CPU, threads, load average before and after) and the package versions."""
    import datetime
    import os
    import shlex

    def average(values: list[float]) -> str:
        return " / ".join(f"{x:.2f}" for x in values)

    return [
        f"- command: `{shlex.join(['python', *sys.argv])}`",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; wall time {wall_s:.0f} s",
        f"- machine: {cpu_model()}, nproc {os.cpu_count()}; torch threads {threads}, flush denormal on; "
        f"load average {average(load[0])} before, {average(load[1])} after; Python {platform.python_version()}",
        f"- versions: {versions}; structgen checkout {git_commit()}",
    ]


def source_of(name: str) -> str:
    """MaskBench subset of a schema name: ``Github_easy---x.json`` -> ``Github_easy``, ``BFCL_simple_3.json`` -> ``BFCL``."""
    prefix = name.split("---")[0]
    if prefix.startswith("BFCL_"):
        return "BFCL"
    return re.sub(r"_\d+\.json$", "", prefix)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def choose(parser: "argparse.ArgumentParser", text: str, choices, what: str = "engines") -> list[str]:
    """The comma-separated names in ``text``, each one of ``choices`` (else a usage error)."""
    picked = [name.strip() for name in text.split(",") if name.strip()]
    unknown = set(picked) - set(choices)
    if unknown:
        parser.error(f"unknown {what} {sorted(unknown)}; choose from {', '.join(choices)}")
    return picked


def publish(text: str, out: Path) -> None:
    """Print the report and write it to ``out`` (its folder made as needed)."""
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


def details(summary: str, lines: list[str]) -> list[str]:
    """A folded Markdown section (``none`` when ``lines`` is empty)."""
    return [f"<details><summary>{summary}</summary>", "", *(lines or ["none"]), "", "</details>", ""]
