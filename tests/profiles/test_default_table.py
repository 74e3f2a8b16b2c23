"""The built-in table: the model for the asked GPU types, cached, copied, torch-free."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gavel_ng.errors import InputError
from gavel_ng.profiles import GPUS, default_table
from gavel_ng.profiles.defaults import _cached
from gavel_ng.profiles.model import build_table

R50 = ("ResNet-50 (batch size 64)", 1)


def test_all_types_by_default_and_equal_to_the_model() -> None:
    table = default_table()
    assert table.worker_types == list(GPUS)
    assert table == build_table(list(GPUS))
    assert len(table.job_keys) == 83 and table.pairs["h100_unconsolidated"]


def test_order_case_and_duplicates() -> None:
    table = default_table(["H100", "v100", "h100"])
    assert table.worker_types == ["h100", "v100"]
    assert table.isolated["v100"] == default_table(["v100"]).isolated["v100"]


def test_cached_and_returns_copies() -> None:
    first = default_table(["k80", "v100"])
    hits = _cached.cache_info().hits
    first.isolated["v100"][R50] = -1.0
    first.pairs["v100"][R50].clear()
    second = default_table(["k80", "v100"])
    assert _cached.cache_info().hits == hits + 1
    assert second.isolated["v100"][R50] > 0 and second.pairs["v100"][R50]


def test_heterogeneity_pivots_on_v100() -> None:
    flat = default_table(["k80", "h100", "v100"], heterogeneity=0.0)
    model = default_table(["v100"])
    for key in flat.job_keys:
        for gpu in ("k80", "h100"):
            assert flat.get(key, gpu) == pytest.approx(model.get(key, "v100"))
    steep = default_table(["k80", "h100"], heterogeneity=2.0)
    one = default_table(["k80", "h100"])
    speedup = one.get(R50, "h100") / model.get(R50, "v100")
    assert steep.get(R50, "h100") == pytest.approx(model.get(R50, "v100") * speedup ** 2)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"gpus": ["v100", "x100"]}, "gpus"),
    ({"gpus": []}, "gpus"),
    ({"heterogeneity": -1.0}, "heterogeneity"),
    ({"heterogeneity": float("inf")}, "heterogeneity"),
    ({"network_gbps": 0.0}, "network_gbps"),
])
def test_bad_arguments(kwargs: dict, field: str) -> None:
    with pytest.raises(InputError) as info:
        default_table(**kwargs)
    assert info.value.field == field


def test_does_not_import_torch() -> None:
    code = ("import sys; from gavel_ng.profiles import default_table; "
            "t = default_table(['v100', 'h100']); assert t.pairs; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
