"""A policy's wrong guess at a field is a message that lists the fields, not a bare AttributeError."""

import pickle

import numpy as np
import pytest

from gavel_ng.columns import Columns
from gavel_ng.errors import InputError
from gavel_ng.policies import SchedulingProblem
from gavel_ng.policies.input.fields import call_policy, is_user_code
from gavel_ng.policies.lp.problem import Problem
from gavel_ng.policies.rounds import RoundContext


def problem() -> SchedulingProblem:
    return SchedulingProblem.build(["a", "b"], ["v100", "k80"], np.array([1.0, 1.0]),
                                   np.array([[4.0, 1.0], [2.0, 1.0]]))


def context() -> RoundContext:
    return RoundContext(0.0, np.arange(2), Columns.types(["v100"]), None, None, [(), ()], np.zeros(2), np.zeros(2),
                        np.zeros(2), 0.0, np.random.default_rng(0), None, None)


@pytest.mark.parametrize("make, label, real", [
    (lambda: Problem(problem()), "p (Problem)", ("thr", "normalized_thr", "maximize_min", "input")),
    (problem, "p.input (SchedulingProblem)", ("throughputs", "scale_factors", "job_ids")),
    (context, "ctx (RoundContext)", ("speedups", "need", "assign", "now", "held")),
])
def test_a_missing_field_lists_what_exists(make, label, real):
    obj = make()
    with pytest.raises(AttributeError) as info:
        obj.nonexistent  # noqa: B018
    text = str(info.value)
    assert text.startswith(f"{label} has no 'nonexistent'") and all(name in text for name in real), text
    assert info.value.name == "nonexistent"


def test_a_near_miss_is_suggested():
    with pytest.raises(AttributeError, match=r"did you mean throughputs"):
        problem().throughput  # noqa: B018


def test_real_fields_probes_and_pickling_are_unchanged():
    inp = problem()
    assert inp.num_jobs == 2 and not hasattr(inp, "_private") and getattr(inp, "nope", 7) == 7
    back = pickle.loads(pickle.dumps(inp))
    assert back.job_ids == ["a", "b"] and np.array_equal(back.throughputs, inp.throughputs)


def test_a_property_that_fails_inside_shows_its_own_error():
    """A cached_property raising AttributeError inside is not reported as a missing field."""
    ctx = context()   # info is None: `adaptive` reads None.adaptive
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'adaptive'"):
        ctx.need  # noqa: B018


def _user_policy(p):
    return p.input.nonexistent


_user_policy.__module__ = "my_plugin"


def test_call_policy_turns_a_users_attribute_error_into_input_error():
    assert is_user_code(_user_policy) and not is_user_code(Problem.maximize_min)
    with pytest.raises(InputError) as info:
        call_policy("mine", _user_policy, Problem(problem()))
    text = str(info.value)
    assert text.startswith("policy='mine': failed at ") and "test_fields.py:" in text and "'nonexistent'" in text


def test_call_policy_leaves_the_packages_own_errors_alone():
    def builtin(p):
        return p.nonexistent

    builtin.__module__ = "gavel_ng.policies.builtin"
    with pytest.raises(AttributeError):
        call_policy("las", builtin, Problem(problem()))
