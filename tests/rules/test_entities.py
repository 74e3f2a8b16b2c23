"""A job's entity is one concept: quotas are keyed by it and the hierarchical policy shares the
cluster across it, in a simulation (trace rules column, SimConfig/--entities) and in the scheduler
service (job spec, cluster config), through the shared PolicyAllocator."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from gavel_ng.cli import main
from gavel_ng.cli.status_cmd import format_status
from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError
from gavel_ng.policies.input.entities import Entity
from gavel_ng.protocol.client import ClusterStatus
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.rules import JobRules
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.service import SchedulerService
from gavel_ng.runtime.status import read_state_dir
from gavel_ng.simulator.engine import SimConfig, simulate
from gavel_ng.throughputs import ThroughputTable
from gavel_ng.traces import Trace, write_trace

TYPE = "ResNet-18 (batch size 32)"
WEIGHTS = {"heavy": Entity(3.0), "light": Entity(1.0)}


def _trace(n: int = 8) -> Trace:
    """n identical 10-hour (on a V100) jobs at t=0, alternately of entity heavy and light."""
    return Trace([TYPE] * n, np.ones(n, dtype=np.int64), np.ones(n), np.full(n, 30.0 * 36000), np.full(n, math.inf),
                 np.zeros(n), [JobRules(entity="heavy" if i % 2 == 0 else "light") for i in range(n)])


def _gpu_rounds(policy: str, entities: dict) -> dict[str, int]:
    """GPU-rounds each entity held over the first 20 rounds (no job finishes that soon)."""
    trace, plans = _trace(), []
    simulate(Cluster({"v100": 4}), ThroughputTable.builtin("gavel-osdi20"), trace,
             SimConfig(policy=policy, window=(0, len(trace)), entities=entities), observe=plans.append)
    held = {"heavy": 0, "light": 0}
    for plan in plans[:20]:
        for key, gpus in zip(plan.keys, plan.gpus):
            for m in key:
                held[trace.rules[m].entity] += len(gpus)
    return held


def test_hierarchical_simulation_shares_gpu_time_by_entity_weight():
    hier = _gpu_rounds("hierarchical", WEIGHTS)
    las = _gpu_rounds("las", WEIGHTS)
    assert hier["heavy"] > 2 * hier["light"], hier          # weights 3:1 reach the policy
    assert 0.7 < las["heavy"] / las["light"] < 1.4, las      # las ignores entities


def test_undeclared_entity_is_refused_at_load_naming_the_job(tmp_path, capsys):
    with pytest.raises(InputError) as e:
        simulate(Cluster({"v100": 2}), ThroughputTable.builtin("gavel-osdi20"), _trace(),
                 SimConfig(policy="hierarchical", entities={"heavy": Entity(3.0)}))
    assert e.value.field == "trace job 1 rules.entity" and e.value.value == "light" and "--entities" in e.value.reason
    write_trace(_trace(4), tmp_path / "t.trace")
    (tmp_path / "ent.json").write_text(json.dumps({"heavy": {"weight": 3}}))
    args = ["simulate", "--trace", str(tmp_path / "t.trace"), "--cluster", "v100=2", "--throughputs",
            "gavel-osdi20", "--policy", "hierarchical", "--json"]
    assert main([*args, "--entities", str(tmp_path / "ent.json")]) == 2
    assert "trace job 1 rules.entity" in capsys.readouterr().err
    (tmp_path / "ent.json").write_text(json.dumps({"heavy": {"weight": 3}, "light": {"policy": "fifo"}}))
    (tmp_path / "rules.json").write_text(json.dumps({"quotas": {"other": {"v100": 1}}}))
    assert main([*args, "--entities", str(tmp_path / "ent.json"), "--rules", str(tmp_path / "rules.json")]) == 2
    assert "--rules.quotas" in capsys.readouterr().err                 # a quota names an entity, declared too
    assert main([*args, "--entities", str(tmp_path / "ent.json")]) == 0
    assert json.loads(capsys.readouterr().out)["jobs_measured"] == 4


def test_scheduler_service_passes_entities_to_the_policy(tmp_path):
    config = ClusterConfig(worker_types=("v100",), policy="hierarchical",
                           entities={"heavy": {"weight": 3}, "light": {}})
    svc = SchedulerService(config, tmp_path / "state", port=0, bind="127.0.0.1")
    try:
        svc.state.register(pb.RegisterWorkerRequest(worker_id="w", address="w:1", gpu_type="v100", gpus=2),
                           lambda address: (None, None))
        specs = [JobSpec(TYPE, steps=1000, size="tiny", rules=JobRules(entity=e))
                 for e in ("heavy", "light", "heavy", "light")]
        with svc.state.lock:
            svc.check_rules(specs)
            ids = svc.state.submit(specs)
        rows = svc.allocator.allocate(ids, time.time())
        share = {m: float(v.sum()) for (m,), v in zip(rows.rows, rows.X)}
        heavy, light = share[ids[0]] + share[ids[2]], share[ids[1]] + share[ids[3]]
        assert heavy == pytest.approx(1.5, rel=0.02) and light == pytest.approx(0.5, rel=0.05)   # 3 : 1
        with pytest.raises(InputError) as e:
            svc.check_rules([JobSpec(TYPE, steps=10, size="tiny", rules=JobRules(entity="nobody"))])
        assert e.value.field == "jobs[0].entity" and "cluster-config.entities" in e.value.reason
        shown = {j.job_id: j.entity for j in ClusterStatus.from_proto(svc.status()).jobs}   # status names it
        assert shown == dict(zip(ids, ("heavy", "light", "heavy", "light")))
        assert "entity heavy" in format_status(ClusterStatus.from_proto(svc.status()))
    finally:
        svc.stop(grace=0.1)
    assert {j.job_id: j.entity for j in read_state_dir(tmp_path / "state").jobs}[ids[1]] == "light"


def test_outputs_name_each_jobs_entity_and_the_summary_averages_jct_per_entity(tmp_path):
    from gavel_ng.simulator.metrics import write_outputs

    trace = _trace(4)
    trace.steps[:] = 30.0 * 3600          # one hour on a V100: the run ends
    result = simulate(Cluster({"v100": 2}), ThroughputTable.builtin("gavel-osdi20"), trace,
                      SimConfig(policy="hierarchical", window=(0, 4), entities=WEIGHTS))
    per = result.summary["entity_avg_jct_hours"]
    assert set(per) == {"heavy", "light"} and per["heavy"] < per["light"]    # weight 3 finishes first
    jobs_csv, _, _ = write_outputs(result, tmp_path)
    rows = jobs_csv.read_text().splitlines()
    assert rows[0].endswith(",entity") and [r.rsplit(",", 1)[1] for r in rows[1:]] == ["heavy", "light"] * 2


def test_hierarchical_without_entities_says_so_once(caplog):
    trace = _trace(2)
    trace.rules = []
    with caplog.at_level("WARNING"):
        simulate(Cluster({"v100": 1}), ThroughputTable.builtin("gavel-osdi20"), trace,
                 SimConfig(policy="hierarchical", window=(0, 2), max_sim_seconds=3600.0))
    said = [r for r in caplog.records if "none are declared" in r.getMessage()]
    assert len(said) == 1 and "hierarchical" in said[0].getMessage()


def test_a_sweep_point_takes_entities_and_rules_files(tmp_path):
    from gavel_ng.sweep import SweepPoint
    from gavel_ng.sweep.point import run_point

    trace = _trace(4)
    trace.steps[:] = 30.0 * 3600
    write_trace(trace, tmp_path / "t.trace")
    (tmp_path / "ent.json").write_text(json.dumps({"heavy": {"weight": 3}, "light": {}}))
    base = dict(trace=str(tmp_path / "t.trace"), cluster="v100=2", throughputs="gavel-osdi20", policy="hierarchical",
                window="0:4")
    done = run_point(SweepPoint(**base, entities=str(tmp_path / "ent.json")))
    assert done.ok, done.row["error"]
    jct = {e: [j["jct_s"] for j in done.jobs if j["entity"] == e] for e in ("heavy", "light")}
    assert len(jct["heavy"]) == len(jct["light"]) == 2 and max(jct["heavy"]) < min(jct["light"])
    (tmp_path / "rules.json").write_text(json.dumps({"quotas": {"nobody": {"v100": 1}}}))
    bad = run_point(SweepPoint(**base, entities=str(tmp_path / "ent.json"), rules=str(tmp_path / "rules.json")))
    assert not bad.ok and "rules.quotas" in bad.row["error"]
    assert SweepPoint(**base).point_id != SweepPoint(**base, entities="e.json").point_id
