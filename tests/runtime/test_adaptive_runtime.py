"""Adaptive jobs in the scheduler: reports are checked, kept in SQLite across a restart, and
decide how many GPUs the `goodput` round policy gives a job once it has reported (runtime.rounds).

ClusterState over a real SQLite store with one registered 2-GPU worker; no processes (the
loopback test, tests/worker/test_adaptive_cluster.py, runs the real thing).
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from gavel_ng.assembly import Keep, World, assemble, runs_adaptive
from gavel_ng.cli.status_cmd import format_status
from gavel_ng.errors import InputError
from gavel_ng.policies import get_policy
from gavel_ng.policies.rounds.configurations import STARVED
from gavel_ng.profiles import default_table
from gavel_ng.protocol.client import AdaptiveStatus, JobStatus
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.runtime.adaptive import AdaptiveReport, note_launch
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.jobs import Attempt
from gavel_ng.runtime.measured import MeasuredTable
from gavel_ng.runtime.rounds import ClusterRounds, ClusterSource
from gavel_ng.runtime.state import ClusterState, Registration
from gavel_ng.runtime.status import read_state_dir
from gavel_ng.runtime.store import Store

ADA = JobSpec.from_dict({"job_type": "ResNet-18 (batch size 32)", "steps": 1000, "command": ["train.py"],
                         "adaptive": {"init_batch": 32, "max_batch": 512, "max_gpus": 2}})


def _state(tmp_path) -> ClusterState:
    config = ClusterConfig(worker_types=("v100",), policy="goodput", realloc_delay_seconds=0.0)
    st = ClusterState(config, Store(tmp_path), MeasuredTable(default_table(["v100"]), ["v100"]), "secret")
    st.restore()
    st.register(Registration("w1", "127.0.0.1:1", "v100", 2), lambda address: (None, None))
    return st


def _planner(st: ClusterState, name: str, jobs: list[int], options: dict | None = None) -> ClusterRounds:
    """The round policy's planner as the service builds it, told of `jobs` (what SchedulerLoop does)."""
    spec = get_policy(name)
    topology, gpu_map, version = st.topology()
    world = World(topology, time.time, st, st.throughputs, ClusterSource(st, adapts=runs_adaptive(spec)), st.capacity,
                  options=options or {})
    planner = assemble(spec, world, Keep(None, lambda p: ClusterRounds(st, p, gpu_map, version))).planner
    planner.arrive(jobs)
    return planner


def _gpus_planned(st: ClusterState, job: int) -> int:
    policy = _planner(st, "goodput", [job])
    plan = policy.plan(time.time())
    assert plan.num_entries == 1 and int(plan.member_job[0]) == job
    assert all(w == "w1" for w, _ in policy.placement(plan, 0))
    return len(plan.gpus[0])


def _report(alpha_local: float, **kw) -> pb.AdaptiveReport:
    fields = dict(gpus=1, servers=1, batch=64, local_batch=64, accumulation=0, phi=500.0, goodput=900.0,
                  params=[0.02, 2e-4, alpha_local, 0.0, alpha_local, 0.0, 1.0], fit_error=0.01, max_local_batch=512)
    return pb.AdaptiveReport(**{**fields, **kw})


def test_reports_decide_the_gpu_count_and_survive_a_restart(tmp_path):
    st = _state(tmp_path)
    (job,) = st.submit([ADA])
    # no report yet: the modeled ResNet-18 profile scales to both GPUs of the worker
    assert _gpus_planned(st, job) == 2
    # it reports a synchronization far slower than its step: one GPU is better
    att = Attempt(job, 1, [("w1", 0)], "v100", True, time.time(), time.time() + 60, 0)
    st.jobs[job].live = att
    with st.lock:
        note_launch(st.store, st.jobs[job], "v100", 1, 1)
        st.progress(st.jobs[job], att, 100, 5.0, AdaptiveReport.from_proto(_report(1.0), "", time.time()))
    assert st.jobs[job].report.worker_type == "v100"
    assert _gpus_planned(st, job) == 1
    # ... or one as fast as the model's: both again
    with st.lock:
        st.progress(st.jobs[job], att, 200, 10.0, AdaptiveReport.from_proto(_report(1e-4), "", time.time()))
    assert _gpus_planned(st, job) == 2
    with st.lock:
        note_launch(st.store, st.jobs[job], "v100", 2, 2)
    assert st.jobs[job].resizes == 1
    assert [e["detail"]["after"] for e in st.store.events("resize")] == [["v100", 2]]

    # a restarted scheduler (and status --state) has the last report and the resize count
    kept = st.jobs[job].report
    again = _state(tmp_path)
    assert again.jobs[job].report == kept and again.jobs[job].resizes == 1
    assert again.jobs[job].last_config == ("v100", 2)
    shown = next(j for j in read_state_dir(tmp_path).jobs if j.job_id == job).adaptive
    assert shown == AdaptiveStatus.from_report(1, kept.to_dict())
    assert shown.batch == 64 and shown.phi == 500.0
    text = format_status(read_state_dir(tmp_path), show_all=True)
    assert "adaptive jobs (last report)" in text
    row = next(line for line in text.splitlines()[text.splitlines().index("adaptive jobs (last report)"):]
               if line.strip().startswith(str(job)))
    assert row.split()[1:5] == ["v100", "1", "64", "64"] and row.split()[-1] == "1"


@pytest.mark.parametrize("field, value", [("batch", 0), ("gpus", -1), ("accumulation", -2),
                                          ("phi", float("nan")), ("params", [1.0, 2.0])])
def test_a_malformed_report_is_refused_naming_the_field(field, value):
    with pytest.raises(InputError, match=f"report.{field}"):
        AdaptiveReport.from_proto(_report(0.1, **{field: value}), "", 0.0)


def test_fixed_jobs_keep_their_scale_factor_beside_adaptive_ones(tmp_path):
    st = _state(tmp_path)
    ada, fixed = st.submit([ADA, JobSpec("ResNet-18 (batch size 32)", 100, size="tiny")])
    # a waiting job counted as Pollux's near-zero speedup: the p-mean starves nobody
    plan = _planner(st, "goodput", [ada, fixed], {"waiting": STARVED}).plan(time.time())
    got = {int(plan.member_job[e]): len(plan.gpus[e]) for e in range(plan.num_entries)}
    assert got == {ada: 1, fixed: 1}


def test_the_cluster_config_refuses_what_a_round_policy_cannot_do():
    with pytest.raises(InputError, match="cluster-config.space_sharing.*goodput is a round policy"):
        ClusterConfig(policy="goodput", space_sharing=True).check()
    with pytest.raises(InputError, match="cluster-config.policy_options='q'.*takes p, restart_factor"):
        ClusterConfig(policy="goodput", policy_options={"q": 1}).check()
    with pytest.raises(InputError, match="cluster-config.policy_options='p': unknown; las takes no options"):
        ClusterConfig(policy="las", policy_options={"p": 1}).check()
    ClusterConfig(policy="pollux", rules={"one_distributed_per_server": True}, estimator=True).check()
    with pytest.raises(InputError, match="realloc_delay_seconds"):
        ClusterConfig(policy="goodput", realloc_delay_seconds=-1).check()


def test_goodput_agnostic_places_jobs_on_live_workers_of_two_types(tmp_path):
    types = ["v100", "k80"]
    config = ClusterConfig(worker_types=tuple(types), policy="goodput_agnostic")
    st = ClusterState(config, Store(tmp_path), MeasuredTable(default_table(types), types), "secret")
    st.restore()
    st.register(Registration("a", "127.0.0.1:1", "v100", 2), lambda address: (None, None))
    jobs = st.submit([ADA, ADA, JobSpec("ResNet-18 (batch size 32)", 100, size="tiny")])
    policy = _planner(st, "goodput_agnostic", jobs)
    assert sum(len(g) for g in policy.plan(time.time()).gpus) == 2          # one worker: its two GPUs
    st.register(Registration("b", "127.0.0.1:2", "k80", 4), lambda address: (None, None))   # a worker joins
    plan = policy.plan(time.time())
    placed = [policy.placement(plan, e) for e in range(plan.num_entries)]
    assert sorted(int(m) for m in plan.member_job) == sorted(jobs)
    gpus = [g for p in placed for g in p]
    assert len(gpus) == len(set(gpus)) <= 6 and {w for w, _ in gpus} <= {"a", "b"}
    assert all(len({w for w, _ in p}) == 1 for p in placed)       # each job on one worker's GPUs


def test_a_running_job_keeps_its_gpus_under_a_new_planner(tmp_path):
    """After a scheduler restart the planner knows nothing of last round: the live attempt says where
    the job runs, and the job stays there (a renewal, no resize)."""
    st = _state(tmp_path)
    ada, fixed = st.submit([ADA, JobSpec("ResNet-18 (batch size 32)", 100, size="tiny")])
    st.jobs[fixed].live = Attempt(fixed, 1, [("w1", 0)], "v100", True, time.time(), time.time() + 60, 0)
    st.jobs[ada].live = Attempt(ada, 1, [("w1", 1)], "v100", True, time.time(), time.time() + 60, 0)
    # (no re-allocation delay here, so no restart factor: a waiting job at Pollux's near-zero speedup keeps
    # both jobs running, where the default would give the adaptive job the fixed job's GPU)
    policy = _planner(st, "goodput", [ada, fixed], {"waiting": STARVED})
    plan = policy.plan(time.time())
    got = {int(plan.member_job[e]): (policy.placement(plan, e), bool(plan.renewed[e])) for e in range(plan.num_entries)}
    assert got == {ada: ([("w1", 1)], True), fixed: ([("w1", 0)], True)}


def test_status_shows_the_gpus_an_adaptive_job_holds_now(tmp_path):
    """The count comes from the running attempt's placement (a structured field), in the offline
    view of the state directory and through JobInfo as the live status RPC sends it."""
    st = _state(tmp_path)
    (job,) = st.submit([ADA])
    st.store.add_attempt(job, 1, [("w1", 0), ("w1", 1)], "v100", time.time(), 0)

    def gpus_column(status) -> str:
        text = format_status(status, show_all=True)
        return next(line for line in text.splitlines() if line.strip().startswith(f"{job} ")).split()[5]

    offline = read_state_dir(tmp_path)
    assert next(j for j in offline.jobs if j.job_id == job).gpus == 2
    assert gpus_column(offline) == "2"
    info = pb.JobInfo(job_id=job, spec=ADA.to_proto(), status="running", placement="v100 w1:0,1 w2:3", gpus=3)
    live = dataclasses.replace(offline, jobs=[JobStatus.from_proto(info)])
    assert live.jobs[0].gpus == 3 and gpus_column(live) == "3"


def test_a_round_policy_keeps_the_rules_and_its_declared_jobs(make_service):
    """No allocation to solve; a job's allowed types hold (its rates elsewhere are 0), server rules go to the
    placer, and a policy that runs adaptive jobs only refuses a fixed one at submission."""
    svc = make_service(worker_types=("v100", "k80"), policy="goodput", rules={"one_distributed_per_server": True})
    assert svc.allocator is None and svc.planner.placer.rules is not None
    st = svc.state
    st.register(Registration("a", "127.0.0.1:1", "v100", 2), lambda address: (None, None))
    st.register(Registration("b", "127.0.0.1:2", "k80", 2), lambda address: (None, None))
    only_k80 = JobSpec.from_dict({"job_type": "ResNet-18 (batch size 32)", "steps": 100, "size": "tiny",
                                  "allowed_types": ["K80"]})
    jobs = st.submit([only_k80, ADA])
    svc.planner.arrive(jobs)
    plan = svc.planner.plan(time.time())
    where = {int(plan.member_job[e]): {w for w, _ in svc.planner.placement(plan, e)} for e in range(plan.num_entries)}
    assert where[jobs[0]] == {"b"}
    svc.check_policy_jobs(only_k80, "jobs[0]")
    with pytest.raises(InputError, match=r"jobs\[0\].preferred_types"):
        svc.check_policy_jobs(dataclasses.replace(only_k80, rules=dataclasses.replace(
            only_k80.rules, preferred_types=("v100",))), "jobs[0]")
    pollux = make_service("pollux", policy="pollux")
    pollux.check_policy_jobs(ADA, "jobs[0]")
    with pytest.raises(InputError, match=r"jobs\[0\].adaptive.*pollux runs adaptive jobs only"):
        pollux.check_policy_jobs(only_k80, "jobs[0]")


def test_an_adaptive_jobs_reallocations_are_its_launches_as_the_simulator_counts_them(tmp_path):
    """The restart factor's re-allocations: every launch of an adaptive job (its first start and every
    relaunch, resize or not), as the simulator counts a fresh start; a fixed job's stay its resizes (0)."""
    st = _state(tmp_path)
    ada, fixed = st.submit([ADA, JobSpec("ResNet-18 (batch size 32)", 100, size="tiny")])
    source = ClusterSource(st)
    assert source.round_jobs([ada, fixed]).reallocations.tolist() == [0, 0]
    with st.lock:
        st.jobs[ada].attempts, st.jobs[fixed].attempts = 3, 2     # launched 3 times, on one configuration
    assert st.jobs[ada].resizes == 0
    assert source.round_jobs([ada, fixed]).reallocations.tolist() == [3, 0]
