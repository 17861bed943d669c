"""The collector pause around compiles (structgen.engine.collector): what the work kept joins
the oldest generation without a collection, and a process's own frozen objects stay frozen."""

import gc

from structgen.engine import collector
from structgen.engine.collector import gc_paused


def test_what_a_pause_kept_joins_the_oldest_generation_without_a_collection(monkeypatch):
    monkeypatch.setattr(collector, "_froze", False)
    gc.collect()
    collections_before = [s["collections"] for s in gc.get_stats()]
    with gc_paused():
        kept = [[i] for i in range(5000)]  # far past the youngest generation's threshold (700)
    assert gc.isenabled()
    oldest = {id(x) for x in gc.get_objects(generation=2)}
    assert all(id(x) in oldest for x in kept)
    assert not any(id(x) in oldest for x in gc.get_objects(generation=0))
    assert gc.get_count()[0] < 700  # nothing left for the next allocation to walk
    assert [s["collections"] for s in gc.get_stats()] == collections_before


def test_a_pause_leaves_a_process_s_frozen_objects_frozen(monkeypatch):
    monkeypatch.setattr(collector, "_froze", False)
    gc.collect()
    gc.freeze()  # as a pre-fork server does
    try:
        frozen = gc.get_freeze_count()
        for _ in range(2):
            with gc_paused():
                kept = [[i] for i in range(100)]
            assert gc.get_freeze_count() == frozen  # not thawed: its objects stay out of collections
            assert gc.isenabled() and len(kept) == 100
        assert collector._froze  # remembered: counting frozen objects walks them all
    finally:
        gc.unfreeze()


def test_a_pause_inside_a_pause_leaves_the_collector_off_until_the_outer_one_ends():
    with gc_paused():
        with gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
