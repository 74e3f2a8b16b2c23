"""Paper §7.3 cost: 500 ResNet-50 and A3C jobs, durations {0.5,1,2,4,8} days, SLOs {1.2,2,10}x
the duration. Minimizing cost is ~1.4x cheaper than maximizing throughput but ~35 % of jobs
miss their SLO; minimizing cost under SLOs has no violations and is ~1.2x cheaper.

Two workloads, each on 36 V100 + 36 P100 + 36 K80 with the reference table:
  paper       the paper's 500 ResNet-50 (batch size 64) / A3C jobs; it gives no arrival process, we
              use Poisson arrivals at 0.5 jobs/h (busy but not overloaded under max throughput)
  continuous  the issue-17 configuration: the continuous trace (26 job types) at 0.5 jobs/h with
              SLOs, jobs 0-299 (`gavel-ng simulate --jobs-per-hour 0.5 --slos --window 0:300`)
Seeds 0 and 1 (reduced) or 0-2 (full). Prices: gavel_ng's built-in list prices. Cost is what the
measured jobs' GPU time costs (simulator: every job pays its GPUs' price while it holds them).

    python experiments/cost.py [--config reduced|full] [--table reference|builtin]
"""

from __future__ import annotations

import sys
from pathlib import Path

import common as c
import numpy as np

NAME = "cost"
RESNET = "ResNet-50 (batch size 64)"
A3C = "A3C"
DAYS = (0.5, 1, 2, 4, 8)
SLO = (1.2, 2.0, 10.0)
RATE = 0.5
JOBS = 500
CONTINUOUS_WINDOW = "0:300"
POLICIES = ["max_throughput", "min_cost", "min_cost_slo"]
SEEDS = {"reduced": (0, 1), "paper": (0, 1, 2), "full": (0, 1, 2)}


def portable(path: Path) -> str:
    """A trace's path as a point names it: relative to the working directory where it lies under it (the
    repository, as the scripts are run), so that results tables hold no machine's paths."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def make_trace(table, seed: int, path):
    from gavel_ng.traces import Trace, write_trace

    rng = np.random.default_rng(seed)
    types = [RESNET if t else A3C for t in rng.random(JOBS) < 0.5]
    duration = rng.choice(np.array(DAYS), JOBS) * 86400.0
    ref = "v100" if "v100" in table.worker_types else table.worker_types[0]
    steps = np.round(duration * np.array([table.get((t, 1), ref) for t in types]))
    arrivals = np.concatenate([[0.0], np.cumsum(rng.exponential(3600.0 / RATE, JOBS - 1))])
    trace = Trace(types, np.ones(JOBS, np.int64), np.ones(JOBS), steps, rng.choice(np.array(SLO), JOBS) * duration,
                  arrivals)
    write_trace(trace, path)
    return path


def claims_for(label: str, df, measured: int, paper_late: bool = True) -> list:
    """The paper's three numbers beside ours for one workload (means over seeds). The paper measured
    SLO misses on its ResNet-50 / A3C workload only (`paper_late`); on another workload the share
    missed is what its SLO draw and job types allow (see experiments/README.md, Cost)."""
    cost = {p: c.mean_of(df, "total_cost_usd", policy=p) for p in POLICIES}
    late = {p: c.mean_of(df, "slo_violation_fraction", policy=p) for p in POLICIES}
    dropped = {p: c.mean_of(df, "slo_dropped", policy=p) for p in POLICIES}
    jct = {p: c.mean_of(df, "avg_jct_hours", policy=p) for p in POLICIES}
    done = {p: bool((df[df["policy"] == p]["jobs_measured"].astype(float) == measured).all()
                    and not c.any_unstable(df, policy=p)) for p in POLICIES}
    seeds = ",".join(str(s) for s in sorted(df["seed"].astype(int).unique()))
    every = "every job finished" if all(done.values()) else \
        "NOT every job finished: " + ", ".join(p for p in POLICIES if not done[p])
    cheaper = {p: c.ratio(cost["max_throughput"], cost[p]) for p in ("min_cost", "min_cost_slo")}
    return [
        c.Claim(f"cost ({label}): min cost vs max throughput", "1.4x cheaper",
                f"{c.fmt_x(cheaper['min_cost'])} cheaper (${cost['max_throughput']:,.0f} vs ${cost['min_cost']:,.0f})",
                c.verdict(cheaper["min_cost"], 1.4),
                f"seeds {seeds}; avg JCT {jct['max_throughput']:.1f} h vs {jct['min_cost']:.1f} h; {every}"),
        c.Claim(f"cost ({label}): SLO violations under min cost",
                "~35 %" if paper_late else "not measured (~35 % is the ResNet-50 / A3C workload's)",
                f"{100 * late['min_cost']:.0f} %",
                ("reproduced" if abs(late["min_cost"] - 0.35) <= 0.1 else
                 ("partly" if late["min_cost"] > 0.05 else "not reproduced")) if paper_late else "new result",
                f"max throughput: {100 * late['max_throughput']:.0f} %"),
        c.Claim(f"cost ({label}): min cost with SLOs vs max throughput", "1.2x cheaper, 0 violations",
                f"{c.fmt_x(cheaper['min_cost_slo'])} cheaper (${cost['min_cost_slo']:,.0f}), "
                f"{100 * late['min_cost_slo']:.1f} % violations, {dropped['min_cost_slo']:.1f} SLOs dropped per run",
                "reproduced" if late["min_cost_slo"] <= 0.01 and abs(cheaper["min_cost_slo"] - 1.2) <= 0.3
                else "partly",
                f"avg JCT {jct['min_cost_slo']:.1f} h"),
    ]


def main(argv=None) -> int:
    from gavel_ng.cluster import resolve_prices
    from gavel_ng.profiles.table_io import resolve_table
    from gavel_ng.simulator import default_table
    from gavel_ng.sweep import expand
    from gavel_ng.sweep.figures import bars

    args = c.parse_args(__doc__, argv)
    seeds = SEEDS[args.config]
    tp = c.throughputs(args)
    table = resolve_table(tp) if tp else default_table(["v100", "p100", "k80"])
    out = c.out_dir(NAME, args)
    out.mkdir(parents=True, exist_ok=True)
    base = {"cluster": c.PAPER_CLUSTER, "throughputs": tp}
    paper = []
    for s in seeds:
        trace = portable(make_trace(table, s, out / f"trace_seed{s}.tsv"))
        paper += expand({"policy": POLICIES}, {**base, "trace": trace, "seed": s})
    continuous = expand({"policy": POLICIES, "seed": list(seeds)},
                        {**base, "jobs_per_hour": RATE, "slos": True, "window": CONTINUOUS_WINDOW})
    df = c.run(NAME, paper + continuous, args)
    df_paper = df[df["trace"].notna() & (df["trace"].astype(str) != "")]
    df_cont = df[df["jobs_per_hour"].notna() & (df["jobs_per_hour"].astype(str) != "")]
    prices = ", ".join(f"{k} ${v:.2f}" for k, v in resolve_prices(["v100", "p100", "k80"]).items())
    claims = claims_for("paper workload", df_paper, JOBS) + \
        claims_for("continuous trace", df_cont, 300, paper_late=False)
    claims[0].note += f"; Poisson arrivals at {RATE} jobs/h; prices per GPU-hour: {prices}"
    # one bar per policy, mean and std over seeds (each seed has its own trace file)
    metrics = ["total_cost_usd", "slo_violation_fraction", "avg_jct_hours"]
    figs = [bars(df_paper.assign(trace="paper"), out / "cost_slo.png", metrics=metrics,
                 title=f"{JOBS} ResNet-50 and A3C jobs, 36 V100 + 36 P100 + 36 K80"),
            bars(df_cont, out / "cost_slo_continuous.png", metrics=metrics,
                 title=f"continuous trace with SLOs, {RATE} jobs/h, jobs {CONTINUOUS_WINDOW}")]
    c.report(NAME, claims, args, figs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
