"""Per-type server sizes in `--cluster` and the named clusters of Sia (SOSP'23): parsing, the
servers the simulator builds, and where a round policy puts a job on them."""

from __future__ import annotations

import numpy as np
import pytest

from gavel_ng.cli import main
from gavel_ng.cluster import NAMED_CLUSTERS, Cluster
from gavel_ng.errors import InputError
from gavel_ng.profiles import GPUS
from gavel_ng.rules import JobRules
from gavel_ng.simulator import SimConfig, simulate
from gavel_ng.throughputs import ThroughputTable
from gavel_ng.topology import Topology


def servers_of(cluster: Cluster) -> dict[str, list[int]]:
    topo = Topology.from_cluster(cluster)
    return {w: [len(topo.server_gpus[s]) for s in topo.type_servers[j]] for j, w in enumerate(topo.worker_types)}


def test_per_type_server_sizes_override_the_common_one():
    c = Cluster.parse("t4=24:4,rtx2080ti=24:8,a100=16", gpus_per_server=2)
    assert c.gpus == {"t4": 24, "rtx2080ti": 24, "a100": 16}
    assert [c.server_size(w) for w in c.worker_types] == [4, 8, 2]
    assert servers_of(c) == {"t4": [4] * 6, "rtx2080ti": [8] * 3, "a100": [2] * 8}
    # a count that is not a multiple of the size: the last server is smaller (as with --gpus-per-server)
    assert servers_of(Cluster.parse("v100=10:4")) == {"v100": [4, 4, 2]}
    # without any size a type keeps its default (up to 4 per server)
    assert Cluster.parse("v100=3").server_size("v100") == 3


def test_named_clusters_are_sias_three_settings():
    sia = Cluster.parse("sia")
    assert sia.capacity().sum() == 64
    assert servers_of(sia) == {"t4": [4] * 6, "rtx2080ti": [8] * 3, "a100": [8] * 2}
    physical = Cluster.parse(" Sia-Physical ", gpus_per_server=2)   # names ignore case; their sizes win
    assert servers_of(physical) == {"rtx2080ti": [8] * 3, "a100": [8] * 2, "rtx6000": [4]}
    assert physical.capacity().sum() == 44
    assert servers_of(Cluster.parse("sia-homogeneous")) == {"t4": [4] * 16}
    for spec in NAMED_CLUSTERS.values():          # every type of a named cluster has a datasheet and a price
        for w in Cluster.parse(spec).priced().worker_types:
            assert w in GPUS
        assert Cluster.parse(spec).priced().prices() is not None


@pytest.mark.parametrize(("spec", "part"), [
    ("t4=8:0", "t4=8:0"), ("t4=8:x", "t4=8:x"), ("t4=8:-4", "t4=8:-4"), ("t4=8:", "t4=8:"),
    ("t4=-1:4", "t4=-1:4"), ("t4=4,t4=8", "t4=8"), ("siaa", "siaa"), ("", ""), ("a100=8:8,=3", "=3"),
])
def test_bad_cluster_specs_name_the_flag_and_the_part(spec, part):
    with pytest.raises(InputError) as info:
        Cluster.parse(spec)
    assert info.value.field == "--cluster" and str(info.value.value) == part


def test_simulate_help_lists_the_named_clusters(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in NAMED_CLUSTERS:
        assert name in out


@pytest.mark.parametrize("policy", ["goodput", "tiresias"])
def test_a_round_policy_packs_an_8_gpu_job_by_each_types_server_size(make_trace, policy):
    """On Sia's cluster an 8-GPU job fills one 8-GPU RTX 2080 Ti server, but needs two 4-GPU T4 servers."""
    table = ThroughputTable(isolated={
        "t4": {("R", 8): 0.0, ("T", 8): 1.0},
        "rtx2080ti": {("R", 8): 1.0, ("T", 8): 0.0},
        "a100": {("R", 8): 0.0, ("T", 8): 0.0},
    })
    trace = make_trace([("R", 8, 600, 0), ("T", 8, 600, 0)])
    trace.rules = [JobRules(allowed_types=("rtx2080ti",)), JobRules(allowed_types=("t4",))]
    cluster = Cluster.parse("sia")
    topo = Topology.from_cluster(cluster)
    plans = []
    s = simulate(cluster, table, trace, SimConfig(policy=policy), observe=plans.append).summary
    assert s["jobs_measured"] == 2 and not s["unstable"]
    seen = {}
    for p in plans:
        for e, (job,) in enumerate(p.keys):
            gpus = np.array(p.gpus[e])
            seen[job] = (cluster.worker_types[int(p.types[e])], len(gpus), len(set(topo.gpu_server[gpus].tolist())),
                         bool(p.consolidated[e]))
            assert set(topo.gpu_type[gpus].tolist()) == {int(p.types[e])}
    assert seen == {0: ("rtx2080ti", 8, 1, True), 1: ("t4", 8, 2, False)}
