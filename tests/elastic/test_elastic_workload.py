"""The ``pollux`` workload and the Pollux artifact's CSV workloads."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from gavel_ng.elastic import (
    FAMILIES,
    POLLUX_APPLICATIONS,
    SIZE_CLASSES,
    best_goodput,
    fixed_job_table,
    pollux_workload,
    read_pollux_csv,
    throughput_params,
    tuned_configurations,
    write_pollux_csv,
)
from gavel_ng.elastic.efficiency import seconds_to_progress
from gavel_ng.elastic.workload import POLLUX_GPUS_PER_SERVER, TUNED_EFFICIENCY
from gavel_ng.errors import InputError
from gavel_ng.profiles import load_workload_profiles

# The first rows of the Pollux artifact's simulator/workloads/workload-1.csv (format and values).
ARTIFACT_ROWS = """name,time,application,num_replicas,batch_size
cifar10-0,107,cifar10,6,2048
deepspeech2-1,110,deepspeech2,6,320
ncf-2,135,ncf,1,32768
deepspeech2-3,262,deepspeech2,12,640
cifar10-4,356,cifar10,16,4096
imagenet-11,1604,imagenet,32,6400
bert-27,5813,bert,12,384
yolov3-31,6357,yolov3,4,64
"""


def test_table1_shares_and_classes():
    shares = {a: FAMILIES[a].fraction for a in POLLUX_APPLICATIONS}
    assert shares == {"cifar10": 0.36, "imagenet": 0.02, "deepspeech2": 0.10, "bert": 0.10, "yolov3": 0.06,
                      "ncf": 0.36}
    assert sum(shares.values()) == pytest.approx(1.0)
    profiles = {p.family for p in load_workload_profiles().values()}
    for fam in FAMILIES.values():
        assert fam.profile_family in profiles and fam.size_class in SIZE_CLASSES


def test_size_classes_order_by_gpu_hours():
    """GPU-hours at M0 on one T4 (Pollux's GPU) rank the families as their classes do."""
    hours = {}
    for name, fam in FAMILIES.items():
        g, m, s = best_goodput(fam.spec(max_batch=fam.init_batch), "t4", 1, 1)
        hours[name] = fam.work / g / 3600
    rank = {c: i for i, c in enumerate(SIZE_CLASSES)}
    order = sorted(FAMILIES, key=lambda n: hours[n])
    assert [rank[FAMILIES[n].size_class] for n in order] == sorted(rank[FAMILIES[n].size_class] for n in order)
    for name, h in hours.items():  # within a factor of 2 of the class's range
        lo, hi = SIZE_CLASSES[FAMILIES[name].size_class]
        assert lo / 2 <= h <= hi * 2, (name, h)


def test_pollux_workload_shape_and_fractions():
    w = pollux_workload()
    assert len(w) == 160 and len(w.specs) == len(w.names) == len(w.applications) == 160
    arrivals = w.trace.arrivals
    assert arrivals[0] == 0 and np.all(np.diff(arrivals) >= 0)
    # 20 jobs an hour: the last of 160 arrives near hour 8 (sd of a Gamma(159) sum: 8 h / sqrt(159))
    assert abs(arrivals[-1] / 3600 - 8 * 159 / 160) < 4 * 8 / math.sqrt(159)
    # fractions within sampling error on a large draw
    big = pollux_workload(num_jobs=4000, hours=200.0, seed=1)
    counts = Counter(big.applications)
    for app in POLLUX_APPLICATIONS:
        p = FAMILIES[app].fraction
        assert abs(counts[app] / 4000 - p) < 4 * math.sqrt(p * (1 - p) / 4000), app
    # Poisson arrivals: exponential gaps with mean hours / jobs
    gaps = np.diff(big.trace.arrivals)
    assert gaps.mean() == pytest.approx(3600 * 200 / 4000, rel=0.05)
    assert np.std(gaps) / gaps.mean() == pytest.approx(1.0, abs=0.08)


def test_pollux_workload_is_seeded():
    a, b, c = pollux_workload(seed=4), pollux_workload(seed=4), pollux_workload(seed=5)
    assert a.names == b.names and a.trace.job_types == b.trace.job_types
    np.testing.assert_array_equal(a.trace.arrivals, b.trace.arrivals)
    assert a.names != c.names


def test_jobs_carry_fixed_and_adaptive_fields():
    w = pollux_workload(seed=2)
    jobs = w.jobs()
    for i, (job, spec) in enumerate(zip(jobs, w.specs)):
        fam = FAMILIES[w.applications[i]]
        assert spec.family == fam.name and spec.init_batch == fam.init_batch and spec.max_batch == fam.max_batch
        assert job.job_type in load_workload_profiles()
        assert load_workload_profiles()[job.job_type].family == fam.profile_family
        assert job.scale_factor == w.gpus[i] and job.steps_total >= 1 and job.arrival_time == w.trace.arrivals[i]
        assert w.work[i] == fam.work
        n, m, s = int(w.gpus[i]), int(w.local_batches[i]), int(w.accum_steps[i])
        assert n * m * (s + 1) >= w.batch_sizes[i] > n * m * (s + 1) - n * (s + 1)
        assert m <= throughput_params(fam, "t4").max_local_batch


def test_fixed_jobs_take_the_modeled_time_on_the_reference_gpu():
    w = pollux_workload(seed=3)
    table = fixed_job_table(w, ["t4", "v100"], network_gbps=50.0)
    w.trace.check_against(table)  # every (job type, GPU count) has throughputs
    for i in range(len(w)):
        n = int(w.gpus[i])
        key = (w.trace.job_types[i], n)
        rate = table.get(key, "t4") if n <= POLLUX_GPUS_PER_SERVER else table.get_unconsolidated(key, "t4")
        assert w.trace.steps[i] / rate == pytest.approx(w.fixed_seconds[i], rel=1e-3, abs=1.0)


def _one_gpu_seconds(app):
    """Fastest fixed-batch run on one T4 over the candidate batches M0 * 2^k and the maximum."""
    fam = FAMILIES[app]
    params = throughput_params(fam, "t4")
    best = math.inf
    for batch in {*(fam.init_batch * 2 ** k for k in range(20) if fam.init_batch * 2 ** k <= fam.max_batch),
                  fam.max_batch}:
        s = max(0, -(-batch // params.max_local_batch) - 1) if fam.accumulation else 0
        m = -(-batch // (s + 1))
        if m > params.max_local_batch:
            continue
        x = float(params.throughput(m, s, 1, 1))
        best = min(best, seconds_to_progress(fam.phi, fam.init_batch, m * (s + 1), x, fam.work, 0.0, 1.0))
    return best


@pytest.mark.parametrize("app", POLLUX_APPLICATIONS)
def test_tuned_configurations_scale_50_to_80_percent(app):
    configs = tuned_configurations(app)
    fam = FAMILIES[app]
    assert configs
    for n, batch, seconds in configs:
        assert fam.init_batch <= batch <= fam.max_batch and batch >= n * fam.min_local_batch and seconds > 0
    if len(configs) == 1 and configs[0][0] == 1:
        return  # no count scales 50-80 %: one GPU, as the artifact
    base = _one_gpu_seconds(app)
    lo, hi = TUNED_EFFICIENCY
    for n, _, seconds in configs:
        assert lo < base / seconds / n < hi
    assert all(seconds < 12 * 3600 for _, _, seconds in configs)


def test_tuned_configurations_drop_the_12_hour_cap_before_falling_back_to_one_gpu():
    slow = tuned_configurations("imagenet", network_gbps=10.0)
    assert slow and all(n > 1 and seconds > 12 * 3600 for n, _, seconds in slow)


def test_csv_round_trip(tmp_path):
    w = pollux_workload(num_jobs=40, seed=6)
    path = tmp_path / "w.csv"
    write_pollux_csv(w, path)
    assert path.read_text().splitlines()[0] == "name,time,application,num_replicas,batch_size"
    back = read_pollux_csv(path)
    assert back.names == w.names and back.applications == w.applications
    assert back.trace.job_types == w.trace.job_types
    for a in ("batch_sizes", "local_batches", "accum_steps", "work", "fixed_seconds"):
        np.testing.assert_array_equal(getattr(back, a), getattr(w, a))
    for a in ("scale_factors", "steps", "arrivals", "weights", "slo_s"):
        np.testing.assert_array_equal(getattr(back.trace, a), getattr(w.trace, a))


def test_reads_the_artifact_format(tmp_path):
    path = tmp_path / "workload-1.csv"
    path.write_text(ARTIFACT_ROWS)
    w = read_pollux_csv(path)
    assert w.names[:3] == ["cifar10-0", "deepspeech2-1", "ncf-2"]
    assert w.applications[-1] == "yolov3"
    np.testing.assert_array_equal(w.gpus, [6, 6, 1, 12, 16, 32, 12, 4])
    np.testing.assert_array_equal(w.batch_sizes, [2048, 320, 32768, 640, 4096, 6400, 384, 64])
    np.testing.assert_array_equal(w.trace.arrivals, [107, 110, 135, 262, 356, 1604, 5813, 6357])
    assert all(math.isfinite(s) and s >= 1 for s in w.trace.steps)
    # imagenet at batch 6400 on 32 T4s: 200 per GPU does not fit (182), so one accumulation step
    i = w.names.index("imagenet-11")
    assert (w.local_batches[i], w.accum_steps[i]) == (100, 1)
    # unsorted rows are ordered by arrival, names kept
    lines = ARTIFACT_ROWS.splitlines()
    path.write_text("\n".join([lines[0], lines[3], lines[1], lines[2]]) + "\n")
    assert read_pollux_csv(path).names == ["cifar10-0", "deepspeech2-1", "ncf-2"]
    # extra columns and any column order are fine
    path.write_text("batch_size,application,name,time,num_replicas,note\n64,yolov3,y,5,4,x\n")
    assert read_pollux_csv(path).names == ["y"]


@pytest.mark.parametrize("row, column, value", [
    ("a,1,cifar10,2", "line 2", "a,1,cifar10,2"),
    (",1,cifar10,2,256", "column name", ""),
    ("a,-5,cifar10,2,256", "column time", "-5"),
    ("a,soon,cifar10,2,256", "column time", "soon"),
    ("a,nan,cifar10,2,256", "column time", "nan"),
    ("a,1,resnet,2,256", "column application", "resnet"),
    ("a,1,cifar10,0,256", "column num_replicas", "0"),
    ("a,1,cifar10,2.5,256", "column num_replicas", "2.5"),
    ("a,1,cifar10,2,big", "column batch_size", "big"),
    ("a,1,cifar10,4,2", "column batch_size", "2"),
    ("a,1,bert,2,1024", "column batch_size", "1024"),
])
def test_bad_rows_name_line_column_and_value(tmp_path, row, column, value):
    path = tmp_path / "bad.csv"
    path.write_text("name,time,application,num_replicas,batch_size\nok,0,ncf,1,256\n" + row + "\n")
    with pytest.raises(InputError) as exc:
        read_pollux_csv(path)
    msg = str(exc.value)
    line = "line 3"
    assert "bad.csv" in msg and line in msg and column.replace("line 2", line) in msg and repr(value) in msg


def test_bad_files(tmp_path):
    path = tmp_path / "w.csv"
    path.write_text("name,time,application,batch_size\na,1,ncf,256\n")
    with pytest.raises(InputError, match="num_replicas"):
        read_pollux_csv(path)
    path.write_text("name,time,application,num_replicas,batch_size\n")
    with pytest.raises(InputError, match="no jobs"):
        read_pollux_csv(path)
    path.write_text("")
    with pytest.raises(InputError, match="line 1"):
        read_pollux_csv(path)
    path.write_text("name,time,application,num_replicas,batch_size\na,1,ncf,1,256\na,2,ncf,1,256\n")
    with pytest.raises(InputError, match="duplicate"):
        read_pollux_csv(path)
    with pytest.raises(InputError, match="cannot read"):
        read_pollux_csv(tmp_path / "missing.csv")
