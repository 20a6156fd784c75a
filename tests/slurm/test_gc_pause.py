"""The collector's pause around a poll (slurm/record_pack.py ``gc_paused``): pauses nest and overlap
across threads, and the collector comes back as it was only when the last one ends."""

import gc
import threading

import pytest

from slurm.record_pack import gc_paused


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_nested_pauses_turn_it_on_only_when_the_outer_one_ends(collector_on):
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause ending leaves the outer one's
    assert gc.isenabled()


def test_overlapping_pauses_of_two_threads(collector_on):
    """A poll of one cluster ending never turns the collector on under the other's, whichever ends first."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with gc_paused():
            first_in.set()
            assert second_in.wait(10)
        first_out.set()

    def second():
        assert first_in.wait(10)
        with gc_paused():
            second_in.set()
            assert first_out.wait(10)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first ended": False}
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
