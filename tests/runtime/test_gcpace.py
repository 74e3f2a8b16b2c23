"""The scheduler's collector pacing (runtime.gcpace): survivors frozen out of the collector's passes, and a
full pass, at a quiet moment, that reclaims a cycle which became garbage after it was frozen."""

from __future__ import annotations

import gc
import weakref

from gavel_ng.runtime.gcpace import GcPacer


class Node:
    pass


def test_survivors_are_frozen_and_a_quiet_full_pass_reclaims_a_frozen_cycle():
    now = [0.0]
    pacer = GcPacer(freeze_s=10.0, full_s=100.0, clock=lambda: now[0])
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a                      # a cycle
        gone = weakref.ref(a)
        now[0] = 10.0
        pacer.tick(quiet=False)
        assert gc.get_freeze_count() > 0             # the state so far is out of the collector's reach
        del a, b
        gc.collect()
        assert gone() is not None                    # frozen: no pass sees the cycle
        now[0] = 99.0
        pacer.tick(quiet=True)
        assert pacer.passes == 0 and gone() is not None   # not due yet
        now[0] = 150.0
        pacer.tick(quiet=False)
        assert pacer.passes == 0 and gone() is not None   # due, but only at a quiet moment
        pacer.tick(quiet=True)
        assert pacer.passes == 1 and gone() is None       # the full pass walked the frozen objects too
    finally:
        gc.unfreeze()
