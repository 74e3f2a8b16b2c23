"""Modeled throughput tables: shape, physical sanity, the heterogeneity knob, calibration."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from gavel_ng.profiles.model import ModelConstants, build_table, load_constants
from gavel_ng.throughputs import ThroughputTable

ALL = ["k80", "p100", "v100", "t4", "a100", "h100"]
R50 = ("ResNet-50 (batch size 64)", 1)


@pytest.fixture(scope="module")
def table() -> ThroughputTable:
    return build_table(ALL)


def test_shape_matches_gavel_convention(table: ThroughputTable) -> None:
    assert table.worker_types == ALL
    assert set(table.isolated) == set(ALL) | {f"{g}_unconsolidated" for g in ALL}
    assert len(table.job_keys) == 83
    assert {sf for _, sf in table.job_keys} == {1, 2, 4, 8}
    assert all(v > 0 for per in table.isolated.values() for v in per.values())


def test_newer_gpus_are_faster_on_compute_bound_jobs(table: ThroughputTable) -> None:
    rates = [table.get(R50, g) for g in ["k80", "p100", "v100", "a100", "h100"]]
    assert rates == sorted(rates)


def test_multi_gpu_scaling_and_placement(table: ThroughputTable) -> None:
    for sf in (2, 4, 8):
        key = ("ResNet-50 (batch size 32)", sf)
        one = table.get((key[0], 1), "v100")
        assert one < table.get(key, "v100") <= sf * one
        spread = table.get_unconsolidated(key, "v100")
        assert spread is not None and spread <= table.get(key, "v100")


def test_pairs_slow_down_and_respect_memory(table: ThroughputTable) -> None:
    small = ("ResNet-18 (batch size 16)", 1)
    a, b = table.get_pair(small, R50, "v100") or (0.0, 0.0)
    assert 0 < a < table.get(small, "v100") and 0 < b < table.get(R50, "v100")
    assert a / table.get(small, "v100") + b / table.get(R50, "v100") <= 2.0
    big = ("ResNet-50 (batch size 128)", 1)
    assert table.get_pair(big, big, "k80") == (0.0, 0.0)
    assert table.get_pair(big, big, "h100") != (0.0, 0.0)


def test_heterogeneity_knob() -> None:
    flat = build_table(["k80", "v100"], heterogeneity=0.0, pairs=False)
    for key in flat.job_keys:
        assert flat.get(key, "v100") == pytest.approx(flat.get(key, "k80"))
    one = build_table(["k80", "v100"], pairs=False)
    two = build_table(["k80", "v100"], heterogeneity=2.0, pairs=False)
    for key in one.job_keys:
        s1 = one.get(key, "v100") / one.get(key, "k80")
        s2 = two.get(key, "v100") / two.get(key, "k80")
        assert s2 == pytest.approx(s1 ** 2)


def test_constants_round_trip() -> None:
    c = load_constants()
    assert ModelConstants.from_json(c.to_json()) == c
    assert c != ModelConstants()  # the fitted file is shipped and loaded


def test_building_a_table_does_not_import_torch() -> None:
    code = ("import sys; from gavel_ng.profiles.model import build_table; "
            "build_table(['v100'], pairs=False); assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


def test_shipped_constants_meet_the_calibration_targets(reference_table: ThroughputTable) -> None:
    from gavel_ng.profiles.calibrate import score

    report = score(reference_table, load_constants())
    for t in report.types:
        assert t.spearman >= 0.8, t
        assert t.median_abs_log_error <= math.log(1.5), t
    assert report.speedup_spearman >= 0.7
