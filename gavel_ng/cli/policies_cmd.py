"""`gavel-ng policies`: every registered policy, of both kinds, from the one registry.

An allocation policy states an objective over time shares (Gavel's round mechanism runs it;
`solve` solves it once); a round policy decides each round itself, and the listing says how
it runs adaptive jobs and how often it decides unless told otherwise."""

from __future__ import annotations

from ..policies import aliases, get_policy, list_policies
from ..policies.plugins import add_flag as add_plugin_flag
from ..policies.plugins import load_plugins
from ..policies.registry import ADAPTIVE, BOTH, FIXED

# how a round policy runs adaptive jobs (registry.round_policy's `jobs`), in a few words
ADAPTIVE_JOBS = {BOTH: "adapt", FIXED: "run fixed", ADAPTIVE: "adapt (all must)"}


def add_parser(sub) -> None:
    p = sub.add_parser("policies", help="list scheduling policies and their objectives",
                       description="List the registered policies (allocation and round policies), their "
                                   "objectives and Gavel-compatible aliases.")
    add_plugin_flag(p, "listing")
    p.set_defaults(run=run)


def rows() -> list[tuple[str, str, str, str, str]]:
    """(name, kind, adaptive jobs, default round, summary) of every registered policy."""
    out = []
    for name in list_policies():
        spec = get_policy(name)
        terms = spec.round_terms()   # None: an allocation policy declares neither
        jobs, every = ("-", "-") if terms is None else (ADAPTIVE_JOBS.get(terms[0], terms[0]), f"{terms[1]:g} s")
        out.append((name, spec.kind, jobs, every, spec.summary))
    return out


def run(args) -> int:
    load_plugins(getattr(args, "plugin", []))
    table = rows()
    head = ("policy", "kind", "adaptive jobs", "round", "objective")
    widths = [max(len(r[i]) for r in [head, *table]) for i in range(4)]
    for r in [head, *table]:
        print("  ".join(f"{c:<{w}}" for c, w in zip(r[:4], widths)) + "  " + r[4])
    print("\nallocation: an objective over time shares that Gavel's rounds carry out (also `gavel-ng solve`); "
          "round: decides every round (simulate, or on a cluster), every `round` seconds unless told otherwise; "
          "`adaptive jobs` says whether jobs with a goodput model (a Pollux workload, a job's \"adaptive\" block) "
          "adapt their GPU count and batch under it.")
    print("\nGavel prototype names:")
    for alias, target in sorted(aliases().items()):
        print(f"  {alias} -> {target}")
    return 0
