"""Issue 40: round policies that see each adaptive job's goodput only as learned from its own runs
(`SimConfig.policy_model = "learned"`, gavel_ng.simulator.learned), bootstrapped as Sia does."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from gavel_ng.cli import main
from gavel_ng.cluster import Cluster
from gavel_ng.elastic import get_family
from gavel_ng.elastic.goodput import best_batch_many, throughput_params
from gavel_ng.elastic.workload import load_workload
from gavel_ng.errors import InputError
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.simulator.learned import LearnedModels

TYPES = ["t4", "a100"]


def models(app: str = "bert") -> tuple[LearnedModels, SimpleNamespace]:
    spec = get_family(app).spec(profiles="sia")
    ja = SimpleNamespace(specs=[spec], adaptive=np.ones(1, bool), progress=np.array([0.3]), batch=np.zeros(1))
    return LearnedModels(ja, TYPES, 50.0), ja


def test_a_job_that_has_not_run_is_offered_one_gpu_with_its_profiled_single_gpu_speed():
    lm, ja = models()
    k = np.arange(1, 9)
    got = lm.goodput(np.array([0]), "a100", k, np.ones(8, np.int64))
    truth = throughput_params("bert", "a100", profiles="sia")
    assert got[0, 0] == pytest.approx(best_batch_many(truth, ja.specs[0], lm.phi(0), [1], [1])[0])
    assert (got[0, 1:] == 0).all()


def test_before_any_multi_gpu_run_throughput_doubles_then_the_sync_is_learned():
    lm, ja = models()
    lm.observe(0, 1, 1, 1)                                    # ran on one A100: up to 2 GPUs now, no sync known
    k, n = np.arange(1, 5), np.ones(4, np.int64)
    free = lm.goodput(np.array([0]), "a100", k, n)[0]
    assert free[1] > 0 and (free[2:] == 0).all()
    truth = throughput_params("bert", "a100", profiles="sia")
    exact = best_batch_many(truth, ja.specs[0], lm.phi(0), k[:2], n[:2])
    assert free[1] > exact[1]                                   # optimistic: no sync time
    lm.observe(0, 1, 2, 1)                                    # ran on 2: its sync there is known, 4 offered
    learned = lm.goodput(np.array([0]), "a100", k, n)[0]
    assert learned[1] == pytest.approx(exact[1], rel=1e-12) and learned[3] > 0
    assert lm.params(0, 1).alpha_local == pytest.approx(float(truth.t_sync(2, 1)))


def test_a_type_it_did_not_run_on_scales_the_learned_sync_by_the_single_gpu_ratio():
    lm, ja = models()
    lm.observe(0, 1, 4, 1)
    lm.observe(0, 1, 8, 2)
    t4, a100 = (throughput_params("bert", w, profiles="sia") for w in TYPES)
    m0 = ja.specs[0].init_batch
    c = float(t4.t_grad(m0) / a100.t_grad(m0))
    there, here = lm.params(0, 1), lm.params(0, 0)
    assert (here.alpha_local, here.alpha_node) == pytest.approx((there.alpha_local * c, there.alpha_node * c))
    assert (here.alpha_grad, here.beta_grad, here.max_local_batch) == (t4.alpha_grad, t4.beta_grad,
                                                                       t4.max_local_batch)
    # the limit learned on one type applies to every type
    assert (lm.goodput(np.array([0]), "t4", np.array([16, 17]), np.array([4, 5]))[0] > 0).tolist() == [True, False]


def test_the_learned_option_runs_and_differs_from_the_exact_model(capsys):
    cluster = Cluster.parse("sia")
    et = load_workload(cluster, workload="sia-philly", jobs=12, hours=0.5, seed=3, profiles="sia")
    out = {}
    for model in ("exact", "learned"):
        s = simulate(cluster, None, et, SimConfig(policy="sia", seed=3, policy_model=model)).summary
        assert s["jobs_measured"] == 12 and not s["unstable"] and s["policy_model"] == model
        out[model] = s["avg_jct_hours"]
    assert out["exact"] != out["learned"]
    with pytest.raises(InputError, match="--policy-model"):
        SimConfig(policy="sia", policy_model="oracle")
    assert main(["simulate", "--workload", "sia-philly", "--jobs", "4", "--hours", "0.2", "--cluster", "sia",
                 "--elastic-profiles", "sia", "--policy", "goodput", "--policy-model", "learned"]) == 0
