"""What real runs teach the scheduler: isolated and in-pair rates, table and estimator.

ClusterState over a real SQLite store, with attempts made by hand (no processes): each
interval between two progress reports is an isolated sample if the job ran alone, an
in-pair sample if it shared its GPUs with its planned partner throughout, and nothing if
who shared them changed meanwhile. A restarted scheduler gets the same view back.
"""

from __future__ import annotations

import pytest

from gavel_ng.errors import InputError
from gavel_ng.estimator import ThroughputEstimator
from gavel_ng.profiles import default_table
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.runtime.config import ClusterConfig, validate_submission
from gavel_ng.runtime.jobs import Attempt
from gavel_ng.runtime.measured import MeasuredTable
from gavel_ng.runtime.state import ClusterState
from gavel_ng.runtime.store import Store

TYPES = ["v100", "p100", "k80"]
REC = JobSpec("Recommendation (batch size 512)", 1000, size="tiny")
LM = JobSpec("LM (batch size 20)", 1000, size="tiny")
GPU = [("w1", 0)]


def _state(tmp_path, estimator: bool) -> ClusterState:
    base = default_table(TYPES)
    config = ClusterConfig(worker_types=tuple(TYPES), estimator=estimator, space_sharing=True)
    st = ClusterState(config, Store(tmp_path), MeasuredTable(base, TYPES), "secret",
                      ThroughputEstimator(base) if estimator else None)
    st.restore()
    return st


def _launch(st: ClusterState, job_id: int, partner: int | None, placement=GPU) -> Attempt:
    job = st.jobs[job_id]
    job.attempts += 1
    att = Attempt(job_id, job.attempts, list(placement), "v100", True, 0.0, 1e12, job.steps_done, partner=partner)
    job.live = att
    st.attempt_started(att)
    return att


@pytest.mark.parametrize("estimator", [False, True])
def test_pair_and_isolated_rates_reach_the_policy_view(tmp_path, estimator):
    st = _state(tmp_path, estimator)
    rec, lm = st.submit([REC, LM])
    before = st.believed_pairs([rec, lm], st.believed_isolated([rec, lm])).frac[:, :, 0].copy()
    a, b = _launch(st, rec, lm), _launch(st, lm, rec)
    for k in (1, 2, 3):                                   # both ran together: in-pair samples
        st.progress(st.jobs[rec], a, 40 * k, 10.0 * k)   # 4 steps/s
        st.progress(st.jobs[lm], b, 10 * k, 10.0 * k)    # 1 step/s
    T = st.believed_isolated([rec, lm])
    frac = st.believed_pairs([rec, lm], T).frac[:, :, 0]
    assert frac[0, 1] * T[0, 0] == pytest.approx(4.0, rel=0.05)
    assert frac[1, 0] * T[1, 0] == pytest.approx(1.0, rel=0.05)
    assert (frac != before).any()
    assert st.table.measured()["Recommendation (batch size 512)|1|v100|with LM (batch size 20)"] == pytest.approx(4.0)
    # the partner's attempt ends: the interval that spans it measures nothing, the next is alone
    with st.cv:
        st._lose(b, "test")
    st.progress(st.jobs[rec], a, 200, 50.0)
    assert "Recommendation (batch size 512)|1|v100" not in st.table.measured()
    st.progress(st.jobs[rec], a, 300, 60.0)               # alone: 10 steps/s
    assert st.table.measured()["Recommendation (batch size 512)|1|v100"] == pytest.approx(10.0)
    assert st.believed_isolated([rec])[0, 0] == pytest.approx(10.0)

    # a restarted scheduler sees the same rates
    st.store.close()
    again = _state(tmp_path, estimator)
    assert again.table.measured() == pytest.approx(st.table.measured())
    if estimator:
        T2 = again.believed_isolated([rec, lm])
        assert again.believed_pairs([rec, lm], T2).frac[0, 1, 0] * T2[0, 0] == pytest.approx(4.0, rel=0.05)


def test_an_unplanned_neighbour_spoils_the_interval(tmp_path):
    st = _state(tmp_path, False)
    rec, lm, other = st.submit([REC, LM, JobSpec("ResNet-18 (batch size 32)", 100, size="tiny")])
    a = _launch(st, rec, None)
    _launch(st, other, None)                              # not planned to share: a's interval is mixed
    st.progress(st.jobs[rec], a, 50, 10.0)
    assert st.table.measured() == {}


def test_a_class_of_its_own_needs_a_command():
    """Any job_type is a class; one the table lacks needs the argv of its script. With the full
    estimator, an undeclared class needs reference jobs at its scale factor."""
    table = MeasuredTable(default_table(TYPES), TYPES)
    custom = JobSpec("my model", 10, command=("python", "train.py"))
    validate_submission(custom, table, TYPES, "jobs[0]")
    validate_submission(custom, table, TYPES, "jobs[0]", estimated=True)
    with pytest.raises(InputError, match=r"jobs\[0\]\.command"):
        validate_submission(JobSpec("my model", 10), table, TYPES, "jobs[0]")
    odd = JobSpec("my model", 10, scale_factor=3, command=("x",))
    validate_submission(odd, table, TYPES, "jobs[0]")
    with pytest.raises(InputError, match=r"jobs\[0\]\.scale_factor"):
        validate_submission(odd, table, TYPES, "jobs[0]", estimated=True)


def test_config_flags_must_be_booleans(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"space_sharing": "yes"}')
    with pytest.raises(InputError, match="cluster-config.space_sharing"):
        ClusterConfig.load(path)
