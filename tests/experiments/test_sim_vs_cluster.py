"""The simulator against a loopback cluster of paced jobs (experiments/sim_vs_cluster.py), and the paced
job's choice of rate (gavel_ng.worker.paced_job)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import sim_vs_cluster as svc  # noqa: E402

from gavel_ng.worker.paced_job import AdaptivePace, Pace, run_adaptive  # noqa: E402

# Drift the slow test tolerates. Its 10 jobs last 10-30 s, so a launch a few seconds late on a loaded machine
# moves one job by 10-20 %: the per-job bound is wider than the experiment's goal (10 %), the average's a
# little wider (goal 5 %). Measured on this trace on a quiet machine (load average under 2), average and median
# per-job error: 0.8 % and 0.5 %, 1.5 % and 0.8 % (in the second run the simulator gave the round at 45 s's fast
# GPUs to another job: a knife edge; re-simulated with its mid-round launch cost 0.1 s higher, 0.5 s, it ran
# as the cluster did); the
# simulator planning at the boundary (before issue 41's plan lead): 2.1-2.2 % and 0.5-0.9 %; and that before the
# runtime's backfill counted the last round's leaving attempts' GPUs as free (runtime.backfill._free): 6.9-9.1 %
# and 0.9-2.5 % (six runs: five failed). Under load 15: 2.7 % and 13.6 %; the
# simulator before issue 41 (arrivals waiting for the round) 13.3 % and 34.9 %.
AVG_TOLERANCE, MEDIAN_TOLERANCE = 0.08, 0.25


def test_scaled_table_keeps_what_policies_decide_by():
    table = svc.scaled_table(25.0)
    from gavel_ng.throughputs import ThroughputTable

    gavel = ThroughputTable.builtin("gavel-osdi20")
    for t in ("ResNet-18 (batch size 32)", "Transformer (batch size 64)"):
        assert table.get((t, 1), "v100") == pytest.approx(25.0)
        for w in ("p100", "k80"):      # ratios between GPU types are Gavel's
            assert table.get((t, 1), w) / table.get((t, 1), "v100") == pytest.approx(
                gavel.get((t, 1), w) / gavel.get((t, 1), "v100"))
    key, partner = next((k, p) for k, per in gavel.pairs["v100"].items() for p in per if k != p)
    mine, theirs = table.pairs["v100"][key][partner]
    g_mine, g_theirs = gavel.pairs["v100"][key][partner]
    assert mine / table.get(key, "v100") == pytest.approx(g_mine / gavel.get(key, "v100"))
    assert theirs / table.get(partner, "v100") == pytest.approx(g_theirs / gavel.get(partner, "v100"))


def test_trace_is_gavels_mix_within_the_cluster():
    table = svc.scaled_table(25.0)
    trace = svc.make_trace(table, 30, 0, 4, 4.0, 20.0, 100.0)
    assert len(trace) == 30 and trace.arrivals[0] == 0 and np.all(np.diff(trace.arrivals) >= 0)
    assert set(trace.scale_factors.tolist()) > {1} and trace.scale_factors.max() <= 4
    alone = trace.steps / [table.get((t, int(s)), "v100") for t, s in zip(trace.job_types, trace.scale_factors)]
    assert alone.min() >= 19.9 and alone.max() <= 100.1


def test_simulator_side_solves_allocations_as_the_runtime_does():
    """las's max-min LP is degenerate (only the bottleneck jobs are pinned): the simulator's default warm LP
    returns another optimum than the cold solve the runtime makes (runtime.service.WARM_SOLVES), and on the
    experiment's trace the two give different jobs the fast GPUs. The simulator side solves as the runtime does;
    with warm solves its las JCTs were 8-12 % off the cluster's per job (experiments/README.md)."""
    from gavel_ng.cluster import Cluster
    from gavel_ng.runtime.service import WARM_SOLVES
    from gavel_ng.simulator import SimConfig, simulate

    table = svc.scaled_table(25.0)
    trace = svc.make_trace(table, 30, 0, 4, 4.0, 20.0, 100.0)
    types = {"v100": 4, "p100": 4, "k80": 4}
    ours = svc.run_sim(trace, trace.arrivals, table, "las", False, types, 20.0, 1.5, 0, 0.7)
    cluster = Cluster.parse("v100=4:4,p100=4:4,k80=4:4")
    finish = {}
    for warm in (False, True):
        cfg = SimConfig(policy="las", round_seconds=20.0, preemption_overhead_s=1.5, start_overhead_s=0.7,
                        window=(0, len(trace)), realloc_delay=1.5, warm_start=warm)
        finish[warm] = simulate(cluster, table, trace, cfg).jobs.finish[:len(trace)]
    assert not np.array_equal(finish[False], finish[True])     # the trace tells the two apart
    np.testing.assert_array_equal(ours.finish, finish[WARM_SOLVES])


def test_ensemble_moves_each_launch_cost_both_ways_and_counts_the_goal():
    """Nine simulations at the measured launch costs moved by ENSEMBLE_SHIFT either way (none below 0); here the
    simulated JCT grows with the round-start cost, so only the simulations at the measured one meet the goal."""
    arrival = np.zeros(4)
    cluster = svc.Run(arrival, np.array([10.0, 20.0, 30.0, 40.0]), 0.0, {"launches": 4})
    seen = []

    def simulate_at(overhead, start):
        seen.append((round(overhead, 2), None if start is None else round(start, 2)))
        return svc.Run(arrival, cluster.finish * (1 + 0.4 * (overhead - 0.2)), 0.0, {})

    out = svc.ensemble("las", cluster, 0.2, 0.1, simulate_at)
    shift = svc.ENSEMBLE_SHIFT
    assert sorted(seen) == sorted((round(max(0.2 + a, 0), 2), round(max(0.1 + b, 0), 2))
                                  for a in (-shift, 0, shift) for b in (-shift, 0, shift))
    assert out["ensemble_runs"] == 9 and out["ensemble_meets_goal"] == 3
    assert out["ensemble_max_avg_jct_error"] == pytest.approx(0.4 * shift)
    assert out["ensemble_median_job_error_min"] == 0.0
    assert svc.ensemble("goodput", cluster, 0.2, None, simulate_at)["ensemble_runs"] == 3


def test_pace_takes_the_pair_rate_while_a_live_job_shares_the_gpu(tmp_path):
    table = svc.scaled_table(25.0)
    key, partner = next((k, p) for k, per in table.pairs["v100"].items() for p in per if k != p)
    slot = tmp_path / "v100-gpu0"
    slot.mkdir()
    pace = Pace(table, key, "v100", slot, "job1.json")
    assert pace.current(100.0) == table.get(key, "v100")
    # a live partner (this process's pid): the table's in-pair rate
    (slot / "job2.json").write_text(json.dumps({"job_type": partner[0], "scale_factor": partner[1],
                                                "pid": os.getpid()}))
    assert pace.current(101.0) == table.pairs["v100"][key][partner][0]
    # a registration left by a process that is gone is no partner
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (slot / "job2.json").write_text(json.dumps({"job_type": partner[0], "scale_factor": partner[1], "pid": gone.pid}))
    assert pace.current(102.0) == table.get(key, "v100")


def test_paced_job_checkpoints_through_gavel_iterator(tmp_path):
    """Standalone (no worker): it runs its steps through GavelIterator and commits a checkpoint at the end."""
    out = subprocess.run([sys.executable, "-m", "gavel_ng.worker.paced_job", "--table", "gavel-osdi20",
                          "--job-type", "ResNet-18 (batch size 32)", "--worker-type", "v100", "--steps", "20",
                          "--checkpoint-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ckpt-000000000020" / "paced.json").exists()
    assert "torch" not in out.stderr


def test_paced_adaptive_job_resumes_from_its_checkpoint_on_other_gpus(tmp_path):
    """Standalone: an adaptive paced job (ncf: 20 ms steps) on 1 GPU, then resumed from its checkpoint on 2 GPUs
    with a larger total, as a resize relaunches it; it restores its progress and finishes the rest."""
    base = [sys.executable, "-m", "gavel_ng.worker.paced_job", "--table", "gavel-osdi20", "--job-type",
            "Recommendation (batch size 512)", "--worker-type", "a100", "--checkpoint-dir", str(tmp_path),
            "--adaptive", json.dumps({"family": "ncf", "init_batch": 256, "max_batch": 32768})]
    for gpus, steps in ((1, 1000), (2, 2000)):
        out = subprocess.run(base + ["--gpus", str(gpus), "--steps", str(steps)], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode == 0, out.stderr
        state = json.loads((tmp_path / f"ckpt-{steps:012d}" / "paced.json").read_text())
        assert state["step"] == steps and state["done"] == steps and state["batch"] > 256
    assert "restored step 1000" in out.stderr and f"{2} x a100 at progress 0.5000" in out.stderr


def _model_step(family: str, worker: str, gpus: int, progress: float):
    """(total batch, examples/s) the model gives a job of `family` at its best batch there, from the model's
    own pieces (best_goodput, throughput_params), not the shared `elastic.running` the paced job runs."""
    from gavel_ng.elastic import FAMILIES, best_goodput, throughput_params

    spec = FAMILIES[family].spec()
    _, m, s = best_goodput(spec, worker, gpus, 1, progress, 50.0)
    x = float(throughput_params(family, worker, 50.0).throughput(m, s, gpus, 1))
    return gpus * m * (s + 1), x


class _Clock:
    """A clock that moves only when the job sleeps: the paced loop's schedule, without waiting."""

    def __init__(self):
        self.now, self.sleeps = 1000.0, []

    def __call__(self):
        return self.now

    def sleep(self, dt):
        self.sleeps.append(dt)
        self.now += dt


@pytest.mark.parametrize("family,worker,gpus", [("cifar10", "v100", 2), ("bert", "t4", 1), ("ncf", "a100", 4)])
def test_paced_adaptive_job_steps_at_the_models_rate(family, worker, gpus, tmp_path):
    """Each optimizer step takes batch / throughput of the model's best batch on (type, GPUs), and the job's
    steps at M0 take as long in all as the model's progress integral says (Pollux's M0-equivalent progress)."""
    from gavel_ng.elastic import FAMILIES, phi_curve, seconds_to_progress
    from gavel_ng.iterator import GavelIterator

    spec = FAMILIES[family].spec()
    batch, x = _model_step(family, worker, gpus, 0.0)
    total = 200 if family != "ncf" else 20000
    pace = AdaptivePace(spec, worker, gpus, 1, 50.0)
    it = GavelIterator(iter(int, 1), lambda p: None, lambda p: None, max_steps=total, adaptive=pace)
    clock = _Clock()
    run_adaptive(it, pace, 0.05, clock, clock.sleep)
    assert it.step == total and pace.batch == batch
    assert pace.step_seconds == pytest.approx(batch / x, rel=1e-9)
    n = max(1, int(np.ceil(0.05 / pace.step_seconds)))
    assert clock.sleeps[0] == pytest.approx(n * batch / x, rel=1e-9)       # one iterator step: n optimizer steps
    model = seconds_to_progress(phi_curve(spec), spec.init_batch, batch, x, total * spec.init_batch, 0.0, 1.0)
    assert sum(clock.sleeps) == pytest.approx(model, rel=1e-6)


def test_paced_adaptive_job_picks_its_batch_at_its_progress_and_carries_it(tmp_path):
    """A relaunch (here on 4 GPUs instead of 1) restores the job's progress from its checkpoint and picks the
    model's best batch there at that progress."""
    from gavel_ng.elastic import FAMILIES

    spec = FAMILIES["cifar10"].spec()
    one = AdaptivePace(spec, "v100", 1, 1, 50.0)
    one.start(1000, 0)
    one.pick()
    one.run(300)
    four = AdaptivePace(spec, "v100", 4, 1, 50.0)
    four.load(json.loads(json.dumps(one.state())))
    four.start(1000, int(one.done))
    four.pick()
    assert four.progress == pytest.approx(one.progress) and 0 < four.progress < 1
    assert four.batch == _model_step("cifar10", "v100", 4, four.progress)[0] > one.batch


@pytest.mark.slow
def test_simulator_predicts_the_loopback_cluster(tmp_path):
    """Ten jobs of Gavel's mix under FIFO on 3 V100 + 3 P100 + 3 K80, run by real workers (paced jobs) and
    simulated with the launch cost the cluster measured: the simulator's average JCT and median per-job JCT
    error must stay within the stated tolerances of the cluster's (about 2 min). FIFO, chosen while LAS's
    simulated trajectories parted from the cluster's (the simulator solved LAS's LP warm, the runtime cold:
    experiments/README.md). Since the simulator here solves cold, LAS on this trace agrees as well (two runs
    at load 2-3: -0.7 % / 1.9 % and -0.3 % / 1.5 %; solving warm, +5.2 % / 2.6 % and +5.5 % / 1.9 %, p90 27 %)."""
    types = {"v100": 3, "p100": 3, "k80": 3}
    table = svc.scaled_table(25.0)
    trace = svc.make_trace(table, 10, 3, 3, 4.0, 10.0, 30.0)
    table_path = tmp_path / "table.json"
    from gavel_ng.profiles.table_io import write_table

    write_table(table, table_path)
    args = type("Args", (), {"round_seconds": 15.0, "timeout": 400.0, "seed": 3})()
    root = tmp_path / "fifo"
    root.mkdir()
    row, jobs = svc.run_policy("fifo", trace, table, table_path, types, args, root)
    assert len(jobs) == 10 and row["launches_cluster"] >= 10
    assert row["avg_jct_error"] <= AVG_TOLERANCE, row
    assert row["median_job_error"] <= MEDIAN_TOLERANCE, row
