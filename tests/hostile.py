"""Run hostile-input probes in a worker process under a time and memory limit.

A probe is a function of the SmolLM2 vocabulary (``probe(vocab)``) registered with
:func:`probe`; it either returns (structgen gave a result) or raises. Probes run one by one in a
worker process that loads the vocabulary once; before each probe the worker caps its address
space at what it uses now plus :data:`MEMORY_LIMIT`, and the parent kills it when a probe runs
past :data:`TIME_LIMIT` (a fresh worker takes the next probe). A probe's outcome is one of:

- ``ok``: it returned;
- ``structgen``: it raised a :class:`structgen.StructgenError` (``type`` names the class);
- ``builtin``: it raised anything else (a bug: ``RecursionError``, ``MemoryError``, ``KeyError``...);
- ``timeout`` or ``crash`` (the worker died, e.g. killed for memory).

Usage in a test module::

    PROBES = {}
    probe = registry(PROBES)

    @probe("self-referencing dict", expect="SchemaError")
    def _(vocab): ...

    # the ``hostile_worker`` fixture (tests/conftest.py) runs this module's PROBES
    @pytest.mark.parametrize("name", sorted(PROBES))
    def test_probe(name, hostile_worker): check(hostile_worker.run(name), PROBES[name])
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import select
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Callable

TIME_LIMIT = 10.0  # seconds per probe
MEMORY_LIMIT = 2 << 30  # bytes of address space a probe may add
_MARK = "@@hostile@@ "


@dataclass
class Probe:
    fn: Callable
    #: "ok", "error" (any StructgenError), "any" (either: a result or a StructgenError, e.g. the
    #: compile budget refusing), or a StructgenError class name
    expect: str
    contains: str = ""  # a fragment the error message must contain (where it points)


def registry(table: dict[str, Probe]):
    """A decorator that registers probes into ``table`` under a unique name."""

    def probe(name: str, *, expect: str = "error", contains: str = ""):
        def add(fn):
            if name in table:
                raise ValueError(f"probe {name!r} registered twice")
            table[name] = Probe(fn, expect, contains)
            return fn
        return add
    return probe


@dataclass
class Outcome:
    kind: str
    type: str = ""
    message: str = ""
    seconds: float = 0.0

    def __str__(self) -> str:
        return f"{self.kind} {self.type}: {self.message[:2000]} ({self.seconds:.1f} s)"


def check(outcome: Outcome, probe: Probe) -> None:
    """Fail unless ``outcome`` is what ``probe`` expects (never a builtin exception or a hang)."""
    assert outcome.kind in ("ok", "structgen"), str(outcome)
    if probe.expect == "ok":
        assert outcome.kind == "ok", str(outcome)
    elif probe.expect == "any":
        pass
    elif probe.expect != "error":
        assert outcome.kind == "structgen" and outcome.type == probe.expect, str(outcome)
    else:
        assert outcome.kind == "structgen", str(outcome)
    if probe.contains:
        assert probe.contains in outcome.message, str(outcome)


class Worker:
    """The parent's side: one worker process at a time, restarted after a timeout or crash."""

    def __init__(self, module_path: str) -> None:
        self.module_path = module_path
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        return subprocess.Popen([sys.executable, __file__, self.module_path], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env=env)

    def _read(self, proc: subprocess.Popen, deadline: float) -> str | None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                return None
            line = proc.stdout.readline()
            if not line:
                return ""
            if line.startswith(_MARK):
                return line[len(_MARK):]

    def run(self, name: str) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
            # loading the vocabulary is not the probe's time
            if self._read(self.proc, time.monotonic() + 300) is None:
                self.close()
                return Outcome("crash", message="worker did not start")
        proc = self.proc
        start = time.monotonic()
        proc.stdin.write(name + "\n")
        proc.stdin.flush()
        line = self._read(proc, start + TIME_LIMIT + 2)  # + reporting slack
        if not line:
            kind = "timeout" if line is None else "crash"
            self.close()
            return Outcome(kind, message=f"no answer (limit {TIME_LIMIT:.0f} s, {MEMORY_LIMIT >> 30} GB)",
                           seconds=time.monotonic() - start)
        got = json.loads(line)
        if got["kind"] in ("ok", "structgen") and got["seconds"] > TIME_LIMIT:
            return Outcome("timeout", got["type"], got["message"], got["seconds"])
        return Outcome(**got)

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def _vsize() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _serve(module_path: str) -> None:
    """The worker's side: load the vocabulary once, then run the probes named on stdin."""
    import structgen
    from structgen.decoding.models import load_default_tokenizer

    spec = importlib.util.spec_from_file_location("_hostile_probes", module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    vocab = structgen.prepare_vocabulary(load_default_tokenizer())
    out = sys.stdout
    sys.stdout = sys.stderr  # what probes print must not mix with answers
    out.write(_MARK + "ready\n")
    out.flush()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    for name in sys.stdin:
        fn = module.PROBES[name.strip()].fn
        resource.setrlimit(resource.RLIMIT_AS, (_vsize() + MEMORY_LIMIT, hard))
        start = time.perf_counter()
        try:
            fn(vocab)
            got = {"kind": "ok"}
        except structgen.StructgenError as err:
            got = {"kind": "structgen", "type": type(err).__name__, "message": str(err)}
        except BaseException as err:  # noqa: BLE001 - the point is to report it
            tb = traceback.format_exception(type(err), err, err.__traceback__, limit=-6)
            got = {"kind": "builtin", "type": type(err).__name__, "message": "".join(tb)}
        got["seconds"] = time.perf_counter() - start
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        out.write(_MARK + json.dumps(got) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve(sys.argv[1])
