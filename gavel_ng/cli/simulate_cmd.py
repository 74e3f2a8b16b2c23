"""`gavel-ng simulate`: a trace-driven simulation of the round-based scheduler.

One path for every run: a Gavel trace (generated or a file) or a Pollux workload (drawn, or
a Pollux CSV), under any policy of the one registry, allocation or round kind. The trace's
format is read from its content (`traces.trace_format`) or named by `--trace-format`; what
the jobs do (fixed, adaptive) and how often the policy decides follow from the policy's
declared properties, in the simulator.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import threading
from pathlib import Path

from ..cluster import NAMED_CLUSTERS, Cluster
from ..elastic.efficiency import PROFILE_SETS
from ..elastic.profile_sets import check_profiles
from ..elastic.sia_workloads import WORKLOAD_NAMES
from ..errors import InputError
from ..logs import format_warnings
from ..policies import get_policy
from ..policies.plugins import add_flag as add_plugin_flag
from ..policies.plugins import load_plugins
from ..policies.registry import options_per_policy
from ..profiles.table_io import resolve_table


def parse_policy_options(texts: list[str] | None, flag: str = "--policy-option") -> dict:
    """`[POLICY.]KEY=VALUE` texts as policy options: VALUE as JSON where it parses (numbers, true, lists),
    else the text itself, so that `p=-1` and `mode=fast` both need no quoting. `POLICY.KEY` stays one
    key here; `registry.options_per_policy` gives it to that policy only."""
    options: dict = {}
    for text in texts or ():
        key, sep, value = text.partition("=")
        key = key.strip()
        scope, dot, name = key.rpartition(".")
        if not sep or not name.isidentifier() or (dot and not scope):
            raise InputError(flag, text, "expected [POLICY.]KEY=VALUE with KEY an option name, e.g. p=-1 or sia.p=-0.5")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def add_parser(sub) -> None:
    p = sub.add_parser(
        "simulate", help="simulate a trace on a cluster with a policy",
        description="Simulate Gavel's round-based scheduler on a generated or given trace and report "
                    "job completion times, utilization and cost.")
    p.add_argument("--policy", default="las",
                   help="policy name (see `gavel-ng policies`; default las), or several comma-separated "
                        "(e.g. las,las_agnostic) to run each on the same trace and compare them with the first")
    add_plugin_flag(p, "simulating")
    p.add_argument("--cluster", default="v100=36,p100=36,k80=36",
                   help="GPUs per type and optionally GPUs per server of that type, TYPE=COUNT[:PER_SERVER],..., "
                        "e.g. v100=36,p100=36,k80=36 or t4=24:4,a100=16:8; or a named cluster: "
                        + "; ".join(f"{k} ({v})" for k, v in NAMED_CLUSTERS.items()))
    p.add_argument("--gpus-per-server", type=int, default=4,
                   help="GPUs per server of the types --cluster gives no size (default 4)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--jobs-per-hour", type=float, help="continuous trace: Poisson arrivals at this rate")
    src.add_argument("--static", type=int, metavar="N", help="static trace: N jobs, all at t=0")
    src.add_argument("--trace", metavar="FILE", help="a Gavel trace file (10 tab-separated columns) or a Pollux "
                                                     "workload CSV (name,time,application,num_replicas,batch_size), "
                                                     "told apart by content")
    src.add_argument("--workload", choices=WORKLOAD_NAMES,
                     help="pollux: Pollux's workload (Table 1 mix, --jobs jobs in --hours hours, Poisson arrivals); "
                          "sia-philly, sia-helios (160 jobs in 8 h), sia-newtrace (960 jobs in 48 h, diurnal with "
                          "bursts): Sia's job mixes (docs/elastic.md); policies that run adaptive jobs adapt them, "
                          "the others run each at its tuned GPU count and batch")
    p.add_argument("--trace-format", choices=("gavel", "pollux"),
                   help="the --trace file's format (default: read from its content)")
    p.add_argument("--jobs", type=int, help="--workload: number of jobs (default: the workload's, 160 or 960)")
    p.add_argument("--hours", type=float, help="--workload: arrival window in hours (default: the workload's, 8 or 48)")
    p.add_argument("--elastic-profiles", default="modeled", metavar="|".join(PROFILE_SETS),
                   help="a drawn workload's or Pollux CSV's profile set: modeled (default: gavel_ng's performance "
                        "model) or sia (fitted to the Sia artifact's measurements; docs/elastic.md); fixed and "
                        "adaptive jobs both use it")
    p.add_argument("--realloc-delay", type=float, default=30.0, metavar="SECONDS",
                   help="adaptive jobs: seconds lost at each change of GPU count or type (default 30, as Pollux); "
                        "under --elastic-profiles sia every job pays its application's measured delay instead")
    p.add_argument("--policy-model", choices=("exact", "learned"), default="exact",
                   help="what round policies see of an adaptive job's goodput: the simulator's exact model "
                        "(default) or one learned from the job's own runs, as Sia learns it (docs/elastic.md)")
    p.add_argument("--policy-option", action="append", metavar="[POLICY.]KEY=VALUE",
                   help="an option of the policy, a keyword argument of its function (repeatable; VALUE as JSON "
                        "where it parses, else text), e.g. p=-1 or budget=20. With several --policy names, KEY "
                        "goes to each one that takes an option of that name (an error if none does) and "
                        "POLICY.KEY, e.g. sia.p=-0.5, to that policy only")
    p.add_argument("--rules", metavar="FILE", help="cluster rules as JSON: quotas, one_distributed_per_server, "
                   "server_labels, admission (README, 'Constraints and admission'); jobs' own rules are a "
                   "trace's optional 11th column")
    p.add_argument("--entities", metavar="FILE", help="the entities jobs belong to, as JSON {name: {weight, policy}}: "
                   "what the hierarchical policy shares across and quotas are keyed by; a job's entity is its "
                   "trace rules' \"entity\"")
    p.add_argument("--multi-gpu", action="store_true", help="generated jobs ask for 1/2/4/8 GPUs (70/10/15/5 %%)")
    p.add_argument("--priorities", action="store_true", help="generated jobs: 20 %% get weight 5")
    p.add_argument("--slos", action="store_true", help="generated jobs get SLOs of 1.2x, 2x or 10x their duration")
    p.add_argument("--window", help="job ids START:END whose JCTs are measured (continuous default 4000:5000; "
                                    "otherwise all jobs)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated trace and of random choices")
    p.add_argument("--round-seconds", type=float, help="round length (default: each policy's declared interval, "
                   "360 s for allocation policies, 60 s for goodput, pollux and tiresias; see `gavel-ng policies`)")
    p.add_argument("--throughputs", metavar="TABLE",
                   help="throughput table: gavel-osdi20 (Gavel's measured K80/P100/V100 table), a Gavel-format "
                        ".json file or a .csv as `gavel-ng profiles export` writes it (default: the built-in "
                        "modeled profiles)")
    p.add_argument("--ideal", action="store_true", help="grant exact allocation fractions (no mechanism)")
    p.add_argument("--gavel-compat", action="store_true", help="reproduce the Gavel prototype simulator's choices")
    p.add_argument("--min-solve-interval", type=float, default=0.0, metavar="S",
                   help="re-solve at most every S simulated seconds (default 0: on every reset event)")
    p.add_argument("--preemption-overhead", type=float, default=0.0, metavar="S",
                   help="seconds lost by a job each time it is (re)launched rather than renewed (default 0)")
    p.add_argument("--start-overhead", type=float, default=None, metavar="S",
                   help="seconds a mid-round start on free GPUs (backfill) costs: no job is vacating them, so a "
                        "cluster's costs less than a launch at a round start (default: --preemption-overhead)")
    p.add_argument("--no-backfill", action="store_true",
                   help="leave GPUs a job frees mid-round idle until the round ends (Gavel's rounds; "
                        "--gavel-compat implies it). Default: the round's waiting entries use them")
    p.add_argument("--plan-at-boundary", action="store_true",
                   help="plan each round at its start, knowing every arrival and completion until then (Gavel's "
                        "simulator; --gavel-compat implies it). Default: plan it as far ahead as the runtime does "
                        "(0.3 of a round, at most 30 s), knowing what happened until then")
    p.add_argument("--ledger", choices=("decay", "reset"), default="decay",
                   help="mechanism memory: decayed time received kept across re-solves (default) or "
                        "restarted at every reset event (the paper's literal rule)")
    p.add_argument("--cold-solves", action="store_true", help="solve every allocation from scratch (no warm LP)")
    p.add_argument("--space-sharing", action="store_true",
                   help="jobs of equal scale factor may share GPUs: solve POLICY_packed with the table's pair "
                        "throughputs (any *_packed policy and gandiva always do)")
    p.add_argument("--placement-sensitive", "--placement", action="store_true", dest="placement_sensitive",
                   help="placement-sensitive policy: every type gets a TYPE_unconsolidated twin (multi-GPU jobs "
                        "spread over servers, at the table's unconsolidated throughput) on the same GPUs. Off by "
                        "default: it changes nothing for single-GPU traces, and without it a job that ends up "
                        "split still runs at the unconsolidated throughput")
    p.add_argument("--estimate-throughputs", action="store_true",
                   help="the policy sees a throughput estimator (jobs profiled against reference jobs on arrival, "
                        "measurements fed back each round) instead of the table; jobs run at the table's")
    p.add_argument("--profile-fraction", type=float, default=0.25, metavar="F",
                   help="with --estimate-throughputs: share of (worker type, reference job) cells profiled when "
                        "a job arrives (default 0.25)")
    p.add_argument("--reference-jobs", type=int, metavar="N",
                   help="with --estimate-throughputs: keep only N job types (seeded) as reference jobs; the "
                        "others are new to the estimator (default: every type of the table)")
    p.add_argument("--max-hours", type=float, help="simulated-time cap; a run that hits it is marked unstable")
    p.add_argument("--max-active-jobs", type=int, default=4000, help="active-job cap (marks the run unstable)")
    p.add_argument("--save-trace", metavar="FILE", help="also write the trace used (a Pollux workload as its CSV, "
                   "any other in the Gavel format)")
    p.add_argument("--out", metavar="DIR", help="write jobs.csv and summary.json here")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..simulator import default_table
    from ..simulator.flags import config_from_settings
    from ..simulator.flags import flag as flag_of

    load_plugins(args.plugin)
    policies = list(dict.fromkeys(p.strip() for p in args.policy.split(",") if p.strip())) or ["las"]
    for name in policies:
        get_policy(name)   # an unknown name (a forgotten --plugin?) fails before any work
    options = options_per_policy(policies, parse_policy_options(args.policy_option), "--policy-option")
    if args.gpus_per_server < 1:
        raise InputError("--gpus-per-server", args.gpus_per_server, "must be at least 1")
    cluster = Cluster.parse(args.cluster, gpus_per_server=args.gpus_per_server)
    if args.static is not None and args.static < 1:
        raise InputError("--static", args.static, "must be at least 1 job")
    if args.round_seconds is not None and args.round_seconds <= 0:
        raise InputError("--round-seconds", args.round_seconds, "must be positive")
    if not args.realloc_delay >= 0:
        raise InputError("--realloc-delay", args.realloc_delay, "must be a number of seconds >= 0")
    if args.trace_format and not args.trace:
        raise InputError("--trace-format", args.trace_format, "names the format of a --trace file")
    pollux = source_format(args) == "pollux"
    for flag in ("jobs", "hours"):
        if getattr(args, flag) is not None and not args.workload:
            raise InputError(f"--{flag}", getattr(args, flag), "applies to --workload")
    if check_profiles(args.elastic_profiles, "--elastic-profiles") != "modeled" and not pollux:
        raise InputError("--elastic-profiles", args.elastic_profiles, "applies to a drawn workload or a Pollux CSV")
    # a Pollux workload's fixed jobs get their table from the simulator unless one is given
    table = resolve_table(args.throughputs) if args.throughputs else \
        None if pollux else default_table(cluster.worker_types)
    trace = load_trace(args, cluster, table, pollux)
    config = config_from_settings(args, policies[0], options[policies[0]], flag_of)
    return report(args, policies, cluster, table, trace, config, options)


def source_format(args) -> str:
    """'pollux' (a Pollux workload: --workload, or a --trace file that is one) or 'gavel'."""
    if args.workload:
        return "pollux"
    if args.trace:
        from ..traces import trace_format

        return args.trace_format or trace_format(args.trace)
    return "gavel"


def load_trace(args, cluster: Cluster, table, pollux: bool):
    """The jobs to run: an ElasticTrace for a Pollux workload, else a Gavel Trace or generator."""
    from ..traces import TraceGenerator, TraceSpec, generate, read_trace

    if pollux:
        from ..elastic.workload import load_workload

        return load_workload(cluster, args.trace, args.jobs, args.hours, args.seed, workload=args.workload or "pollux",
                             profiles=args.elastic_profiles)
    spec = TraceSpec(args.jobs_per_hour, args.multi_gpu, args.priorities, args.slos, args.seed)
    if args.trace:
        return read_trace(args.trace)
    if args.static is not None:
        return generate(spec, table, args.static)
    return TraceGenerator(spec, table)


def save_trace(trace, path: str) -> None:
    """The trace used, in its own format (read back by `--trace` either way)."""
    from ..elastic.workload import ElasticTrace, write_pollux_csv
    from ..traces import TraceGenerator, write_trace

    if isinstance(trace, ElasticTrace):
        write_pollux_csv(trace, path)
    else:
        write_trace(trace.trace if isinstance(trace, TraceGenerator) else trace, path)


def report(args, policies: list[str], cluster: Cluster, table, trace, config,
           options: dict[str, dict] | None = None) -> int:
    """Run each policy on the same trace, with its own `options` (by name). Each run's summary is printed
    and its outputs written (--out) as soon as it finishes, so that a long multi-policy run stopped by
    SIGINT or SIGTERM keeps every policy that finished. A policy whose own code or formulation fails
    (errors.PolicyError) is one line on stderr; the others still run, and the status is 2."""
    from ..errors import PolicyError
    from ..simulator import simulate
    from ..simulator.compare import comparison_line, comparisons
    from .progress import SimulationProgress

    several = len(policies) > 1
    results, failed = [], []
    stopped = None
    with _signals_stop() as stop:
        try:
            for name in policies:   # the same trace for each (a generator draws the same jobs again)
                with SimulationProgress(name if several else "", enabled=not args.json) as progress:
                    run_config = dataclasses.replace(config, policy=name,
                                                     options=(options or {}).get(name, config.options))
                    try:
                        result = simulate(cluster, table, trace, run_config, progress=progress)
                    except PolicyError as exc:
                        if not several:
                            raise
                        failed.append({"policy": name, "error": str(exc)})
                        print(f"gavel-ng simulate: error: {exc}", file=sys.stderr, flush=True)
                        continue
                with stop.held():   # a stop now waits until this run is printed and written
                    results.append(result)
                    if not args.json:
                        print(("\n" if len(results) > 1 else "") + _text(result.summary), flush=True)
                    _write(args, result, several)
        except KeyboardInterrupt:
            stopped = stop.signal or "SIGINT"
    _finish(args, results, trace)
    if args.json:
        runs = [r.summary for r in results]
        out = runs[0] if not several and runs else {"runs": runs, "comparisons": comparisons(runs)}
        if several and failed:
            out["failed"] = failed
        if stopped:
            out["interrupted"] = stopped
        print(json.dumps(out))
    elif len(results) > 1:
        if args.out:
            out = Path(args.out)
            dirs = ", ".join(f"{out / r.summary['policy']}/" for r in results)
            print(f"\nper policy: {dirs}; "
                  f"JCT CDF of {'both' if len(results) == 2 else 'all'}: {out / 'jct.png'}")
        print("\n" + "\n".join(comparison_line(c) for c in comparisons([r.summary for r in results])))
    if stopped:
        print(f"gavel-ng simulate: stopped by {stopped} after {len(results)} of {len(policies)} policies; "
              "their results are above" + (f" and in {args.out}" if args.out and results else ""), file=sys.stderr)
        return 143 if stopped == "SIGTERM" else 130
    return 2 if failed else 0


def _write(args, result, several: bool) -> None:
    """One run's outputs, the moment it finished: OUT/ for a single policy, OUT/POLICY/ for several."""
    if not args.out:
        return
    from ..simulator import write_outputs

    try:
        write_outputs(result, Path(args.out) / result.summary["policy"] if several else args.out)
    except OSError as exc:
        raise InputError("--out", exc.filename, exc.strerror) from None


def _finish(args, results: list, trace) -> None:
    """What needs every run: the CDF of all and the comparisons (OUT/jct.png, OUT/comparison.json), and
    --save-trace."""
    from ..simulator.compare import write_compared

    try:
        if args.out and len(results) > 1:
            write_compared(results, args.out)
        if args.save_trace:
            save_trace(trace, args.save_trace)
    except OSError as exc:
        raise InputError("--out" if args.out else "--save-trace", exc.filename, exc.strerror) from None


class _signals_stop:
    """While active, SIGINT and SIGTERM stop the run (a KeyboardInterrupt), and `signal` names the one that
    did; inside `held()` (a finished run being printed and written) the stop waits until it is done, so
    that what finished is kept whole."""

    def __init__(self):
        self.signal: str | None = None
        self._held = False
        self._saved: dict = {}

    def _stop(self, signum, frame) -> None:
        self.signal = signal.Signals(signum).name
        if not self._held:
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._saved[sig] = signal.signal(sig, self._stop)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    @contextlib.contextmanager
    def held(self):
        self._held = True
        try:
            yield
        finally:
            self._held = False
        if self.signal is not None:
            raise KeyboardInterrupt


def _usd(v) -> str:
    return "n/a" if v is None else f"${v:,.2f}"


def _text(s: dict) -> str:
    def h(v):
        return "n/a" if v is None else f"{v:.2f} h"

    left = s.get("jobs_unfinished") or 0
    lines = [
        f"policy {s['policy']}  ({s['mode']}, rounds of {s['round_seconds']:g} s, seed {s['seed']})",
        f"jobs measured      {s['jobs_measured']} (ids {s['window'][0]}..{s['window'][1] - 1})",
        *([f"UNFINISHED         {left} of {s['jobs_in_window']} measured jobs unfinished at the time cap: JCT, "
           "makespan and cost leave them out, so they read better than the run was"] if left else []),
        f"average JCT        {h(s['avg_jct_hours'])}   p50 {h(s['p50_jct_hours'])}   p90 {h(s['p90_jct_hours'])}"
        f"   p99 {h(s['p99_jct_hours'])}",
        f"makespan           {h(s['makespan_hours'])}",
        f"utilization        {s['utilization']:.3f}",
        f"GPU hours          {'n/a' if s['gpu_hours'] is None else format(s['gpu_hours'], '.1f')} (GPUs busy)",
        f"re-allocations     {'n/a' if s['reallocations'] is None else s['reallocations']} "
        f"({s['adaptive_jobs'] or 0} adaptive jobs)",
        f"cost               {_usd(s['total_cost_usd'])} (the measured jobs' GPU time)",
        f"SLO violations     {s['slo_violations']} of {s['jobs_with_slo']} jobs with SLOs"
        + (f"; {s['slo_dropped']} dropped by the policy" if s.get("slo_dropped") else ""),
        f"FTF rho            avg {s['avg_ftf_rho']}  max {s['max_ftf_rho']}",
        f"lease renewals     {s['lease_renewal_fraction']:.3f} of launches",
        f"policy solves      {s['policy_solves']} ({s['solve_seconds']:.2f} s)   rounds {s['rounds']}"
        + (f"\nsolver fallbacks   {s['solver_fallbacks']} of {s['policy_solves']} solves: the solver failed on the "
           "policy's problem and a valid fallback allocation ran instead" if s.get("solver_fallbacks") else ""),
        f"simulated          {s['simulated_hours']:.1f} h in {s['wall_seconds']:.2f} s",
    ]
    if s.get("policy_solved", s["policy"]) != s["policy"] or s.get("paired_fraction"):
        lines.insert(1, f"space sharing      {s['policy_solved']}, {s['paired_fraction']:.3f} of job time in pairs")
    if s.get("estimated_throughputs"):
        lines.insert(1, f"estimated          throughputs from the estimator ({s['estimator_measurements']} "
                        f"measurements, {s['estimator_rejected']} rejected)")
    if s.get("refusals"):   # admission control (gavel_ng.rules)
        lines.insert(2, f"refused            {s['refused']} of the measured jobs by admission ("
                        + ", ".join(f"{k}: {v}" for k, v in s["refusals"].items()) + " in the run)")
    if s.get("backfill"):   # mid-round backfill (gavel_ng.mechanism.backfill)
        lines.insert(-3, f"mid-round backfill {s['backfilled_entries']} entries, "
                         f"{s['backfill_gpu_hours']:.1f} GPU hours")
    for name, c in s.get("constraints", {}).items():   # the policy's own, measured on what ran (mechanism.limits)
        lines.insert(-3, f"constraint         {name}: enforced {c['enforced']}, largest excess "
                         f"{c['max_round_excess']:g} in a round, {c['run_excess']:g} over the run")
    if s["unstable"]:
        lines.append(f"UNSTABLE: {s['unstable_reason']}")
    if s.get("warnings"):
        lines.append(f"warnings           {sum(w['count'] for w in s['warnings'])}, each kind logged once "
                     "when it first occurred:")
        lines += format_warnings(s["warnings"], indent="  ")
    return "\n".join(lines)
