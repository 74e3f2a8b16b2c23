"""A failing policy is loud, never a silent equal share (issue 37, part 2).

An error of the policy's own code or formulation (it raises, returns no objective, states a
non-DCP objective or constraints that admit nothing; a round policy returns no decision or
more GPUs than exist) stops that policy's run with one line naming it, its file:line and the
error, exit status 2, no traceback: in `simulate`, `solve`, `sweep` (the point fails with that
line, the others run) and at a scheduler's start. A solver's numerical failure on a valid
formulation is not such an error: it falls back to a valid allocation, counted exactly.
"""

from __future__ import annotations

import json
import logging
import re
import textwrap

import numpy as np
import pytest

from gavel_ng.cli import main
from gavel_ng.errors import PolicyError

BAD = textwrap.dedent('''
    import cvxpy as cp
    import numpy as np

    import gavel_ng as g


    @g.policy("typo", "a misspelled field")
    def typo(p):
        return p.maximize_min(p.normalized_thrr)


    @g.policy("returns_int", "returns an int")
    def returns_int(p):
        return 3


    @g.policy("returns_none", "forgets to return")
    def returns_none(p):
        p.maximize_min(p.normalized_thr)


    @g.policy("not_dcp", "maximizes a convex function")
    def not_dcp(p):
        return cp.Maximize(cp.sum(cp.square(p.normalized_thr.cvx)))


    @g.policy("impossible", "a constraint no allocation meets")
    def impossible(p):
        p.add_constraint(p.thr[0] >= 1e9)
        return p.maximize_min(p.normalized_thr)


    @g.policy("divides", "raises ZeroDivisionError")
    def divides(p):
        return p.maximize_min(p.normalized_thr / 0 if 1 / 0 else p.thr)


    @g.policy("badly_scaled", "a valid objective Clarabel and SCS both fail on")
    def badly_scaled(p, scale=1e12):
        return cp.Maximize(cp.sum(cp.log(p.normalized_thr.cvx * scale)))


    @g.round_policy("round_raises", "raises KeyError")
    def round_raises(ctx):
        return {}["missing"]


    @g.round_policy("round_shape", "one column for all jobs")
    def round_shape(ctx):
        return 0


    @g.round_policy("round_greedy", "every job on the largest configuration")
    def round_greedy(ctx):
        return np.full(len(ctx.jobs), ctx.columns.num - 1)
''')

# the line of each policy's code named in its error: the raising line, else where it is defined
WHERE = {"typo": "return p.maximize_min(p.normalized_thrr)", "returns_int": '@g.policy("returns_int"',
         "returns_none": '@g.policy("returns_none"', "not_dcp": '@g.policy("not_dcp"',
         "impossible": '@g.policy("impossible"', "divides": "return p.maximize_min(p.normalized_thr / 0",
         "round_raises": 'return {}["missing"]', "round_shape": '@g.round_policy("round_shape"',
         "round_greedy": '@g.round_policy("round_greedy"'}
SAYS = {"typo": "has no 'normalized_thrr' (did you mean normalized_thr?)", "returns_int": "returned int",
        "returns_none": "returned None", "not_dcp": "is not DCP", "impossible": "admit no allocation",
        "divides": "ZeroDivisionError: division by zero", "round_raises": "KeyError: 'missing'",
        "round_shape": "returned int", "round_greedy": "GPUs of k80 for one round; there are 4"}
ALLOCATION = ["typo", "returns_int", "returns_none", "not_dcp", "impossible", "divides"]
ROUND = ["round_raises", "round_shape", "round_greedy"]
SMALL = ["--cluster", "v100=4,k80=4", "--static", "3"]


@pytest.fixture
def bad(tmp_path, clean_registry):
    path = tmp_path / "bad_policies.py"
    path.write_text(BAD)
    return path


def line_of(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def assert_one_line(err: str, policy: str, path, command: str) -> None:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"gavel-ng {command}: error: policy='{policy}': failed at "
                               f"{path}:{line_of(path, WHERE[policy])}: "), lines[0]
    assert SAYS[policy] in lines[0], lines[0]


@pytest.mark.parametrize("policy", ALLOCATION + ROUND)
def test_simulate_stops_with_one_line_naming_the_policy(bad, capsys, policy):
    source = ["--workload", "pollux", "--jobs", "3", "--hours", "0.2", "--cluster", "v100=4,k80=4"] \
        if policy in ROUND else SMALL
    assert main(["simulate", "--plugin", str(bad), "--policy", policy, *source]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert_one_line(err, policy, bad, "simulate")


@pytest.mark.parametrize("policy", ALLOCATION)
def test_solve_stops_with_one_line_naming_the_policy(bad, capsys, policy):
    assert main(["solve", "--plugin", str(bad), "--policy", policy, "--example", "paper_example"]) == 2
    assert_one_line(capsys.readouterr().err, policy, bad, "solve")


def test_several_policies_the_failing_one_is_one_line_the_others_run(bad, capsys, tmp_path):
    rc = main(["simulate", "--plugin", str(bad), "--policy", "las,typo,fifo", *SMALL, "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert rc == 2
    assert [x for x in err.splitlines() if x.strip()][-1].startswith("gavel-ng simulate: error: policy='typo'")
    assert "policy las " in out and "policy fifo " in out and "las vs fifo:" in out
    assert (tmp_path / "o" / "las" / "summary.json").exists() and not (tmp_path / "o" / "typo").exists()


def test_sweep_marks_the_point_failed_with_that_line_and_runs_the_others(bad, capsys, tmp_path):
    from gavel_ng.sweep import ResultsStore

    results = tmp_path / "r.csv"
    assert main(["sweep", "--plugin", str(bad), "--policy", "typo,las,impossible", "--cluster", "v100=4,k80=4",
                 "--static", "3", "--results", str(results), "--workers", "1"]) == 1
    df = ResultsStore(results).load().set_index("policy")
    assert df.loc["las", "status"] == "ok"
    for policy in ("typo", "impossible"):
        assert df.loc[policy, "status"] == "error"
        assert df.loc[policy, "error"].startswith(f"policy='{policy}': failed at {bad}:{line_of(bad, WHERE[policy])}")
    assert f"failed at {bad}:" in capsys.readouterr().out


def test_a_scheduler_refuses_to_start_on_a_policy_that_fails(bad, tmp_path):
    from gavel_ng.policies.plugins import load_plugins
    from gavel_ng.runtime.config import ClusterConfig
    from gavel_ng.runtime.service import SchedulerService

    load_plugins([str(bad)])
    for i, policy in enumerate(["typo", "not_dcp", "round_greedy", "min_cost"]):   # min_cost: no prices given
        config = ClusterConfig(worker_types=["v100", "k80"], policy=policy, plugins=[str(bad)]).resolved()
        with pytest.raises(PolicyError, match=f"policy='{policy}': failed at "):
            SchedulerService(config, tmp_path / f"state{i}", port=0, bind="127.0.0.1")


class _Jobs:
    """Every job equal: what the allocator's policy input needs, nothing of a backend."""

    def policy_jobs(self, jobs):
        from gavel_ng.allocator import PolicyJobs

        n = len(jobs)
        return PolicyJobs(list(jobs), np.ones(n), np.ones(n), np.full(n, 100.0), np.full(n, 100.0), np.zeros(n),
                          np.full(n, np.inf))


def test_every_builtin_policy_passes_the_start_probe(caplog):
    """The probe must never refuse a policy that works: every registered one, prices given; and it decides,
    rather than give up on an error of its own (which it logs as inconclusive and lets pass)."""
    from gavel_ng.policies import get_policy, list_policies
    from gavel_ng.runtime.probe import probe_policy

    caplog.set_level(logging.DEBUG, logger="gavel_ng.runtime.probe")
    for name in list_policies():
        probe_policy(get_policy(name), ["v100", "p100", "k80"], {"v100": 2.48, "p100": 1.46, "k80": 0.45})
    assert len(list_policies()) > 20 and "inconclusive" not in caplog.text, caplog.text


def test_a_solvers_failure_falls_back_and_every_one_is_counted(bad, capsys):
    """`badly_scaled` is a valid formulation (DCP, bounded) on which Clarabel and SCS both fail: each
    solve falls back to a valid allocation; the summary, --json and the ledger count every one."""
    args = ["simulate", "--plugin", str(bad), "--policy", "badly_scaled", *SMALL]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert main([*args, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    said = {w["message"]: w["count"] for w in s["warnings"]}
    assert s["solver_fallbacks"] == said["solver failed; using a fallback allocation"] == s["policy_solves"] >= 3
    assert re.search(rf"solver fallbacks\s+{s['solver_fallbacks']} of {s['policy_solves']} solves", text), text
    assert main([*args, "--policy-option", "scale=1"]) == 0 and "solver fallbacks" not in capsys.readouterr().out


def test_an_equal_share_fallback_is_counted_each_time():
    """A solve that raises outside the policy (here bad throughputs) falls back to equal shares: counted
    in `fallbacks` every time, not once per streak."""
    from gavel_ng.allocator import PolicyAllocator

    class Beliefs:
        fixed = False

        def isolated(self, jobs, columns):
            return np.array([[np.inf, 1.0], [1.0, 1.0]])[: len(jobs)]

    alloc = PolicyAllocator("las", ["v100", "k80"], _Jobs(), Beliefs(), np.array([1.0, 1.0]), warm=False)
    for _ in range(20):
        alloc.allocate([0, 1], 0.0)
    assert alloc.fallbacks == 20 and alloc.solves == 20


def test_on_a_cluster_a_policy_error_at_a_solve_is_kept_counted_and_logged_once(bad, caplog):
    """A live cluster's jobs keep running: the allocator falls back to equal shares, keeps the error
    (for `gavel-ng status`) and logs it as an ERROR; the simulator's raises it."""
    import logging

    from gavel_ng.allocator import PolicyAllocator
    from gavel_ng.logs import collapse_repeats
    from gavel_ng.policies.plugins import load_plugins

    load_plugins([str(bad)])

    class Beliefs:
        fixed = True

        def isolated(self, jobs, columns):
            return np.ones((len(jobs), 2))

    live = PolicyAllocator("divides", ["v100", "k80"], _Jobs(), Beliefs(), np.array([1.0, 1.0]),
                           policy_errors="fallback")
    with caplog.at_level(logging.ERROR, logger="gavel_ng"), collapse_repeats() as ledger:
        outs = [live.allocate([0, 1], 0.0) for _ in range(3)]
    assert live.policy_errors == 3 and live.fallbacks == 3 and isinstance(live.policy_error, PolicyError)
    assert [r.levelname for r in caplog.records if "divides" in r.getMessage()] == ["ERROR"]
    assert [w["count"] for w in ledger.summary() if w["kind"] == "policy error"] == [3]
    assert all(np.isfinite(o.X).all() and (o.X.sum(axis=1) <= 1 + 1e-9).all() for o in outs)
    sim = PolicyAllocator("divides", ["v100", "k80"], _Jobs(), Beliefs(), np.array([1.0, 1.0]))
    with pytest.raises(PolicyError, match="ZeroDivisionError"):
        sim.allocate([0, 1], 0.0)
