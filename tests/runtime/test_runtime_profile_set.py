"""The cluster's round policies value an adaptive job on the profile set its spec names
(`adaptive.profiles`): the runtime's goodput (runtime.rounds.ClusterSource) must be the one the
simulator uses for that set, before the job reports and (as a prior for other types) after.

ClusterState over a real SQLite store with registered workers; no processes.
"""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.elastic.goodput import DEFAULT_NETWORK_GBPS, best_batch_many, throughput_params
from gavel_ng.elastic.profile_sets import phi_curve
from gavel_ng.errors import InputError
from gavel_ng.profiles import default_table
from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.measured import MeasuredTable
from gavel_ng.runtime.rounds import ClusterSource
from gavel_ng.runtime.state import ClusterState, Registration
from gavel_ng.runtime.store import Store

TYPES = ("t4", "a100")


def _spec(profiles: str | None) -> JobSpec:
    adaptive = {"family": "cifar10", "init_batch": 128, "max_batch": 4096}
    if profiles is not None:
        adaptive["profiles"] = profiles
    return JobSpec.from_dict({"job_type": "ResNet-18 (batch size 128)", "steps": 1000, "command": ["train.py"],
                              "adaptive": adaptive})


def _state(tmp_path) -> ClusterState:
    config = ClusterConfig(worker_types=TYPES, policy="goodput", realloc_delay_seconds=0.0)
    st = ClusterState(config, Store(tmp_path), MeasuredTable(default_table(list(TYPES)), list(TYPES)), "secret")
    st.restore()
    for i, t in enumerate(TYPES):
        st.register(Registration(f"w{i}", f"127.0.0.1:{i + 1}", t, 4), lambda address: (None, None))
    return st


def _expected(job: JobSpec, worker: str, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    spec = job.adaptive
    params = throughput_params("cifar10", worker, DEFAULT_NETWORK_GBPS, profiles=spec.profiles)
    return best_batch_many(params, spec, float(phi_curve(spec)(0.0)), k, n)


def test_the_runtime_values_a_job_on_its_profile_set(tmp_path):
    st = _state(tmp_path)
    sia, modeled = st.submit([_spec("sia"), _spec(None)])
    assert st.jobs[sia].spec.adaptive.profiles == "sia"
    assert st.jobs[modeled].spec.adaptive.profiles == "modeled"
    source = ClusterSource(st)
    k = np.array([1, 2, 4, 8])
    n = np.array([1, 1, 1, 2])
    for worker in TYPES:
        got = source.goodput([sia, modeled], worker, k, n)
        for row, job in enumerate((sia, modeled)):
            want = _expected(st.jobs[job].spec, worker, k, n)
            assert np.all(want > 0)
            np.testing.assert_allclose(got[row], want, rtol=1e-12)
        # the two sets really differ for this job, so the check above can tell them apart
        assert not np.allclose(got[0], got[1], rtol=1e-3)
    # Sia's measured CIFAR-10: one A100 is several times one T4 (the artifact: about 5-7x)
    t4 = source.goodput([sia], "t4", k[:1], n[:1])[0, 0]
    a100 = source.goodput([sia], "a100", k[:1], n[:1])[0, 0]
    assert 3.0 < a100 / t4 < 10.0


def test_the_profile_set_survives_a_scheduler_restart(tmp_path):
    st = _state(tmp_path)
    (job,) = st.submit([_spec("sia")])
    before = ClusterSource(st).goodput([job], "a100", np.array([1, 4]), np.array([1, 1]))
    st.store.close()
    again = _state(tmp_path)
    assert again.jobs[job].spec.adaptive.profiles == "sia"
    after = ClusterSource(again).goodput([job], "a100", np.array([1, 4]), np.array([1, 1]))
    np.testing.assert_array_equal(before, after)


def test_an_unknown_profile_set_is_refused_by_name():
    with pytest.raises(InputError) as err:
        _spec("nonesuch")
    assert "adaptive.profiles" in str(err.value) and "nonesuch" in str(err.value)
