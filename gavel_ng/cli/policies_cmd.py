"""`gavel-ng policies`: every registered policy with its objective in one line, then the
elastic simulator's (adaptive jobs: `simulate --workload pollux`)."""

from __future__ import annotations

from ..elastic.registry import ELASTIC_POLICIES
from ..policies import aliases, get_policy, list_policies
from ..runtime.config import RUNTIME_ELASTIC


def add_parser(sub) -> None:
    p = sub.add_parser("policies", help="list scheduling policies and their objectives",
                       description="List the registered policies, their objectives and Gavel-compatible aliases.")
    p.set_defaults(run=run)


def run(args) -> int:
    names = list_policies()
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {get_policy(name).summary}")
    print("\nElastic workloads (simulate/sweep --workload pollux, or a Pollux .csv trace; * also on a cluster, "
          "resizing jobs with an \"adaptive\" block):")
    for name, spec in ELASTIC_POLICIES.items():
        mark = "*" if name in RUNTIME_ELASTIC else " "
        print(f" {mark}{name:<{width}}  {spec.objective}")
    print("\nGavel prototype names:")
    for alias, target in sorted(aliases().items()):
        print(f"  {alias} -> {target}")
    return 0
