"""A policy tried once before a scheduler starts, so that its own errors stop the start, not a cluster.

On a cluster the jobs must keep running whatever the policy does: an allocation policy that fails
at a solve is reported (an ERROR line, `gavel-ng status`, the `gavel_policy_errors` metric) and
the round runs on equal shares until it solves again (allocator.PolicyAllocator). What can be
found before any job is at stake is found here: the policy stated and solved (an allocation
policy) or asked for one round (a round policy) on two small jobs on the configured worker types.
An error of its own (errors.PolicyError: its code raises, it returns no objective or no decision,
its objective is not DCP, its constraints admit nothing, it needs prices the config lacks) makes
the scheduler refuse to start with that one line. Anything else the probe meets is left to the
rounds: two made-up jobs are not the cluster's.
"""

from __future__ import annotations

import logging

from ..assembly import probe
from ..errors import PolicyError
from ..policies.registry import PolicySpec

log = logging.getLogger(__name__)


def probe_policy(spec: PolicySpec, worker_types: list[str], prices: dict[str, float] | None = None,
                 options: dict | None = None) -> None:
    """PolicyError if the policy fails on two one-GPU jobs, equally fast on every type (module docstring;
    the assembly runs it as its kind runs, assembly.probe)."""
    try:
        probe(spec, worker_types, prices, options)
    except PolicyError:
        raise
    except Exception as exc:   # noqa: BLE001 - not the policy's own error: the rounds will tell
        log.debug("policy %s: probe inconclusive (%s: %s)", spec.name, type(exc).__name__, exc)
