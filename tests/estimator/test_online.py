"""The online estimator: profiles, measurements replacing estimates, garbage rejected."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from gavel_ng.errors import InputError
from gavel_ng.estimator import EstimatorConfig, Measurement, ProfilePlan, ThroughputEstimator, profile_from_table

NEW = ("ResNet-50 (batch size 64)", 1)
OTHER = ("LM (batch size 20)", 1)
KNOWN = ("ResNet-18 (batch size 32)", 1)
CFG = EstimatorConfig(profile_fraction=0.3, rank=12, ridge=0.01, seed=1)


@pytest.fixture
def est(reference_table):
    e = ThroughputEstimator(reference_table, CFG, exclude_types=(NEW[0], OTHER[0]))
    for job, key in (("a", NEW), ("b", OTHER)):
        e.add_job(job, 1, profile_from_table(reference_table, key, e.plan_profile(1)))
    e.add_job("c", 1, known_key=KNOWN)
    e.add_job("d", 4)
    return e


def test_estimates_are_close_to_the_truth(est, reference_table):
    t = reference_table
    jobs, keys = ["a", "b", "c"], [NEW, OTHER, KNOWN]
    for w in ("k80", "p100", "v100"):
        P = est.pair_matrix(jobs, w)
        assert np.allclose(P[..., 0], P.transpose(1, 0, 2)[..., 1])       # (i, j) mirrors (j, i)
        assert (np.diag(P[..., 0]) == 0).all()
        for i in range(3):
            for j in range(3):
                true = t.get_pair(keys[i], keys[j], w)
                if i != j and P[i, j, 0] > 0 and min(true) > 0:
                    assert abs(math.log(P[i, j, 0] / true[0])) < math.log(2.0)
    # the known reference job is exact; profiled types are measured
    assert est.isolated("c", "k80") == pytest.approx(t.get(KNOWN, "k80"))
    assert est.pair("c", "a", "v100")[0] > 0
    assert est.isolated_matrix(["d"], ["v100"]).shape == (1, 1)
    assert est.pair_matrix(["a", "d"], "v100").sum() == 0                 # different scale factors



def test_one_sided_pair_measurements_learn_each_side(est):
    """A deployment sees each member's progress at its own times: sides arrive separately."""
    assert est.record(Measurement("a", "v100", 60.0, 60.0 * 1.5, partner="b"))
    assert est.pair("a", "b", "v100")[0] == pytest.approx(1.5)
    assert est.record(Measurement("b", "v100", 60.0, 60.0 * 20, partner="a"))
    assert est.pair("a", "b", "v100") == pytest.approx((1.5, 20.0))
    # a known reference partner measured on both sides refines the new job's fingerprint
    assert est.record(Measurement("a", "k80", 60.0, 60.0 * 0.2, partner="c"))
    assert est.record(Measurement("c", "k80", 60.0, 60.0 * 0.3, partner="a"))
    assert est.pair("a", "c", "k80") == pytest.approx((0.2, 0.3))

def test_measurements_replace_estimates_robustly(est):
    before = est.pair("a", "b", "v100")
    for _ in range(3):
        assert est.record(Measurement("a", "v100", 360.0, 360.0 * 1.5, partner="b", partner_steps=360.0 * 20))
    assert est.pair("a", "b", "v100") == pytest.approx((1.5, 20.0))
    assert est.pair("b", "a", "v100") == pytest.approx((20.0, 1.5))
    assert before != est.pair("a", "b", "v100")
    # one wild sample among good ones does not move the estimate
    est.record(Measurement("a", "v100", 360.0, 360.0 * 150, partner="b", partner_steps=360.0 * 0.01))
    assert est.pair("a", "b", "v100") == pytest.approx((1.5, 20.0))


def test_isolated_throughput_learned_online(reference_table):
    """A job that never ran anywhere: similar jobs' estimate, then its own measurement,
    and the ratio of similar jobs for the types it has not run on."""
    e = ThroughputEstimator(reference_table, CFG, exclude_types=(NEW[0],))
    v100_only = ProfilePlan(tuple(("v100", k) for k in e.pair_model(1).ref.keys), ("v100",))
    e.add_job("a", 1, profile_from_table(reference_table, NEW, v100_only))
    e.add_job("z", 2)                                                # nothing at all
    assert all(e.isolated("z", w) > 0 for w in ("k80", "p100", "v100"))
    assert e.isolated("a", "v100") == pytest.approx(reference_table.get(NEW, "v100"))
    for w in ("k80", "p100"):                                        # from similar jobs' ratios
        assert abs(math.log(e.isolated("a", w) / reference_table.get(NEW, w))) < math.log(1.5)
    e.record(Measurement("a", "p100", 360.0, 360.0 * 2.5))
    assert e.isolated("a", "p100") == pytest.approx(2.5)


@pytest.mark.parametrize("m, reason", [
    (Measurement("a", "v100", 0.0, 10.0), "zero duration"),
    (Measurement("a", "v100", 360.0, float("nan")), "not a finite number"),
    (Measurement("a", "v100", 360.0, -5.0), "must be positive"),
    (Measurement("a", "v100", float("inf"), 5.0), "not a finite number"),
    (Measurement("a", "v100", 360.0, 0.0), "must be positive"),
    (Measurement("a", "a100", 360.0, 10.0), "unknown worker type"),
    (Measurement("nobody", "v100", 360.0, 10.0), "unknown job"),
    (Measurement("a", "v100", 360.0, 10.0, partner="b", partner_steps=float("nan")), "partner_steps"),
    (Measurement("a", "v100", 360.0, 10.0, partner="d", partner_steps=3.0), "scale factors"),
])
def test_garbage_is_rejected_with_a_logged_reason(est, caplog, m, reason):
    before = (est.isolated("a", "v100"), est.pair("a", "b", "v100"))
    with caplog.at_level(logging.WARNING, logger="gavel_ng.estimator.online"):
        assert est.record(m) is False
    assert reason in caplog.text and "keeping the previous estimate" in caplog.text
    assert (est.isolated("a", "v100"), est.pair("a", "b", "v100")) == before
    assert est.rejected == 1


def test_pair_with_a_known_reference_refines_the_fingerprint(est, reference_table):
    fp = est.fingerprint("a")
    true = reference_table.get_pair(NEW, KNOWN, "k80")
    est.record(Measurement("a", "k80", 360.0, 360.0 * true[0], partner="c", partner_steps=360.0 * true[1]))
    assert est.fingerprint("a").observed.sum() >= fp.observed.sum()
    assert est.pair("a", "c", "k80") == pytest.approx(true)


def test_as_table_is_the_policy_view(est):
    table = est.as_table(["a", "b", "c", "d"])
    assert set(table.job_keys) == {("a", 1), ("b", 1), ("c", 1), ("d", 4)}
    assert table.get(("c", 1), "v100") == est.isolated("c", "v100")
    assert table.get_pair(("a", 1), ("b", 1), "v100") == est.pair("a", "b", "v100")
    assert table.get_pair(("a", 1), ("d", 4), "v100") is None
    est.remove_job("b")
    assert "b" not in est.jobs


def test_bad_config_and_duplicates(est):
    with pytest.raises(InputError):
        EstimatorConfig(profile_fraction=1.5)
    with pytest.raises(InputError):
        EstimatorConfig(source="magic")
    with pytest.raises(InputError):
        est.add_job("a", 1)
    with pytest.raises(InputError):
        est.isolated("a", "tpu")
