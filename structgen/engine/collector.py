"""Python's cyclic collector paused while structgen builds large structures.

Building a vocabulary's token index or compiling (or unpickling) a large schema allocates
10^5-10^6 container objects, which sets off collections over the whole heap, transformers and
the vocabulary included: measured on the largest Github_ultra schemas, 2-4x the compile time.
Gemma 3's 262k-token index took 0.87-0.90 s to build before this pause and a numpy
common-prefix table (:class:`~structgen.engine.vocab.TokenIndex`), 0.40 s after. What the work
drops is freed by reference counting; what it keeps joins the oldest generation, and the
collector runs again afterwards.

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
    """The cyclic collector off for the duration (left off if it was off before); what the work
    made and kept then goes to the collector's oldest generation (:func:`_promote_young`)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            _promote_young()
            gc.enable()


def _promote_young() -> None:
    """Move every object the collector tracks into its oldest generation, without a collection.

    Re-enabled after a pause, the collector would first walk everything the work allocated
    and kept (a compiled grammar and the caches it filled are ~10^5 objects): 50-70 ms of a
    ~700 ms Github_ultra compile. They are long-lived, so the oldest generation is where those
    walks would move them anyway. ``gc.freeze()`` then ``gc.unfreeze()`` does that in constant
    time; skipped in a process that froze objects of its own (a pre-fork server), which
    ``unfreeze`` would thaw. Counting the frozen objects walks them (30 ms for 340,000), so a
    process found to have some is remembered and not counted again.
    """
    global _froze
    if _froze:
        return
    if gc.get_freeze_count():  # nothing frozen: an empty list, counted at once
        _froze = True
        return
    gc.freeze()
    gc.unfreeze()


#: The process was found with frozen objects (see :func:`_promote_young`).
_froze = False
