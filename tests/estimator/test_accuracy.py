"""Leave-one-type-out accuracy on the reference table (a subset, fixed rank: fast)."""

from __future__ import annotations

import numpy as np

from gavel_ng.estimator import EstimatorConfig, ThroughputEstimator, profile_from_table
from gavel_ng.estimator.report import evaluate, main

TYPES = ["ResNet-50 (batch size 64)", "LM (batch size 20)", "Transformer (batch size 64)",
         "Recommendation (batch size 2048)", "ResNet-18 (batch size 128)"]


def test_completion_beats_copying_the_nearest_reference(reference_table):
    rows = {r.method: r for r in evaluate(reference_table, (0.3,), repeats=3, job_types=TYPES, rank=12, ridge=0.01)}
    comp, near, mean = rows["completion"], rows["nearest_reference"], rows["reference_mean"]
    assert comp.median_rel_error < 0.08
    assert comp.median_rel_error < near.median_rel_error < mean.median_rel_error
    assert comp.p90_rel_error < mean.p90_rel_error
    assert comp.same_family >= 0.7
    assert comp.feasibility_accuracy > 0.85
    assert comp.iso_median_rel_error < comp.iso_all_refs_median_rel_error


def test_fingerprint_of_a_fully_profiled_job_finds_its_twin(reference_table):
    """With everything profiled, ResNet-18 bs 64 lands next to another ResNet-18 batch size."""
    held = "ResNet-18 (batch size 64)"
    est = ThroughputEstimator(reference_table, EstimatorConfig(profile_fraction=1.0, rank=12, ridge=0.01),
                              exclude_types=(held,))
    key = (held, 1)
    est.add_job("j", 1, profile_from_table(reference_table, key, est.plan_profile(1)))
    assert est.nearest_reference("j")[0].startswith("ResNet-18")
    fp = est.fingerprint("j")
    assert fp.observed.sum() > 0 and np.isfinite(fp.row).all()


def test_report_command_writes_csv_and_png(reference_table_path, tmp_path, capsys):
    assert main(["--throughputs", str(reference_table_path), "--fractions", "0.5", "--repeats", "1",
                 "--out", str(tmp_path), "--types", TYPES[0], "--types", TYPES[1], "--rank", "8",
                 "--ridge", "0.01"]) == 0
    assert "completion" in capsys.readouterr().out
    text = (tmp_path / "estimator_accuracy.csv").read_text().splitlines()
    assert text[0].startswith("fraction,method,median_rel_error") and len(text) == 4
    assert (tmp_path / "estimator_accuracy.png").stat().st_size > 0


def test_report_command_missing_table(tmp_path, capsys):
    assert main(["--throughputs", str(tmp_path / "none.json"), "--out", str(tmp_path)]) == 2
    assert "--throughputs=" in (err := capsys.readouterr().err) and "no such file" in err
