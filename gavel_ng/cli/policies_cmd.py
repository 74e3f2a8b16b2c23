"""`gavel-ng policies`: every registered policy with its objective in one line."""

from __future__ import annotations

from ..policies import aliases, get_policy, list_policies


def add_parser(sub) -> None:
    p = sub.add_parser("policies", help="list scheduling policies and their objectives",
                       description="List the registered policies, their objectives and Gavel-compatible aliases.")
    p.set_defaults(run=run)


def run(args) -> int:
    names = list_policies()
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {get_policy(name).summary}")
    print("\nGavel prototype names:")
    for alias, target in sorted(aliases().items()):
        print(f"  {alias} -> {target}")
    return 0
