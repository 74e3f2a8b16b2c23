"""Paper §7.3 cost: 500 ResNet-50 and A3C jobs, durations {0.5,1,2,4,8} days, SLOs {1.2,2,10}x
the duration. Minimizing cost is ~1.4x cheaper than maximizing throughput but ~35 % of jobs
miss their SLO; minimizing cost under SLOs has no violations and is ~1.2x cheaper.

The paper does not give the arrival process; we use Poisson arrivals (0.5 jobs/h keeps the
cluster busy but not overloaded under max throughput). Prices: gavel_ng's built-in list prices.

    python experiments/cost.py [--config reduced|full] [--table reference|builtin]
"""

from __future__ import annotations

import sys

import common as c
import numpy as np

NAME = "cost"
RESNET = "ResNet-50 (batch size 64)"
A3C = "A3C"
DAYS = (0.5, 1, 2, 4, 8)
SLO = (1.2, 2.0, 10.0)
RATE = 0.5
JOBS = 500


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


def main(argv=None) -> int:
    from gavel_ng.simulator import default_table
    from gavel_ng.simulator.allocators import default_prices
    from gavel_ng.sweep import expand
    from gavel_ng.sweep.figures import bars
    from gavel_ng.throughputs import resolve_table

    args = c.parse_args(__doc__, argv)
    tp = c.throughputs(args)
    table = resolve_table(tp) if tp else default_table(["v100", "p100", "k80"])
    out = c.out_dir(NAME, args)
    out.mkdir(parents=True, exist_ok=True)
    traces = [str(make_trace(table, s, out / f"trace_seed{s}.tsv")) for s in args.cfg.seeds]
    policies = ["max_throughput", "min_cost", "min_cost_slo"]
    base = {"cluster": c.PAPER_CLUSTER, "throughputs": tp}
    df = c.run(NAME, expand({"policy": policies, "trace": traces}, base), args)
    cost = {p: c.mean_of(df, "total_cost_usd", policy=p) for p in policies}
    late = {p: c.mean_of(df, "slo_violation_fraction", policy=p) for p in policies}
    prices = ", ".join(f"{k} ${v:.2f}" for k, v in default_prices(["v100", "p100", "k80"]).items())
    claims = [
        c.Claim("cost: min cost vs max throughput", "1.4x cheaper",
                f"{c.fmt_x(c.ratio(cost['max_throughput'], cost['min_cost']))} cheaper "
                f"(${cost['max_throughput']:,.0f} vs ${cost['min_cost']:,.0f})",
                c.verdict(c.ratio(cost["max_throughput"], cost["min_cost"]), 1.4),
                f"Poisson arrivals at {RATE} jobs/h; prices per GPU-hour: {prices}"),
        c.Claim("cost: SLO violations under min cost", "~35 %", f"{100 * late['min_cost']:.0f} %",
                "reproduced" if abs(late["min_cost"] - 0.35) <= 0.1 else
                ("partly" if late["min_cost"] > 0.05 else "not reproduced"),
                f"max throughput: {100 * late['max_throughput']:.0f} %"),
        c.Claim("cost: min cost with SLOs vs max throughput", "1.2x cheaper, 0 violations",
                f"{c.fmt_x(c.ratio(cost['max_throughput'], cost['min_cost_slo']))} cheaper, "
                f"{100 * late['min_cost_slo']:.0f} % violations",
                "reproduced" if late["min_cost_slo"] <= 0.01 and
                abs(c.ratio(cost["max_throughput"], cost["min_cost_slo"]) - 1.2) <= 0.3 else "partly"),
    ]
    fig = bars(df, out / "cost_slo.png", metrics=["total_cost_usd", "slo_violation_fraction", "avg_jct_hours"],
               title=f"{JOBS} ResNet-50 and A3C jobs, 36 V100 + 36 P100 + 36 K80")
    c.report(NAME, claims, args, [fig])
    return 0


if __name__ == "__main__":
    sys.exit(main())
