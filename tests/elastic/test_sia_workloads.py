"""Sia-style workloads (SOSP'23 §4.1): counts, windows, arrival shape and class mix as documented,
deterministic in the seed, and selectable by name in `load_workload`, `simulate` and a sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gavel_ng.cli import main
from gavel_ng.cluster import Cluster
from gavel_ng.elastic import FAMILIES, load_workload, tuned_configurations
from gavel_ng.elastic.sia_workloads import (
    HELIOS_SHARES,
    PHILLY_SHARES,
    SIA_APPLICATIONS,
    SIA_WORKLOADS,
    WORKLOAD_NAMES,
    class_shares,
    diurnal_rate,
    helios_like,
    hourly_arrivals,
    newtrace_like,
    philly_like,
    sia_workload,
    workload_size,
)
from gavel_ng.errors import InputError
from gavel_ng.sweep.grid import SweepPoint


@pytest.fixture(scope="module")
def drawn():
    return {name: sia_workload(name, seed=0) for name in SIA_WORKLOADS}


def test_counts_windows_and_rates_are_the_papers(drawn):
    for name, (jobs, hours) in {"sia-philly": (160, 8), "sia-helios": (160, 8), "sia-newtrace": (960, 48)}.items():
        e = drawn[name]
        t = e.trace.arrivals
        assert len(e) == jobs == workload_size(name)[0] and workload_size(name)[1] == hours
        assert t[0] == 0 and (np.diff(t) >= 0).all() and t[-1] < hours * 3600
        assert len(hourly_arrivals(e)) == hours and hourly_arrivals(e).mean() == 20   # 20 jobs/h on average
        assert set(e.applications) <= set(SIA_APPLICATIONS) and "ncf" not in e.applications
        assert e.names == [f"{a}-{i}" for i, a in enumerate(e.applications)]


def test_philly_and_helios_are_steady_newtrace_is_diurnal_and_bursty(drawn):
    for name in ("sia-philly", "sia-helios"):
        per_hour = hourly_arrivals(drawn[name])
        assert per_hour.max() < 40 and per_hour.min() > 5          # a steady 20/h, Poisson noise only
    per_hour = hourly_arrivals(drawn["sia-newtrace"])
    assert per_hour.max() >= 80 and per_hour.min() <= 8            # Sia: about 5 to 100 jobs/h
    bursty = np.sort(per_hour)[-4:]
    assert (bursty > 3 * per_hour.mean()).sum() >= 2               # the busiest hours are bursts, not the diurnal peak
    rate = diurnal_rate(48)
    assert rate.max() / rate.min() == pytest.approx(5.0, rel=0.05) and rate.argmax() % 24 in (13, 14)
    assert len(diurnal_rate(2.5)) == 3 and diurnal_rate(2.5)[-1] < diurnal_rate(2.5)[-2]   # a partial last hour


def test_a_burst_is_one_task_at_one_configuration(drawn):
    e = drawn["sia-newtrace"]
    t = e.trace.arrivals
    busiest = int(np.argmax(hourly_arrivals(e)))
    inside = np.flatnonzero(t // 3600 == busiest)
    keys = [(e.applications[m], int(e.gpus[m]), int(e.batch_sizes[m])) for m in inside]
    top, count = max(((k, keys.count(k)) for k in set(keys)), key=lambda kc: kc[1])
    assert count >= 40 and FAMILIES[top[0]].size_class in ("S", "M")


def test_class_mix_is_exact_and_the_artifacts_files(drawn):
    philly, helios = class_shares(drawn["sia-philly"]), class_shares(drawn["sia-helios"])
    for shares, want in ((philly, PHILLY_SHARES), (helios, HELIOS_SHARES)):
        for c, share in want.items():       # largest-remainder counts: within one job of share x 160
            assert abs(shares[c] * 160 - share * 160) < 1
    # the artifact's files (counted): Helios has fewer medium jobs than Philly and more ImageNet ones
    assert PHILLY_SHARES["M"] == pytest.approx(73 / 480) and HELIOS_SHARES["XL"] == pytest.approx(46 / 1600)
    assert helios["M"] < philly["M"] and helios["XL"] > philly["XL"]
    medium = [a for a in drawn["sia-newtrace"].applications if FAMILIES[a].size_class == "M"]
    assert 0.3 < medium.count("deepspeech2") / len(medium) < 0.7       # both medium tasks, in the files' ratio
    # every job runs at one of its task's tuned configurations
    for e in drawn.values():
        for app, n, b in zip(e.applications, e.gpus.tolist(), e.batch_sizes.tolist()):
            assert (n, b) in {(c[0], c[1]) for c in tuned_configurations(app, worker_type="t4")}


def test_deterministic_in_the_seed():
    for make in (philly_like, helios_like, newtrace_like):
        a, b, c = make(num_jobs=40, hours=4, seed=3), make(num_jobs=40, hours=4, seed=3), make(num_jobs=40, hours=4)
        assert a.names == b.names and np.array_equal(a.trace.arrivals, b.trace.arrivals)
        assert np.array_equal(a.gpus, b.gpus) and np.array_equal(a.batch_sizes, b.batch_sizes)
        assert not np.array_equal(a.trace.arrivals, c.trace.arrivals)


def test_small_and_bad_sizes():
    assert len(newtrace_like(num_jobs=3, hours=1)) == 3 and len(newtrace_like(num_jobs=1, hours=0.5)) == 1
    for kwargs, field in (({"num_jobs": 0}, "num_jobs"), ({"hours": 0.0}, "hours"), ({"num_jobs": 2.5}, "num_jobs")):
        with pytest.raises(InputError) as info:
            philly_like(**kwargs)
        assert info.value.field == field
    with pytest.raises(InputError, match="--workload"):
        sia_workload("sia-alibaba")


def test_load_workload_fits_the_named_workload_to_the_cluster():
    small = Cluster.parse("t4=8:4,a100=8:8")
    e = load_workload(small, jobs=30, hours=2, seed=1, workload="sia-helios")
    assert len(e) == 30 and int(e.gpus.max()) <= 8               # tuned counts capped at the largest type
    assert e.names == helios_like(num_jobs=30, hours=2, seed=1).names
    with pytest.raises(InputError, match="--jobs"):
        load_workload(small, jobs=0, workload="sia-philly")
    with pytest.raises(InputError) as info:
        load_workload(small, workload="sia-alibaba")
    assert info.value.field == "--workload" and "sia-newtrace" in str(info.value)


@pytest.mark.parametrize("name", [n for n in WORKLOAD_NAMES if n != "pollux"])
def test_simulate_runs_each_named_workload(capsys, name):
    rc = main(["simulate", "--workload", name, "--jobs", "6", "--hours", "0.5", "--cluster", "t4=8:4,rtx2080ti=8:8",
               "--policy", "goodput,las", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    for run in out["runs"]:
        assert run["jobs_measured"] == 6 and not run["unstable"]
    assert out["runs"][0]["adaptive_jobs"] == 6 and out["runs"][1]["adaptive_jobs"] == 0


def test_sweep_points_take_the_names_and_their_own_sizes():
    for name in WORKLOAD_NAMES:
        SweepPoint(workload=name, cluster="sia")
    own = SweepPoint(workload="sia-newtrace", jobs=960, hours=48.0)   # the workload's own size: one point id
    assert own.point_id == SweepPoint(workload="sia-newtrace").point_id and own.jobs == 960
    assert SweepPoint(workload="sia-newtrace", jobs=160).point_id != own.point_id
    assert SweepPoint(workload="pollux", jobs=160).point_id == SweepPoint(workload="pollux").point_id
    with pytest.raises(InputError) as info:
        SweepPoint(workload="sia-alibaba")
    assert info.value.field == "workload"
