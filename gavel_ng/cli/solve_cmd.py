"""`gavel-ng solve`: the optimal allocation for one problem file."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..policies import get_policy, solve
from ..policies.plugins import add_flag as add_plugin_flag
from ..policies.plugins import load_plugins
from ..problem_io import load_problem


def add_parser(sub) -> None:
    p = sub.add_parser(
        "solve", help="compute the optimal allocation for a problem file",
        description="Solve one scheduling problem (JSON: cluster, jobs with per-type throughputs) "
                    "with a policy and print the allocation.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--problem", metavar="FILE.json", help="problem file (see README for the format)")
    src.add_argument("--example", metavar="NAME", choices=example_names(),
                     help=f"a shipped example problem: {', '.join(example_names())}")
    p.add_argument("--policy", help="policy name (default: the file's 'policy', else las); "
                                    "see `gavel-ng policies`")
    p.add_argument("--solver", help="highs (default), highs-ipm, highs-pdlp, or a cvxpy solver name "
                                    "such as clarabel")
    add_plugin_flag(p, "solving")
    p.add_argument("--space-sharing", action="store_true",
                   help="let two jobs of equal scale factor share a GPU (built-in job types pair from the "
                        "built-in profiles, others from the file's 'pairs'); implied by a NAME_packed policy")
    p.add_argument("--partitions", type=int, default=1, metavar="K",
                   help="split jobs and GPUs into K random sub-problems solved in parallel (POP) and report "
                        "the objective gap to the full solve")
    p.add_argument("--policy-option", action="append", metavar="KEY=VALUE",
                   help="an option of the policy, a keyword argument of its function (repeatable; VALUE as JSON "
                        "where it parses, else text), e.g. budget=20")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--plot", metavar="PNG", help="also draw the allocation as a bar chart")
    p.set_defaults(run=run)


def example_names() -> list[str]:
    return sorted(f.name[:-5] for f in resources.files("gavel_ng.examples").iterdir() if f.name.endswith(".json"))


def example_path(name: str) -> Path:
    return Path(str(resources.files("gavel_ng.examples") / f"{name}.json"))


def run(args) -> int:
    load_plugins(args.plugin)
    path = args.problem or example_path(args.example)
    if args.partitions < 1:
        raise InputError("--partitions", args.partitions, "must be an integer >= 1")
    notes: list[str] = []
    inp, file_policy = load_problem(path, warnings=notes)
    name = args.policy or file_policy or "las"
    spec = get_policy(name)
    if args.space_sharing or spec.packed:
        notes = []
        inp, _ = load_problem(path, space_sharing=True, warnings=notes)
    if args.solver is not None and not args.solver.strip():
        raise InputError("--solver", args.solver, "must name a solver")
    from .simulate_cmd import parse_policy_options

    options = parse_policy_options(args.policy_option)
    if args.partitions > 1:
        from ..policies.lp.pipeline import solve_partitioned

        sol = solve_partitioned(inp, name, args.partitions, solver=args.solver, compare=True, options=options)
    else:
        sol = solve(inp, name, solver=args.solver, options=options)
    sol.warnings[:0] = notes
    thr = _effective(inp, sol)
    result = {
        "policy": spec.name,
        "allocation": sol.allocation.to_dict(digits=6),
        "effective_throughput": {j: round(float(v), 6) for j, v in zip(inp.job_ids, thr)},
        "objective": _finite(sol.objective),
        "solver": sol.solver,
        "solve_seconds": round(sol.solve_seconds, 6),
        "warnings": sol.warnings,
    }
    if getattr(sol, "partition_gap", None) is not None:
        result["partition_gap"] = round(float(sol.partition_gap), 9)
    if args.plot:
        from ..plots import plot_allocation

        plot_allocation(sol.allocation, args.plot, title=f"{spec.name}: time share per worker type")
    if args.json:
        print(json.dumps(result))
    else:
        print(_table(result, sol))
    return 0


def _effective(inp, sol) -> np.ndarray:
    from ..policies.lp.problem import Problem

    return Problem(inp).thr.value(sol.x) if sol.x.size else np.zeros(inp.num_jobs)


def _finite(v):
    return None if v is None or not math.isfinite(v) else round(float(v), 9)


def _table(result: dict, sol) -> str:
    df = sol.allocation.to_pandas().round(4)
    df["effective steps/s"] = [round(result["effective_throughput"].get(r, float("nan")), 3) for r in df.index]
    lines = [f"policy {result['policy']}  objective {result['objective']}  "
             f"solver {result['solver']}  {result['solve_seconds'] * 1000:.1f} ms", "", df.to_string()]
    lines += [f"warning: {w}" for w in result["warnings"]]
    return "\n".join(lines)
