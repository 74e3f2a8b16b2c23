"""Jobs of any class: a job's `job_type` may be a name of its own; its rates are its own row
(measured, else declared, else estimated from similar reference jobs), never another class's."""

from __future__ import annotations

import json
import math

import pytest
from service_helpers import register

from gavel_ng.errors import InputError
from gavel_ng.profiles import default_table
from gavel_ng.protocol.client import ClusterStatus
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.runtime.config import ClusterConfig, validate_submission
from gavel_ng.runtime.measured import MeasuredTable
from gavel_ng.runtime.service import SchedulerService
from gavel_ng.runtime.status import read_state_dir

TYPES = ["v100", "p100", "k80"]
R18 = ("ResNet-18 (batch size 32)", 1)
MINE = ("my-mlp", 1)


def test_a_class_of_its_own_is_measured_in_its_own_row():
    t = MeasuredTable(default_table(TYPES), TYPES)
    before = t.row(R18).copy()
    guess = t.row(MINE)                           # nothing known yet: the reference jobs stand in
    assert (guess > 0).all() and t.sources(MINE) == dict.fromkeys(TYPES, "estimated")
    t.record(*MINE, "v100", True, 80.0)
    row = t.row(MINE)
    assert row[0] == 80.0 and (row[1:] > 0).all()
    assert t.sources(MINE) == {"v100": "measured", "p100": "estimated", "k80": "estimated"}
    assert (t.row(R18) == before).all() and not any(k[0] == R18[0] for k in t.values)
    # the estimate for the other types moves with the measurement (similar jobs' speed ratios)
    assert row[1] / row[0] == pytest.approx(guess[1] / guess[0], rel=0.5)


def test_declared_rates_scale_with_what_is_measured():
    t = MeasuredTable(default_table(TYPES), TYPES)
    t.declare(MINE, {"v100": 40.0, "k80": 10.0})
    assert t.row(MINE)[[0, 2]].tolist() == [40.0, 10.0]
    assert t.sources(MINE) == {"v100": "declared", "p100": "estimated", "k80": "declared"}
    t.declare(MINE, {"v100": 1.0})                # the first declaration of a class holds
    t.record(*MINE, "v100", True, 80.0)           # measured twice the declaration: so is k80, likely
    row = t.row(MINE)
    assert row[0] == 80.0 and row[2] == pytest.approx(20.0) and 0 < row[1]
    assert t.sources(MINE)["k80"] == "declared" and t.sources(MINE)["v100"] == "measured"
    t.declare(("zero", 1), {"v100": 5.0, "k80": 0.0})   # 0: cannot run there
    assert t.row(("zero", 1))[2] == 0.0


def test_submission_checks_of_declared_rates():
    t = MeasuredTable(default_table(TYPES), TYPES)
    cmd = ("python", "train.py")
    validate_submission(JobSpec("my-mlp", 10, command=cmd, throughputs={"v100": 3.0}), t, TYPES, "jobs[0]")
    with pytest.raises(InputError, match=r"jobs\[0\]\.throughputs.*job type of the throughput table"):
        validate_submission(JobSpec(R18[0], 10, throughputs={"v100": 3.0}), t, TYPES, "jobs[0]")
    with pytest.raises(InputError, match=r"jobs\[0\]\.throughputs='a100': not a worker type of this cluster"):
        validate_submission(JobSpec("my-mlp", 10, command=cmd, throughputs={"a100": 3.0}), t, TYPES, "jobs[0]")
    t.declare(MINE, {"v100": 3.0})
    with pytest.raises(InputError, match="was declared with"):
        validate_submission(JobSpec("my-mlp", 10, command=cmd, throughputs={"v100": 4.0}), t, TYPES, "jobs[0]")
    for bad in ({"v100": -1.0}, {"v100": math.inf}, {"v100": 0.0}, {"v100": "fast"}):
        with pytest.raises(InputError, match=r"jobs\[0\]\.throughputs"):
            JobSpec.from_dict({"job_type": "x", "steps": 1, "command": ["a"], "throughputs": bad}, "jobs[0]")


def test_status_shows_each_class_and_the_source_of_its_rates(make_service, tmp_path):
    svc = make_service()
    register(svc, "w1", "v100", 1)
    cmd = ("python", "t.py")
    ids = svc.state.submit([JobSpec(R18[0], 100), JobSpec("my-mlp", 100, command=cmd, throughputs={"k80": 9.0}),
                            JobSpec("their-gan", 100, command=cmd)])
    svc.table.record(*MINE, "v100", True, 70.0)
    svc._save_classes()
    for st in (ClusterStatus.from_proto(svc.status()), read_state_dir(tmp_path / "state")):
        got = {c.job_type: c for c in st.classes}
        assert set(got) == {R18[0], "my-mlp", "their-gan"}, st.source
        assert got["my-mlp"].sources == {"v100": "measured", "p100": "estimated", "k80": "declared"}
        assert got["my-mlp"].rates["v100"] == 70.0 and got["my-mlp"].rates["k80"] == pytest.approx(9.0)
        assert set(got["their-gan"].sources.values()) == {"estimated"}
        assert set(got[R18[0]].sources.values()) == {"table"}
    from gavel_ng.cli.status_cmd import format_status

    text = format_status(ClusterStatus.from_proto(svc.status()))
    assert "job classes (steps/s the policy believes" in text
    assert any(line.split()[:1] == ["my-mlp"] and "70 m" in line and "9 d" in line for line in text.splitlines())
    assert len(ids) == 3


def test_a_worker_type_without_rates_names_the_field_and_writes_nothing(tmp_path):
    state = tmp_path / "state"
    with pytest.raises(InputError) as err:
        SchedulerService(ClusterConfig(worker_types=("v100", "l4"), round_seconds=1.0), state, port=0,
                         bind="127.0.0.1")
    text = str(err.value)
    assert text.startswith("cluster-config.worker_types='l4': no throughputs for this GPU type")
    assert "cluster-config.throughputs" in text and "gavel-ng profiles export" in text
    assert not state.exists()                      # no token, no database before the config is valid


def test_duplicate_worker_types_are_refused(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"worker_types": ["v100", "k80", "V100"]}))
    with pytest.raises(InputError, match=r"cluster-config.worker_types='v100': listed twice"):
        ClusterConfig.load(path)
    with pytest.raises(InputError, match="listed twice"):
        ClusterConfig(worker_types=("v100", "v100")).check()


def test_a_new_gpu_type_from_a_partial_table(make_service, tmp_path):
    """L4 rates for three reference jobs in a CSV beside the modeled V100: the estimator fills the
    L4 rates of every other job from the similar ones; a job then runs there."""
    model = default_table(["t4"])        # stand-in measurements of a GPU the model does not name
    rows = ["job_type,scale_factor,worker_type,throughput"]
    for key in [("ResNet-18 (batch size 32)", 1), ("LM (batch size 20)", 1), ("Transformer (batch size 64)", 1)]:
        rows.append(f"{key[0]},{key[1]},l4,{model.get(key, 't4')}")
    (tmp_path / "l4.csv").write_text("\n".join(rows) + "\n")
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"worker_types": ["v100", "l4"], "throughputs": ["l4.csv"], "round_seconds": 1}))
    config = ClusterConfig.load(path)
    assert config.throughputs == (str(tmp_path / "l4.csv"),)
    svc = make_service(**{k: getattr(config, k) for k in ("worker_types", "throughputs")})
    base = svc.table.base
    keys = base.job_keys
    assert all(base.get(k, "v100") >= 0 and k in base.isolated["l4"] for k in keys)
    resnet50 = ("ResNet-50 (batch size 64)", 1)
    assert base.get(resnet50, "l4") > 0            # estimated from the three measured ones
    assert base.get(("LM (batch size 20)", 1), "l4") == model.get(("LM (batch size 20)", 1), "t4")
    register(svc, "w-l4", "l4", 1)
    [job] = svc.state.submit([JobSpec(resnet50[0], 100)])
    assert svc.cannot_run(svc.state.jobs[job].spec) is None


def test_a_progress_report_between_renewals_shows_in_status_and_changes_nothing_else(make_service):
    """The iterator's step between renewals: status shows it; nothing is measured, stored or renewed."""
    import time

    from gavel_ng.runtime.jobs import Attempt

    svc = make_service()
    register(svc, "w1", "v100", 1)
    [job] = svc.state.submit([JobSpec("my-mlp", 1000, command=("python", "t.py"))])
    st = svc.state
    with st.lock:
        now = time.time()
        att = Attempt(job, 1, [("w1", 0)], "v100", True, now - 5, now + 60, 0)
        st.jobs[job].attempts, st.jobs[job].live, st.jobs[job].status = 1, att, "running"
        st.attempt_started(att)
    events = len(st.store.events())
    lease = svc.executor.update_lease(job, 1, steps=250, compute_seconds=3.0, progress_only=True)
    assert not lease.renewed and not lease.stop and lease.seconds_left > 50
    assert ClusterStatus.from_proto(svc.status()).jobs[0].steps_live == 250
    assert len(st.store.events()) == events and svc.table.values == {}
    assert st.store.load_jobs()[0].steps_live == 0          # memory only: the state keeps renewals' steps
