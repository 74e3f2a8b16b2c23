"""`gavel-ng policies`: every registered policy, allocation or round kind, with its objective in
one line; a round policy also says how it runs adaptive jobs and how often it decides."""

from __future__ import annotations

from ..policies import aliases, get_policy, list_policies

JOBS = {"fixed": "every job at its tuned size", "adaptive": "adaptive jobs only", "both": "adaptive jobs adapt"}


def add_parser(sub) -> None:
    p = sub.add_parser("policies", help="list scheduling policies and their objectives",
                       description="List the registered policies, their objectives and Gavel-compatible aliases.")
    p.set_defaults(run=run)


def run(args) -> int:
    names = list_policies()
    width = max(len(n) for n in names)
    for name in names:
        spec = get_policy(name)
        extra = f"  [round policy, every {spec.round_seconds:g} s; {JOBS[spec.jobs]}]" if spec.is_round else ""
        print(f"{name:<{width}}  {spec.summary}{extra}")
    print("\nRound policies decide every round (their default interval in brackets), allocation policies every "
          "360 s by default;\nevery one runs by name in simulate, sweep and on a cluster.")
    print("\nGavel prototype names:")
    for alias, target in sorted(aliases().items()):
        print(f"  {alias} -> {target}")
    return 0
