"""Where a run with mid-round backfill parts from the same run without it, and why its makespan moved.

Two modes, both on the multi-GPU row of the backfill table in experiments/README.md
(`las`, 1/2/4/8-GPU jobs, 8-GPU servers, jobs 250-500 of the continuous trace):

* default: runs the point with and without backfill in this process, recording every round
  (the plan as it ran, who was active, each job's allocation), and prints what tells a
  backfill defect from a different trajectory: the first backfilled round and the first round
  whose plan differs; rounds where a waiting wide job's type had enough free GPUs at the round's
  start but no server held it (fragmentation); split GPU-hours; backfilled entries that renewed
  in place the next round (the placer's memory); and the last jobs to finish, with the
  allocation they had (sum of their X) and the share of their active rounds they ran.
* `--perturb`: the same point, on and off, under changes that have nothing to do with backfill
  (cold solves, a round of 355 or 365 s, the reset ledger): the spread of the on-off difference
  says how much one pair's makespan can be trusted.

    python experiments/backfill_trace.py --seed 0 [--rate 2.6]
    python experiments/backfill_trace.py --seed 0 --perturb
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gavel_ng.cli import main as cli_main  # noqa: E402
from gavel_ng.cluster import Cluster  # noqa: E402
from gavel_ng.mechanism import core  # noqa: E402
from gavel_ng.mechanism import round as round_loop  # noqa: E402
from gavel_ng.simulator import executor  # noqa: E402
from gavel_ng.topology import Topology  # noqa: E402

PERTURBATIONS = ([], ["--cold-solves"], ["--round-seconds", "355"], ["--round-seconds", "365"],
                 ["--ledger", "reset"])


def point(seed: int, rate: float) -> list[str]:
    return ["simulate", "--policy", "las", "--jobs-per-hour", str(rate), "--multi-gpu", "--window", "250:500",
            "--throughputs", "gavel-osdi20", "--gpus-per-server", "8", "--seed", str(seed)]


@contextlib.contextmanager
def recording(rounds: list[dict]):
    """Wrap the executor, the loop and the mechanism so that each round leaves a record (this
    script's process only; restored on exit)."""
    execute, step, plan = executor.SimExecutor.execute, round_loop.SchedulerLoop.step, core.RoundMechanism.plan
    alloc: dict[int, float] = {}

    def rec_plan(self, new_jobs=None):
        alloc.clear()
        live = np.flatnonzero(self.alive)
        sums = self.X[live].sum(axis=1)
        for k, s in zip(live.tolist(), sums.tolist()):
            for m in self.rows[k]:
                alloc[m] = alloc.get(m, 0.0) + s
        return plan(self, new_jobs)

    def rec_execute(self, p):
        n0, t0 = p.num_entries, self.clock
        res = execute(self, p)
        q = res.plan if res.plan is not None else p
        rounds.append(dict(t=t0, n0=n0, keys=list(q.keys), sfs=q.sfs.copy(), types=q.types.copy(),
                           gpus=list(q.gpus), cons=q.consolidated.copy(), ren=q.renewed.copy(),
                           occ=np.asarray(res.occupied, float).copy(), alloc=dict(alloc)))
        return res

    def rec_step(self):
        active = list(self.active)
        out = step(self)
        rounds[-1]["active"] = active
        return out

    executor.SimExecutor.execute, round_loop.SchedulerLoop.step = rec_execute, rec_step
    core.RoundMechanism.plan = rec_plan
    try:
        yield
    finally:
        executor.SimExecutor.execute, round_loop.SchedulerLoop.step, core.RoundMechanism.plan = execute, step, plan


def run_recorded(args: list[str]) -> tuple[list[dict], pd.DataFrame, dict]:
    rounds: list[dict] = []
    with tempfile.TemporaryDirectory() as out, recording(rounds), contextlib.redirect_stdout(io.StringIO()):
        cli_main(args + ["--out", out])
        jobs = pd.read_csv(Path(out) / "jobs.csv").set_index("job_id")
        summary = json.loads((Path(out) / "summary.json").read_text())
    return rounds, jobs, summary


def paper_topology() -> Topology:
    """The point's cluster: 36 GPUs of each type on 8-GPU servers (the simulator's default mix)."""
    return Topology.from_cluster(Cluster.parse("v100=36,p100=36,k80=36", 8))


def fragmentation(rounds, jobs, topo) -> int:
    """Rounds where a waiting job of sf GPUs had sf free GPUs of some type at the round's start
    but no server of that type with sf free."""
    sf = jobs.scale_factor.to_dict()
    n = 0
    for r in rounds:
        free = np.ones(topo.num_gpus, bool)
        for g in r["gpus"][: r["n0"]]:
            free[list(g)] = False
        ran = {m for k in r["keys"][: r["n0"]] for m in k}
        wide = {sf[m] for m in r.get("active", ()) if m not in ran and sf[m] > 1}
        per = np.bincount(topo.gpu_server[free], minlength=len(topo.server_type))
        for t, servers in enumerate(topo.type_servers):
            if any(free[topo.gpu_type == t].sum() >= s > per[servers].max() for s in wide):
                n += 1
                break
    return n


def delivered(rounds, jobs) -> str:
    """Per job size, the rounds its jobs ran at the round's start over the rounds their allocation
    promised (the mechanism's fidelity to X; backfilled partial rounds not counted)."""
    sf = jobs.scale_factor.to_dict()
    ran: dict[int, float] = {}
    want: dict[int, float] = {}
    for r in rounds:
        started = {m for k in r["keys"][: r["n0"]] for m in k}
        for m in r.get("active", ()):
            s = sf[m]
            want[s] = want.get(s, 0.0) + r["alloc"].get(m, 0.0)
            ran[s] = ran.get(s, 0.0) + (m in started)
    return ", ".join(f"{s}: {ran[s] / want[s]:.3f}" for s in sorted(want) if want[s] > 0)


def describe(tag: str, rounds, jobs, summary, topo) -> None:
    split = sum(float(r["sfs"][e] * r["occ"][e]) for r in rounds for e in range(r["n0"])
                if r["sfs"][e] > 1 and not r["cons"][e]) / 3600
    bf = sum(len(r["keys"]) - r["n0"] for r in rounds)
    renewed = 0
    for a, b in zip(rounds, rounds[1:]):
        nxt = {k: e for e, k in enumerate(b["keys"][: b["n0"]])}
        renewed += sum(1 for e in range(a["n0"], len(a["keys"])) if a["keys"][e] in nxt and b["ren"][nxt[a["keys"][e]]])
    print(f"{tag}: avg JCT {summary['avg_jct_hours']:.3f} h, makespan {summary['makespan_hours']:.1f} h, "
          f"{len(rounds)} rounds; backfilled entries {bf} ({renewed} renewed in place next round); "
          f"fragmented rounds {fragmentation(rounds, jobs, topo)}; split GPU-hours {split:.1f}")
    print("  rounds run / allocation (sum X) over active rounds, by GPUs: " + delivered(rounds, jobs))
    w = jobs[jobs.in_window == 1].sort_values("finish_s").tail(3)
    for m, row in w.iterrows():
        act = [r for r in rounds if m in r.get("active", ())]
        ran = sum(1 for r in act if any(m in k for k in r["keys"][: r["n0"]]))
        x = np.mean([r["alloc"].get(m, 0.0) for r in act]) if act else 0.0
        print(f"  last: job {m} ({row.job_type}, {row.scale_factor} GPUs) arrived {row.arrival_s / 3600:.1f} h, "
              f"finished {row.finish_s / 3600:.1f} h; allocation sum(X) {x:.3f} on average, "
              f"ran {ran / max(len(act), 1):.3f} of its {len(act)} active rounds")


def trace(seed: int, rate: float) -> None:
    args = point(seed, rate)
    topo = paper_topology()
    on = run_recorded(args)
    off = run_recorded(args + ["--no-backfill"])
    first = next((i for i, r in enumerate(on[0]) if len(r["keys"]) > r["n0"]), None)
    differ = next((i for i, (a, b) in enumerate(zip(on[0], off[0])) if a["keys"][: a["n0"]] != b["keys"][: b["n0"]]),
                  None)
    if first is not None:
        print(f"first backfilled round {first} (t = {on[0][first]['t'] / 3600:.1f} h); first round whose plan "
              f"differs {differ} (t = {on[0][differ]['t'] / 3600:.1f} h)" if differ is not None else "")
    describe("backfill on ", *on, topo)
    describe("backfill off", *off, topo)


def perturb(seed: int, rate: float) -> None:
    base = [sys.executable, "-c", "import sys; from gavel_ng.cli import main; sys.exit(main(sys.argv[1:]))"]
    diffs = []
    for extra in PERTURBATIONS:
        got = {}
        for mode, flag in (("on", []), ("off", ["--no-backfill"])):
            out = subprocess.run(base + point(seed, rate) + extra + flag + ["--json"], capture_output=True, text=True,
                                 check=True, cwd=REPO).stdout
            d = json.loads(out)
            got[mode] = d[0] if isinstance(d, list) else d
        on, off = got["on"], got["off"]
        diffs.append((on["avg_jct_hours"] / off["avg_jct_hours"] - 1, on["makespan_hours"] / off["makespan_hours"] - 1))
        print(f"{' '.join(extra) or '(as given)':22s} avg JCT {off['avg_jct_hours']:.3f} -> {on['avg_jct_hours']:.3f}  "
              f"makespan {off['makespan_hours']:.1f} -> {on['makespan_hours']:.1f}", flush=True)
    d = np.array(diffs) * 100
    print(f"on vs off: avg JCT {d[:, 0].mean():+.1f} % (range {d[:, 0].min():+.1f} .. {d[:, 0].max():+.1f}), "
          f"makespan {d[:, 1].mean():+.1f} % (range {d[:, 1].min():+.1f} .. {d[:, 1].max():+.1f})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rate", type=float, default=2.6, help="jobs per hour (default 2.6)")
    ap.add_argument("--perturb", action="store_true", help="on/off pairs under changes unrelated to backfill")
    a = ap.parse_args(argv)
    (perturb if a.perturb else trace)(a.seed, a.rate)
    return 0


if __name__ == "__main__":
    sys.exit(main())
