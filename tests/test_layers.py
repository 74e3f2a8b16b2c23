"""gavel_ng's layers, bottom to top, and which may import which (every import counts, as in
test_imports: deferred and TYPE_CHECKING ones too).

* model: what a cluster, a job and its measurements are (errors, jobs, cluster, throughputs,
  traces, profiles, rules, the estimator, the adaptive-job model in `elastic`, ...), in an order of
  its own (MODEL_ORDER): a model part imports only the parts before it. Only `workloads` (the
  PyTorch models) and what names it need torch; the scheduler knows the job types by `jobtypes`.
* protocol: the scheduler <-> worker/job messages: model.
* job side: what runs inside a training job or on a worker (iterator, worker, the shipped
  examples): model and protocol, so that a job starts without the solvers.
* policies (and problem_io, which builds their input from a file): model. Inside, by concern and in
  this order (POLICIES_ORDER): input (what a policy decides from), registry (names only), lp (the
  Problem a policy states, its LP and the cold solve; lp/warm: warm re-solves), rounds (round
  policies' context and configurations), plugins, builtin (the policies themselves).
* mechanism: turns allocations into rounds and placements; it knows nothing of policies or
  solvers: model. allocator, allocation_planner and round_planner put policies and mechanism
  together; assembly builds the loop's planner for a policy from them.
* simulator, runtime: everything below, not each other and not the job side.
* cli, sweep, the package itself and __main__: anything.
"""

from __future__ import annotations

import pytest
from test_imports import ROOT, import_graph

# the model layer bottom to top: each part may import the parts before it, none after it
MODEL_ORDER = ("errors", "logs",                                         # errors and log helpers: no model
               "jobtypes", "throughputs", "jobs", "pairs", "allocation",   # plain records of one thing each
               "columns", "rules",                                       # read throughputs
               "workloads", "profiles",                                  # PyTorch models; the tables built from them
               "cluster", "topology", "estimator", "traces",             # built on profiles, rules, jobs
               "plots", "elastic")                                       # the adaptive-job model uses them all
MODEL = frozenset(MODEL_ORDER)
PROTOCOL = MODEL | {"protocol"}
SOLVING = MODEL | {"policies", "problem_io", "mechanism", "allocator", "allocation_planner", "round_planner",
                   "assembly"}
TOP = None   # may import anything

# top-level part of gavel_ng -> the parts it may import (its own part always)
ALLOWED: dict[str, frozenset[str] | None] = {
    **{m: frozenset(MODEL_ORDER[:i]) for i, m in enumerate(MODEL_ORDER)},
    "protocol": MODEL,
    "iterator": PROTOCOL,
    "worker": PROTOCOL | {"iterator"},
    "examples": PROTOCOL | {"iterator", "worker"},
    "policies": MODEL,
    "problem_io": MODEL | {"policies"},
    "mechanism": MODEL,
    "allocator": MODEL | {"policies", "mechanism"},
    "round_planner": MODEL | {"policies", "mechanism"},
    "allocation_planner": MODEL | {"policies", "mechanism", "allocator"},
    "assembly": MODEL | {"policies", "mechanism", "allocator", "allocation_planner", "round_planner"},
    "simulator": SOLVING | {"protocol"},
    "runtime": SOLVING | {"protocol"},
    "cli": TOP, "sweep": TOP, "": TOP, "__main__": TOP,
}

# policies/ bottom to top: each concern imports only those before it (the package's __init__: any)
POLICIES_ORDER = ("input", "registry", "lp", "lp.warm", "rounds", "plugins", "builtin")


def concern(module: str) -> str | None:
    """`gavel_ng.policies.lp.warm.session` -> `lp.warm`; None outside a concern of policies/."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "policies":
        return None
    return "lp.warm" if parts[2:4] == ["lp", "warm"] else parts[2]


def policies_violations(graph, modules) -> list[tuple[str, str, str]]:
    out = []
    for m, targets in sorted(graph.items()):
        mine = concern(m)
        if mine is None:
            continue
        allowed = POLICIES_ORDER[:POLICIES_ORDER.index(mine)]
        for t, line in sorted(targets.items()):
            theirs = concern(t)
            if theirs is not None and theirs != mine and theirs not in allowed:
                out.append((m, t, f"{modules[m].relative_to(ROOT)}:{line}"))
    return out


def part(module: str) -> str:
    """`gavel_ng.policies.lp.problem` -> `policies`; the package itself -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def violations(graph, modules) -> list[tuple[str, str, str]]:
    """(module, imported module, file:line) of every import the table does not allow."""
    out = []
    for m, targets in sorted(graph.items()):
        allowed = ALLOWED[part(m)]
        if allowed is None:
            continue
        for t, line in sorted(targets.items()):
            if part(t) != part(m) and part(t) not in allowed:
                out.append((m, t, f"{modules[m].relative_to(ROOT)}:{line}"))
    return out


def test_every_part_of_the_package_has_a_layer():
    graph, _ = import_graph()
    unknown = sorted({part(m) for m in graph} - set(ALLOWED))
    assert not unknown, f"new top-level modules without a layer in tests/test_layers.py: {unknown}"


def test_imports_follow_the_layers():
    graph, modules = import_graph()
    bad = violations(graph, modules)
    if bad:
        pytest.fail("imports across layers that tests/test_layers.py does not allow:\n"
                    + "\n".join(f"  {m} -> {t}  ({where})" for m, t, where in bad), pytrace=False)


def test_the_check_sees_a_violation():
    graph = {"gavel_ng.mechanism.rounds": {"gavel_ng.policies.lp.problem": 7, "gavel_ng.topology": 3},
             "gavel_ng.policies.lp.problem": {}, "gavel_ng.topology": {}}
    modules = {m: ROOT / (m.replace(".", "/") + ".py") for m in graph}
    assert violations(graph, modules) == [
        ("gavel_ng.mechanism.rounds", "gavel_ng.policies.lp.problem", "gavel_ng/mechanism/rounds.py:7")]


def test_the_model_layer_has_an_order():
    graph = {"gavel_ng.jobs": {"gavel_ng.traces": 5}, "gavel_ng.traces": {"gavel_ng.jobs": 3}}
    modules = {m: ROOT / (m.replace(".", "/") + ".py") for m in graph}
    assert violations(graph, modules) == [("gavel_ng.jobs", "gavel_ng.traces", "gavel_ng/jobs.py:5")]
    assert len(MODEL_ORDER) == len(MODEL)


def test_policies_concerns_follow_their_order():
    graph, modules = import_graph()
    assert {concern(m) for m in graph} - {None} == set(POLICIES_ORDER), "a concern of policies/ without a place"
    bad = policies_violations(graph, modules)
    if bad:
        pytest.fail("imports across the concerns of policies/ that tests/test_layers.py does not allow:\n"
                    + "\n".join(f"  {m} -> {t}  ({where})" for m, t, where in bad), pytrace=False)
    assert policies_violations({"gavel_ng.policies.input.fields": {"gavel_ng.policies.lp.problem": 4},
                                "gavel_ng.policies.lp.problem": {}},
                               {"gavel_ng.policies.input.fields": ROOT / "gavel_ng/policies/input/fields.py"}) == [
        ("gavel_ng.policies.input.fields", "gavel_ng.policies.lp.problem", "gavel_ng/policies/input/fields.py:4")]
