"""Core dataclasses: cluster, jobs, throughput table, allocation checks."""

import json
import math

import numpy as np
import pytest

from gavel_ng import Allocation, AllocationError, Cluster, InputError, Job, SchedulingProblem
from gavel_ng.throughputs import ThroughputTable


def test_reference_table_loads_with_pairs_and_placement_twins(reference_table, reference_table_path):
    t = reference_table
    assert t.worker_types == ["k80", "p100", "v100"]
    assert len(t.job_types) == 26
    key = ("ResNet-18 (batch size 16)", 1)
    assert t.get(key, "v100") > t.get(key, "k80") > 0
    assert t.get_unconsolidated(("ResNet-50 (batch size 64)", 4), "v100") is not None
    a, b = t.get_pair(key, ("ResNet-18 (batch size 64)", 1), "v100")
    assert 0 < a and 0 < b
    assert t.to_gavel_dict() == json.loads(reference_table_path.read_text())


@pytest.mark.parametrize("data,where", [
    ([], "throughputs"),
    ({"v100": {"bad key": {"null": 1.0}}}, "bad key"),
    ({"v100": {"('A', 1)": {"nul": 1.0}}}, "('A', 1)"),
    ({"v100": {"('A', 1)": {"null": -1.0}}}, "null"),
    ({"v100": {"('A', 1)": {"null": 1.0, "('B', 1)": [1.0]}}}, "('B', 1)"),
])
def test_malformed_gavel_json_names_the_entry(data, where):
    with pytest.raises(InputError) as exc:
        ThroughputTable.from_gavel_dict(data)
    assert where in str(exc.value)


def test_table_file_errors(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text("{nope")
    with pytest.raises(InputError, match="line 1"):
        ThroughputTable.load(bad)
    with pytest.raises(InputError, match="cannot read"):
        ThroughputTable.load(tmp_path / "missing.json")


def test_cluster_parse_and_validation():
    c = Cluster.parse("v100=36,p100=36,k80=36", gpus_per_server=4)
    assert c.worker_types == ["v100", "p100", "k80"] and c.capacity().sum() == 108
    assert c.server_size("v100") == 4
    for spec in ("v100=x", "v100", "=3"):
        with pytest.raises(InputError, match="--cluster"):
            Cluster.parse(spec)
    with pytest.raises(InputError, match="cluster.v100"):
        Cluster({"v100": -1})
    assert Cluster({"v100": 2}, price_per_gpu_hour={"v100": 2.48}).prices()[0] == 2.48


def test_job_validation():
    job = Job("a", "ResNet-18 (batch size 16)", steps_remaining=10)
    assert job.steps_total == 10 and job.steps_done == 0
    for kwargs, field in [({"scale_factor": 0}, "scale_factor"), ({"weight": -1.0}, "weight"),
                          ({"steps_remaining": math.nan}, "steps_remaining"), ({"slo_s": 0}, "slo_s")]:
        with pytest.raises(InputError, match=field):
            Job("a", "x", **kwargs)


def test_problem_from_jobs_uses_the_table(reference_table):
    cluster = Cluster({"v100": 2, "k80": 2})
    jobs = [Job("a", "ResNet-50 (batch size 64)", scale_factor=2, steps_remaining=100, arrival_time=10),
            Job("b", "A3C", steps_remaining=50)]
    inp = SchedulingProblem.from_jobs(cluster, jobs, reference_table, now=100.0)
    assert inp.throughputs[0, 0] == reference_table.get(("ResNet-50 (batch size 64)", 2), "v100")
    assert list(inp.time_since_arrival) == [90.0, 100.0]


def test_allocation_check_names_the_violation():
    good = Allocation([("a",), ("b",)], ["v100"], np.array([[0.5], [0.5]]), np.array([1.0, 1.0]), np.array([1.0]))
    assert good.check() is good
    assert good.to_dict() == {"a": {"v100": 0.5}, "b": {"v100": 0.5}}
    assert list(good.to_pandas().columns) == ["v100"]
    over = Allocation([("a",), ("b",)], ["v100"], np.array([[0.9], [0.5]]), np.array([1.0, 1.0]), np.array([1.0]))
    with pytest.raises(AllocationError, match="v100 uses 1.4"):
        over.check()
    pair = Allocation([("a",), ("a", "b")], ["v100"], np.array([[0.6], [0.6]]), np.array([1.0, 1.0]),
                      np.array([2.0]))
    with pytest.raises(AllocationError, match="job a gets 1.2"):
        pair.check()


def test_allocation_check_counts_placement_twins_against_one_pool():
    cols = ["v100", "v100_unconsolidated"]
    alloc = Allocation([("a",), ("b",)], cols, np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([2.0, 2.0]),
                       np.array([3.0, 3.0]), pools=np.array([0, 0]))
    with pytest.raises(AllocationError, match="v100\\+v100_unconsolidated uses 4"):
        alloc.check()
    alloc.capacity = np.array([4.0, 4.0])
    assert alloc.check() is alloc
