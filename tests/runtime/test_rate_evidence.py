"""What jobs report about speed is evidence, not truth (runtime.measured.consensus): one source moves a table
class at most SINGLE_SOURCE_BAND while it is alone, two others outvote it, and the sources survive a restart."""

from __future__ import annotations

import pytest

from gavel_ng.runtime.measured import SINGLE_SOURCE_BAND, SOURCES_KEPT, MeasuredTable, consensus
from gavel_ng.runtime.store import Store
from gavel_ng.runtime.tables import cluster_table

R18 = ("ResNet-18 (batch size 32)", 1)
TYPES = ["v100", "p100", "k80"]


def _table() -> MeasuredTable:
    return MeasuredTable(cluster_table(TYPES, None), TYPES)


def test_consensus_is_a_median_with_the_table_as_tie_breaker():
    assert consensus([500.0], 20.0) == 20.0 * SINGLE_SOURCE_BAND           # alone: within the band of the table
    assert consensus([30.0], 20.0) == 30.0
    assert consensus([500.0], 20.0, vouched=False) == 500.0                # a user's declaration vouches for nothing
    assert consensus([22.0, 10_000.0], 20.0) == 22.0                       # two: the table breaks the tie
    assert consensus([22.0, 25.0, 10_000.0], 20.0) == 25.0                 # three: the liar is outvoted
    assert consensus([4.0, 16.0], None) == pytest.approx(8.0)              # no prior: geometric mean


def test_one_liar_moves_a_class_little_and_is_outvoted_once_others_measure():
    t = _table()
    base = t.base.get(R18, "v100")
    for _ in range(20):                                                     # it insists
        t.record(*R18, "v100", True, 535 * base, source="user:mallory")
    assert t.row(R18)[0] == pytest.approx(SINGLE_SOURCE_BAND * base)
    t.record(*R18, "v100", True, 1.1 * base, source="user:alice")
    assert t.row(R18)[0] == pytest.approx(1.1 * base)                       # the table breaks the tie
    t.record(*R18, "v100", True, 0.9 * base, source="user:bob")
    assert t.row(R18)[0] == pytest.approx(1.1 * base)                       # median of alice, bob, mallory
    assert t.sources(R18)["v100"] == "measured"


def test_sources_are_bounded_and_survive_a_restart(tmp_path):
    store = Store(tmp_path)
    t = _table()
    base = t.base.get(R18, "v100")
    for i in range(SOURCES_KEPT + 4):
        key4 = (*R18, "v100", True)
        value = t.record(*R18, "v100", True, base * (1 + i / 100), source=f"job:{i}")
        store.save_throughput(*key4, *value)
        store.save_rate_source(*key4, f"job:{i}", *t.by_source[key4][f"job:{i}"])
        store.delete_rate_sources(*key4, t.evicted.pop(key4, []))
    assert len(t.by_source[(*R18, "v100", True)]) == SOURCES_KEPT
    again = _table()
    again.load(store.load_throughputs())
    again.load_sources(store.load_rate_sources())
    assert again.by_source == t.by_source and again.row(R18)[0] == pytest.approx(t.row(R18)[0])
    legacy = _table()                                                       # a state from before sources were kept
    legacy.load([(R18[0], 1, "v100", True, 1000 * base, 50)])
    assert legacy.row(R18)[0] == pytest.approx(SINGLE_SOURCE_BAND * base)   # its (maybe poisoned) rate: one source
    store.close()
