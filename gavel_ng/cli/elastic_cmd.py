"""`gavel-ng simulate --workload pollux` / `--trace FILE.csv`: elastic, goodput-aware runs (issue 14).

Policies `goodput` and `goodput_agnostic` run the jobs as adaptive jobs
(gavel_ng.elastic.simulate); any other policy runs the same jobs as fixed jobs at their
tuned GPU count and batch size (the workload's `.trace`, with `fixed_job_table`), in the
ordinary simulator.
"""

from __future__ import annotations

import dataclasses
import json

from ..cluster import Cluster
from ..errors import InputError

ELASTIC_KEYS = ("policy", "avg_jct_hours", "p99_jct_hours", "makespan_hours", "gpu_hours", "utilization",
                "jobs_measured", "reallocations", "policy_solves", "wall_seconds")


def add_flags(p, src) -> None:
    """The elastic flags of `simulate`; `--workload` joins the trace-source group `src`."""
    src.add_argument("--workload", choices=("pollux",),
                     help="pollux: Pollux's workload (Table 1 mix, --jobs jobs in --hours hours, Poisson arrivals); "
                          "--trace FILE.csv reads the Pollux artifact's workload files instead. Policies goodput and "
                          "goodput_agnostic run its jobs as adaptive jobs, any other as fixed jobs at their tuned "
                          "GPU count and batch")
    p.add_argument("--jobs", type=int, default=160, help="--workload pollux: number of jobs (default 160)")
    p.add_argument("--hours", type=float, default=8.0, help="--workload pollux: arrival window (default 8)")
    p.add_argument("--realloc-delay", type=float, default=30.0, metavar="SECONDS",
                   help="adaptive jobs: seconds lost at each change of GPU count or type (default 30, as Pollux)")
    p.add_argument("--fairness-floor", type=float, default=0.5, metavar="F",
                   help="goodput policies: every job gets at least F times its fair-share speedup (0..1, default 0.5)")


def wants_elastic(args) -> bool:
    return bool(getattr(args, "workload", None)) or bool(args.trace and str(args.trace).lower().endswith(".csv"))


def run(args) -> int:
    from ..elastic import fixed_job_table, pollux_workload, read_pollux_csv
    from ..elastic.policy import is_elastic_policy
    from ..elastic.simulate import simulate_elastic
    from ..elastic.workload import POLLUX_NETWORK_GBPS
    from ..policies import get_policy
    from ..simulator import SimConfig, simulate

    policies = list(dict.fromkeys(p.strip() for p in args.policy.split(",") if p.strip())) or ["las"]
    for name in policies:
        if not is_elastic_policy(name):
            get_policy(name)
    if args.gpus_per_server < 1:
        raise InputError("--gpus-per-server", args.gpus_per_server, "must be at least 1")
    cluster = Cluster.parse(args.cluster, gpus_per_server=args.gpus_per_server)
    if args.trace:
        etrace = read_pollux_csv(args.trace)
    else:
        if args.jobs < 1:
            raise InputError("--jobs", args.jobs, "must be at least 1")
        etrace = pollux_workload(num_jobs=args.jobs, hours=args.hours, seed=args.seed)
    table = fixed_job_table(etrace, cluster.worker_types, network_gbps=POLLUX_NETWORK_GBPS)
    rows = []
    for name in policies:
        if is_elastic_policy(name):
            res = simulate_elastic(cluster, etrace, name, round_seconds=args.round_seconds,
                                   realloc_delay=args.realloc_delay, preemption_overhead=args.preemption_overhead,
                                   floor=args.fairness_floor, seed=args.seed, max_hours=args.max_hours)
            rows.append({k: res.summary.get(k) for k in ELASTIC_KEYS})
        else:
            config = SimConfig(policy=name, round_seconds=args.round_seconds,
                               preemption_overhead_s=args.preemption_overhead, seed=args.seed,
                               max_sim_seconds=None if args.max_hours is None else args.max_hours * 3600)
            s = simulate(cluster, table, etrace.trace, dataclasses.replace(config)).summary
            busy = s["utilization"] * float(cluster.capacity().sum()) * s.get("simulated_hours", 0.0)
            rows.append({k: s.get(k) for k in ELASTIC_KEYS} | {"gpu_hours": round(busy, 3), "reallocations": None})
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else {"runs": rows}))
        return 0
    what = f"{args.trace}" if args.trace else f"pollux workload ({len(etrace)} jobs in {args.hours:g} h)"
    print(f"{what} on {args.cluster}, rounds of {args.round_seconds:g} s, re-allocation delay {args.realloc_delay:g} s")
    print(f"{'policy':18s} {'avg JCT h':>9s} {'p99 JCT h':>9s} {'makespan h':>10s} {'GPU h':>9s} {'realloc':>7s}")
    for r in rows:
        def f(v, spec):
            return "n/a" if v is None else format(v, spec)
        print(f"{r['policy']:18s} {f(r['avg_jct_hours'], '9.3f')} {f(r['p99_jct_hours'], '9.3f')} "
              f"{f(r['makespan_hours'], '10.3f')} {f(r['gpu_hours'], '9.1f')} {f(r['reallocations'], '>7')}")
    return 0
