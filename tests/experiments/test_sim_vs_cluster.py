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

from gavel_ng.worker.paced_job import Pace  # noqa: E402

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


@pytest.mark.slow
def test_simulator_predicts_the_loopback_cluster(tmp_path):
    """Ten jobs of Gavel's mix under FIFO on 3 V100 + 3 P100 + 3 K80, run by real workers (paced jobs) and
    simulated with the launch cost the cluster measured: the simulator's average JCT and median per-job JCT
    error must stay within the stated tolerances of the cluster's (about 2 min). FIFO, because LAS's
    per-job JCTs do not repeat from one cluster run to the next on a loaded machine (experiments/README.md)."""
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
