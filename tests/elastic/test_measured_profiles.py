"""Measured elastic profiles: the artifact reader and fitter (on fixtures written here), the shipped
``sia`` set, the measured noise-scale table, and the set's selection from spec to simulator."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.integrate import quad

from gavel_ng.cli import main
from gavel_ng.elastic import AdaptiveSpec, PhiCurve, get_family, pollux_workload
from gavel_ng.elastic.efficiency import PhiTable, progress_after, seconds_to_progress
from gavel_ng.elastic.goodput import best_goodput, throughput_params
from gavel_ng.elastic.measured import (
    StepSamples,
    fit_directory,
    fit_throughput,
    read_step_csv,
    read_validation_csv,
)
from gavel_ng.elastic.profile_sets import measured_set, parse_set, phi_curve
from gavel_ng.elastic.workload import fixed_job_table, tuned_configurations
from gavel_ng.errors import InputError
from gavel_ng.profiles import get_gpu
from gavel_ng.sweep.grid import SweepPoint

THETA = (0.02, 0.0005, 0.03, 0.004, 0.09, 0.002, 3.0)  # alpha/beta grad, local, node, gamma
APPS = ("cifar10", "imagenet", "yolov3", "deepspeech2", "bert", "ncf")


def t_iter(theta, k, n, m):
    ag, bg, al, bl, an, bn, gamma = theta
    tg = ag + bg * m
    ts = 0.0 if k == 1 else (al + bl * (k - 2) if n == 1 else an + bn * (k - 2))
    return (tg ** gamma + ts ** gamma) ** (1 / gamma), tg


def write_profiles(folder, theta=THETA, suffix="aws"):
    """placements (GPUs per node) and scalability (nodes, replicas) files in the artifact's layout."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["placement,local_bsz,step_time,sync_time"]
    for placement in ("1", "2", "3", "4", "11", "22", "44", "1111"):
        k, n = sum(map(int, placement)), len(placement)
        for m in (32, 64, 128, 256, 512):
            t, tg = t_iter(theta, k, n, m)
            lines.append(f"{placement},{m},{t!r},{t - tg!r}")   # the step holds the sync, as the artifact's
    (folder / f"placements-{suffix}.csv").write_text("\n".join(lines) + "\n")
    lines = ["local_bsz,step_time,sync_time,num_nodes,num_replicas"]  # columns in another order
    for n, k in ((3, 12), (4, 16), (2, 8)):
        for m in (32, 128, 1024):
            t, tg = t_iter(theta, k, n, m)
            lines.append(f"{m},{t!r},{t - tg!r},{n},{k}")
    (folder / f"scalability-{suffix}.csv").write_text("\n".join(lines) + "\n")


# ----- reading and fitting ----------------------------------------------------------------------
def test_the_fit_recovers_known_parameters(tmp_path):
    write_profiles(tmp_path / "cifar10")
    parts = [read_step_csv(tmp_path / "cifar10" / f) for f in ("placements-aws.csv", "scalability-aws.csv")]
    samples = StepSamples.concat(parts)
    assert len(samples) == 40 + 9 - 2  # "44" and (2 nodes, 8 replicas) at m = 32, 128: the same rows, once
    assert set(zip(samples.gpus.tolist(), samples.servers.tolist())) >= {(4, 2), (8, 2), (16, 4), (3, 1)}
    fit = fit_throughput(samples)
    assert fit.theta == pytest.approx(THETA, rel=1e-3)
    assert fit.max_error < 1e-6 and fit.max_local_batch == 1024 and fit.node_measured


def test_a_type_without_multi_node_rows_reuses_its_local_sync(tmp_path):
    (tmp_path / "p.csv").write_text("local_bsz,placement,step_time,sync_time\n" + "".join(
        f"{m},{p},{t_iter(THETA, int(p), 1, m)[0]!r},0\n" for p in "124" for m in (16, 64, 256)))
    fit = fit_throughput(read_step_csv(tmp_path / "p.csv"))
    assert not fit.node_measured and fit.theta[4:6] == fit.theta[2:4]
    assert fit.max_error < 0.02


@pytest.mark.parametrize("row, column, value", [
    ("1,32,abc,0.1", "step_time", "abc"),
    ("1,32,-0.5,0.1", "step_time", "-0.5"),
    ("1,32.5,0.2,0.1", "local_bsz", "32.5"),
    ("20,32,0.2,0.1", "placement", "20"),
    ("1,32,0.2,nan", "sync_time", "nan"),
])
def test_a_bad_placement_row_names_file_line_column_and_value(tmp_path, row, column, value):
    (tmp_path / "bert").mkdir()
    path = tmp_path / "bert" / "placements-aws.csv"
    path.write_text(f"placement,local_bsz,step_time,sync_time\n1,32,0.2,0.0\n{row}\n")
    with pytest.raises(InputError) as exc:
        read_step_csv(path)
    assert exc.value.field == f"bert/placements-aws.csv line 3 column {column}" and exc.value.value == value


def test_bad_scalability_and_validation_files_are_input_errors(tmp_path):
    path = tmp_path / "scalability-rtx.csv"
    path.write_text("local_bsz,step_time,sync_time,num_nodes,num_replicas\n32,0.1,0.0,2,1\n")
    with pytest.raises(InputError, match="line 2 column num_replicas"):
        read_step_csv(path)
    path.write_text("local_bsz,step_time,sync_time\n32,0.1,0.0\n")
    with pytest.raises(InputError, match="placement column or num_nodes"):
        read_step_csv(path)
    path = tmp_path / "validation-128.csv"
    path.write_text("progress,iteration,metric,grad_sqr,grad_var\n10,1,0.1,2.0,1.0\n5,2,0.1,2.0,1.0\n")
    with pytest.raises(InputError, match="line 3 column progress"):
        read_validation_csv(path, 128)


def test_noise_scale_rows_skip_an_undefined_phi(tmp_path):
    path = tmp_path / "validation-20.csv"
    path.write_text("progress,iteration,metric,grad_sqr,grad_var\n100,1,0,0.0,1.0\n200,2,0,2.0,1.0\n"
                    "300,3,0,4.0,1.0\n")
    progress, phi = read_validation_csv(path, 20)
    assert progress.tolist() == [200, 300] and phi.tolist() == [10.0, 5.0]


def test_a_fitted_directory_is_a_loadable_profile_set(tmp_path):
    write_profiles(tmp_path / "cifar10")
    write_profiles(tmp_path / "cifar10", suffix="azure", theta=(0.01, 0.0002, 0.02, 0.001, 0.05, 0.001, 1.0))
    fam = get_family("cifar10")
    steps = fam.work / fam.init_batch
    (tmp_path / "cifar10" / "validation-128.csv").write_text(
        "progress,iteration,metric,grad_sqr,grad_var\n" + "".join(
            f"{steps * f!r},{i},0.5,{1.0 / (i + 1)},2.0\n" for i, f in enumerate((0.25, 0.5, 1.0))))
    data = fit_directory(tmp_path)
    assert set(data["fits"]["cifar10"]) == {"t4", "v100"}
    ms = parse_set(json.loads(json.dumps(data)), "fixture")
    assert ms.entries[("cifar10", "v100")].theta[6] == pytest.approx(1.0)
    table = ms.phi["cifar10"]   # the M0 run's noise scale, constant within each epoch
    assert table.ends == pytest.approx((0.25, 0.5, 1.0))
    assert table.phi == pytest.approx((128 * 2.0, 128 * 4.0, 128 * 6.0), rel=1e-5)
    assert table(0.1) == table(0.25) == pytest.approx(256.0, rel=1e-5) and table(0.26) == pytest.approx(512.0, rel=1e-5)
    assert ms.restart["cifar10"] == 50.0 and ms.calibration["cifar10"] == 1.8   # the artifact's figures
    assert {"source", "files", "fitted", "method", "notice"} <= set(ms.provenance)
    assert "cifar10/validation-128.csv" in data["files"]
    with pytest.raises(InputError, match="directory"):
        fit_directory(tmp_path / "nowhere")


# ----- the shipped set --------------------------------------------------------------------------
def test_the_shipped_sia_set_loads_with_positive_parameters_and_errors():
    ms = measured_set("sia")
    assert {app for app, _ in ms.entries} == set(APPS)
    assert {gpu for _, gpu in ms.entries} >= {"t4", "v100", "a100", "rtx2080ti", "rtx6000"}
    for (app, gpu), e in ms.entries.items():
        assert e.theta[1] > 0 and all(v >= 0 for v in e.theta) and 1 <= e.theta[6] <= 10, (app, gpu)
        assert e.max_local_batch >= get_family(app).min_local_batch and e.rows > 0
        assert 0 <= e.median_error <= e.max_error and math.isfinite(e.max_error), (app, gpu)
    for app in APPS:
        fam = get_family(app)
        assert min(ms.phi[app].phi) >= 0 and len(ms.phi[app].ends) == fam.epochs
        stats = ms.stats[app]   # one run per batch size from M0 to the largest the artifact validated
        assert stats.batches[0] == fam.init_batch and stats.batches[-1] == fam.max_batch
        assert ms.restart[app] > 0 and ms.calibration[app] >= 1.2
    assert {"source", "files", "fitted", "method", "notice"} <= set(ms.provenance)


@pytest.mark.parametrize("gpu", ["t4", "v100", "a100"])
def test_measured_parameters_are_the_set_and_differ_from_the_model(gpu):
    for app in APPS:
        e = measured_set("sia").entries[(app, gpu)]
        slow = measured_set("sia").calibration[app]   # every measured time, slowed as the artifact's jobs are
        p = throughput_params(app, gpu, profiles="sia")
        assert (p.alpha_grad, p.beta_grad, p.alpha_node) == pytest.approx((e.theta[0] * slow, e.theta[1] * slow,
                                                                           e.theta[4] * slow), rel=1e-12)
        assert p.gamma == e.theta[6]
        assert p.max_local_batch == e.max_local_batch and p.kappa_local == 0
        assert throughput_params(app, gpu, network_gbps=1.0, profiles="sia") == p  # the network is measured
        g, m, _ = best_goodput(get_family(app).spec(profiles="sia"), gpu, 4, 1, 0.5)
        assert g > 0 and m <= e.max_local_batch
    modeled = throughput_params("bert", gpu)
    assert throughput_params("bert", gpu, profiles="sia").beta_grad != modeled.beta_grad


def test_an_unmeasured_type_is_bootstrapped_from_the_nearest_measured_one():
    k80 = get_gpu("k80")
    p = throughput_params("cifar10", "k80", profiles="sia")
    t4 = measured_set("sia").entries[("cifar10", "t4")]   # the k80's nearest on the datasheet
    m0 = get_family("cifar10").init_batch
    ratio = throughput_params("cifar10", k80.name).t_grad(m0) / throughput_params("cifar10", "t4").t_grad(m0)
    slow = measured_set("sia").calibration["cifar10"]
    assert (p.alpha_grad, p.beta_grad, p.alpha_local) == pytest.approx(tuple(v * ratio * slow for v in t4.theta[:3]))
    assert p.gamma == t4.theta[6] and 1 <= p.max_local_batch <= t4.max_local_batch


# ----- the measured noise scale -----------------------------------------------------------------
def test_a_phi_table_integrates_exactly_and_progress_inverts_it():
    table = PhiTable((0.1, 0.3, 0.6, 1.0), (50.0, 2000.0, 400.0, 9000.0))  # falls in the middle
    assert table(0.0) == pytest.approx(50.0) and table(0.2) == pytest.approx(math.sqrt(50 * 2000))
    for a, b in ((0.0, 1.0), (0.05, 0.45), (0.31, 0.32), (0.7, 0.7)):
        want, _ = quad(lambda p: 1 / (table(p) + 128), a, b, points=[0.1, 0.3, 0.6], epsabs=1e-13)
        assert table.integral(a, b, 128) == pytest.approx(want, rel=1e-7, abs=1e-14)
    t = seconds_to_progress(table, 128, 1024, 3000.0, 5e6, 0.05, np.array([0.2, 0.5, 0.9]))
    assert progress_after(table, 128, 1024, 3000.0, 5e6, 0.05, t) == pytest.approx([0.2, 0.5, 0.9], abs=1e-9)
    flat = PhiTable((0.5,), (300.0,))
    assert seconds_to_progress(flat, 64, 512, 100.0, 1e5, 0.1, 0.8) == pytest.approx(
        seconds_to_progress(PhiCurve(300.0), 64, 512, 100.0, 1e5, 0.1, 0.8))


@pytest.mark.parametrize("progress, phi, field", [
    ((0.5, 0.4), (1.0, 2.0), "phi.progress"), ((0.5,), (0.0,), "phi.phi"), ((0.2, 1.5), (1.0, 2.0), "phi.progress"),
    ((), (), "phi.progress")])
def test_a_bad_phi_table_is_an_input_error(progress, phi, field):
    with pytest.raises(InputError) as exc:
        PhiTable(progress, phi)
    assert exc.value.field == field


def test_a_spec_carries_its_set_and_its_measured_curve():
    with pytest.raises(InputError, match="adaptive.profiles"):
        AdaptiveSpec("cifar10", 128, 4096, profiles="measured")
    spec = AdaptiveSpec.from_dict({"init_batch": 128, "max_batch": 4096, "profiles": "sia"}, "job", "cifar10")
    assert phi_curve(spec) is measured_set("sia").phi["cifar10"]
    assert phi_curve(AdaptiveSpec("cifar10", 128, 4096)) is get_family("cifar10").phi
    own = AdaptiveSpec.from_dict({"init_batch": 8, "max_batch": 64, "phi": {"progress": [0, 1], "phi": [5, 50]},
                                  "profiles": "sia"}, "job", "yolov3")
    assert phi_curve(own) == PhiTable((0.0, 1.0), (5.0, 50.0))
    assert AdaptiveSpec.from_dict(own.to_dict(), "job") == own
    assert "profiles" not in AdaptiveSpec("cifar10", 128, 4096).to_dict()


# ----- the fixed view and the front ends --------------------------------------------------------
def test_fixed_jobs_under_the_measured_set_run_at_its_speeds():
    et = pollux_workload(num_jobs=8, hours=1.0, seed=1, profiles="sia")
    assert et.profiles == "sia" and {s.profiles for s in et.specs} == {"sia"}
    table = fixed_job_table(et, ["t4", "v100", "a100"])
    for m, (job_type, k) in enumerate(zip(et.trace.job_types, et.trace.scale_factors)):
        assert job_type.startswith(f"{et.applications[m]} sia (batch size {et.batch_sizes[m]})")
        rate = table.get((job_type, int(k)), "t4") if k <= 4 else table.get_unconsolidated((job_type, int(k)), "t4")
        assert et.trace.steps[m] == pytest.approx(et.fixed_seconds[m] * rate, abs=0.51)
    for app in APPS:  # the measured speeds choose other tuned counts than the model (bert: no 50-80 % count)
        for n, batch, seconds in tuned_configurations(app, profiles="sia"):
            assert n * get_family(app).min_local_batch <= batch <= get_family(app).max_batch and seconds > 0
    assert tuned_configurations("bert", profiles="sia") != tuned_configurations("bert")
    with pytest.raises(InputError, match="profiles"):
        fixed_job_table(et, ["t4"], profiles="modeled")


def jcts(capsys, profiles):
    capsys.readouterr()
    assert main(["simulate", "--workload", "pollux", "--jobs", "6", "--hours", "0.5", "--cluster",
                 "t4=8,v100=4,a100=4", "--policy", "goodput,las", "--elastic-profiles", profiles, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    return [(r["policy"], r["jobs_measured"], r["avg_jct_hours"]) for r in out["runs"]]


def test_simulate_runs_the_measured_set_and_it_changes_the_result(capsys):
    sia, modeled = jcts(capsys, "sia"), jcts(capsys, "modeled")
    assert [r[:2] for r in sia] == [r[:2] for r in modeled] == [("goodput", 6), ("las", 6)]
    assert all(r[2] > 0 for r in sia)
    assert [r[2] for r in sia] != pytest.approx([r[2] for r in modeled], rel=1e-3)


def test_an_unknown_profile_set_is_a_one_line_error(capsys):
    assert main(["simulate", "--workload", "pollux", "--jobs", "2", "--cluster", "t4=4",
                 "--elastic-profiles", "measured"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--elastic-profiles" in err and "modeled, sia" in err and len(err.splitlines()) == 1
    with pytest.raises(InputError, match="elastic_profiles"):
        SweepPoint(workload="pollux", elastic_profiles="measured")
    with pytest.raises(InputError, match="profiles"):
        throughput_params("cifar10", "t4", profiles="measured")


def test_profiles_elastic_prints_the_fit_and_refits_a_directory(tmp_path, capsys):
    assert main(["profiles", "elastic"]) == 0
    out = capsys.readouterr().out
    assert "rtx2080ti" in out and all(app in out for app in APPS)
    write_profiles(tmp_path / "src" / "bert", suffix="rtx")
    target = tmp_path / "set.json"
    assert main(["profiles", "elastic", "--fit", str(tmp_path / "src"), "--out", str(target)]) == 0
    data = json.loads(target.read_text())
    assert data["fits"]["bert"]["rtx2080ti"]["theta"] == pytest.approx(THETA, rel=1e-3)
    assert "0.0 / 0.0 %" in capsys.readouterr().out
    assert main(["profiles", "elastic", "--fit", str(tmp_path / "none")]) == 2
