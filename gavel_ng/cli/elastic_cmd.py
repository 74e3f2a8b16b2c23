"""`gavel-ng simulate --workload pollux` / `--trace FILE.csv`: elastic, goodput-aware runs (issue 14).

The policies of `gavel_ng.elastic.registry` (goodput, goodput_agnostic, pollux,
tiresias) run in the elastic simulator, which follows each one's declared properties
(adaptive jobs or fixed jobs at their tuned GPU count, an allocation LP or a per-round
planner); any other policy runs the same jobs as fixed jobs at their tuned GPU count and
batch size (the workload's `.trace`, with `fixed_job_table`), in the ordinary simulator.
Tuned GPU counts wider than the cluster's largest type are capped first
(`cap_tuned_gpus`), for every policy alike.
"""

from __future__ import annotations

import json

from ..cluster import Cluster
from ..errors import InputError

ELASTIC_KEYS = ("policy", "avg_jct_hours", "p99_jct_hours", "makespan_hours", "gpu_hours", "utilization",
                "jobs_measured", "reallocations", "policy_solves", "wall_seconds")


def add_flags(p, src) -> None:
    """The elastic flags of `simulate`; `--workload` joins the trace-source group `src`."""
    src.add_argument("--workload", choices=("pollux",),
                     help="pollux: Pollux's workload (Table 1 mix, --jobs jobs in --hours hours, Poisson arrivals); "
                          "--trace FILE.csv reads the Pollux artifact's workload files instead. Policies goodput, "
                          "goodput_agnostic and pollux run its jobs as adaptive jobs, tiresias and any other policy "
                          "as fixed jobs at their tuned GPU count and batch")
    p.add_argument("--jobs", type=int, default=160, help="--workload pollux: number of jobs (default 160)")
    p.add_argument("--hours", type=float, default=8.0, help="--workload pollux: arrival window (default 8)")
    p.add_argument("--realloc-delay", type=float, default=30.0, metavar="SECONDS",
                   help="adaptive jobs: seconds lost at each change of GPU count or type (default 30, as Pollux)")
    p.add_argument("--fairness-floor", type=float, default=0.5, metavar="F",
                   help="goodput_lp: every job gets at least F times its fair-share speedup (0..1, default 0.5)")


def wants_elastic(args) -> bool:
    return bool(getattr(args, "workload", None)) or bool(args.trace and str(args.trace).lower().endswith(".csv"))


def run(args) -> int:
    from ..elastic.compare import RunSettings, load_workload, run_policy
    from ..elastic.registry import is_elastic_policy
    from ..policies import get_policy

    policies = list(dict.fromkeys(p.strip() for p in args.policy.split(",") if p.strip())) or ["las"]
    for name in policies:
        if not is_elastic_policy(name):
            get_policy(name)
    if args.gpus_per_server < 1:
        raise InputError("--gpus-per-server", args.gpus_per_server, "must be at least 1")
    cluster = Cluster.parse(args.cluster, gpus_per_server=args.gpus_per_server)
    etrace = load_workload(cluster, args.trace, args.jobs, args.hours, args.seed)
    if args.round_seconds is not None and args.round_seconds <= 0:
        raise InputError("--round-seconds", args.round_seconds, "must be positive")
    settings = RunSettings(round_seconds=args.round_seconds, realloc_delay=args.realloc_delay,
                           preemption_overhead=args.preemption_overhead, floor=args.fairness_floor, seed=args.seed,
                           max_hours=args.max_hours)
    rows = [{k: r[k] for k in ELASTIC_KEYS} for r in (run_policy(n, cluster, etrace, settings) for n in policies)]
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else {"runs": rows}))
        return 0
    what = f"{args.trace}" if args.trace else f"pollux workload ({len(etrace)} jobs in {args.hours:g} h)"
    rounds = f"rounds of {args.round_seconds:g} s" if args.round_seconds else "each policy's own rounds"
    print(f"{what} on {args.cluster}, {rounds}, re-allocation delay {args.realloc_delay:g} s")
    print(f"{'policy':18s} {'avg JCT h':>9s} {'p99 JCT h':>9s} {'makespan h':>10s} {'GPU h':>9s} {'realloc':>7s}")
    for r in rows:
        def f(v, spec):
            return "n/a" if v is None else format(v, spec)
        print(f"{r['policy']:18s} {f(r['avg_jct_hours'], '9.3f')} {f(r['p99_jct_hours'], '9.3f')} "
              f"{f(r['makespan_hours'], '10.3f')} {f(r['gpu_hours'], '9.1f')} {f(r['reallocations'], '>7')}")
    return 0
