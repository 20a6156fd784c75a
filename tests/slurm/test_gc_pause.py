"""The collector's pause around a poll (slurm/record_pack.py ``gc_paused``): pauses nest and overlap
across threads, the collector comes back as it was only when the last one ends, and overlapping pauses
never keep it off for longer than ``GC_MAX_OFF_S`` without a collection."""

import gc
import threading

import pytest

from slurm import record_pack
from slurm.record_pack import gc_paused


def test_nested_pauses_turn_it_on_only_when_the_outer_one_ends(collector_on):
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause ending leaves the outer one's
    assert gc.isenabled()


@pytest.mark.parametrize("ends_first", ["the first begun", "the second begun"])
def test_overlapping_pauses_of_two_threads(collector_on, ends_first):
    """A poll of one cluster ending never turns the collector on under the other's, whichever ends first."""
    both_in = threading.Barrier(3)
    one_out, seen = threading.Event(), {}
    first_ends = ends_first == "the first begun"

    def pause(ends_early: bool, began: threading.Event | None, begin: threading.Event):
        if began is not None:
            assert began.wait(10)
        with gc_paused():
            begin.set()
            both_in.wait(10)
            if not ends_early:
                assert one_out.wait(10)
                seen["while the other's pause had ended"] = gc.isenabled()
        if ends_early:
            one_out.set()

    first_began, second_began = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=pause, args=(first_ends, None, first_began)),
        threading.Thread(target=pause, args=(not first_ends, first_began, second_began)),
    ]
    for t in threads:
        t.start()
    both_in.wait(10)
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert seen == {"while the other's pause had ended": False}
    assert gc.isenabled()


def test_a_collector_already_off_stays_off(collector_on):
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_exception_inside_still_ends_the_pause(collector_on):
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("a poll failed")
    assert gc.isenabled()


def test_pauses_that_keep_overlapping_still_collect_after_the_longest_time_off(collector_on, monkeypatch):
    """One pause held open (a poll stuck on a call) while others begin and end: past GC_MAX_OFF_S, one of
    them runs a young collection, which frees the cycles made meanwhile; before it, none."""
    now = [1000.0]
    monkeypatch.setattr(record_pack, "_clock", lambda: now[0])
    collections = []
    monkeypatch.setattr(record_pack.gc, "collect", lambda generation=2: collections.append(generation) or 0)
    with gc_paused():
        now[0] += record_pack.GC_MAX_OFF_S - 1
        with gc_paused():
            pass
        assert collections == []
        now[0] += 2
        with gc_paused():
            pass
        assert collections == [1]  # once: the clock starts again from it
        assert not gc.isenabled()
    assert gc.isenabled()
