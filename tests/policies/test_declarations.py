"""What the registry knows about a policy comes from its declaration, never from its name."""

import numpy as np
import pytest

from gavel_ng.errors import InputError
from gavel_ng.policies import REGISTRY, Entity, SchedulingProblem, policy, solve
from gavel_ng.policies.input.entities import ENTITY_POLICIES, entity_policies, entity_policy, get_entity_policy
from gavel_ng.policies.registry import get_policy, is_agnostic_twin, needs_pairs, space_sharing_name


@pytest.fixture
def scratch():
    with REGISTRY.kept(), ENTITY_POLICIES.kept():
        yield


def test_a_policy_that_packs_itself_is_declared_so(scratch):
    assert get_policy("gandiva").pairs and needs_pairs("gandiva")
    assert space_sharing_name("gandiva", True) == "gandiva"
    assert space_sharing_name("las", True) == "las_packed" and needs_pairs("las_packed")
    assert not needs_pairs("las")

    @policy("my_pairing", agnostic=False, pairs=True)
    def my_pairing(p):
        return p.maximize_min(p.normalized_thr)

    assert needs_pairs("my_pairing") and space_sharing_name("my_pairing", True) == "my_pairing"


def test_variants_name_their_base():
    assert get_policy("las_agnostic").base == "las" and get_policy("las").base is None
    assert get_policy("las_agnostic_packed").base == "las_agnostic"
    assert get_policy("max_min_fairness_perf_packed").base == "las"   # an alias's variant
    assert is_agnostic_twin("las", "las_agnostic") and is_agnostic_twin("max_min_fairness_perf", "max_min_fairness")
    assert not is_agnostic_twin("las_agnostic", "las") and not is_agnostic_twin("las", "ftf_agnostic")
    assert not is_agnostic_twin("las", "no_such_policy")


def two_entities(policy_name: str) -> SchedulingProblem:
    T = np.array([[1.0], [1.0], [1.0], [1.0]])
    return SchedulingProblem.build(["a0", "a1", "b0", "b1"], ["v100"], [2], T,
                                   time_since_arrival=[10.0, 20.0, 10.0, 20.0],
                                   entities=["a", "a", "b", "b"],
                                   entity_specs={"a": Entity(1.0, policy_name), "b": Entity(1.0)})


def test_entity_policies_come_from_their_registry(scratch):
    assert entity_policies() == ("fairness", "fifo")
    with pytest.raises(InputError, match="entities.a.policy"):
        two_entities("lifo")
    # a pooled policy of one's own: the entity's share goes to its latest job first
    entity_policy("lifo", "latest first", pooled=True, priority=lambda inp, jobs: inp.time_since_arrival[jobs] * -1.0)
    lifo = solve(two_entities("lifo"), "hierarchical").allocation
    fifo = solve(two_entities("fifo"), "hierarchical").allocation
    share = {r[0]: float(v[0]) for r, v in zip(lifo.rows, lifo.values)}
    assert share["a0"] == pytest.approx(1.0) and share["a1"] == pytest.approx(0.0)
    share = {r[0]: float(v[0]) for r, v in zip(fifo.rows, fifo.values)}
    assert share["a1"] == pytest.approx(1.0) and share["a0"] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        entity_policy("pooled_without_order", "?", pooled=True)
    with pytest.raises(ValueError, match="registered already"):   # a name is one policy unless replaced
        entity_policy("fifo", "latest first", pooled=True, priority=lambda inp, jobs: -inp.time_since_arrival[jobs])
    assert get_entity_policy("fifo").summary != "latest first"
    entity_policy("fifo", "latest first", pooled=True, priority=lambda inp, jobs: -inp.time_since_arrival[jobs],
                  replace=True)
    assert get_entity_policy("fifo").summary == "latest first" and entity_policies() == ("fairness", "fifo", "lifo")
