"""Python's cyclic collector paused while structgen builds large structures.

Building a vocabulary's token index or compiling (or unpickling) a large schema allocates
10^5-10^6 container objects, which sets off collections over the whole heap, transformers and
the vocabulary included: measured on the largest Github_ultra schemas, 2-4x the compile time.
Gemma 3's 262k-token index took 0.87-0.90 s to build before this pause and a numpy
common-prefix table (:class:`~structgen.engine.vocab.TokenIndex`), 0.40 s after. What the work
drops is freed by reference counting; the collector runs again afterwards.

Example
-------
>>> import gc
>>> with gc_paused():
...     gc.isenabled()
False
>>> gc.isenabled()
True
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["gc_paused"]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for the duration (left off if it was off before)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
