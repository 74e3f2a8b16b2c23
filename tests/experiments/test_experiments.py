"""The reproduction scripts' shared helpers and the one that needs no simulation."""

import csv
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

import common  # noqa: E402
import hierarchical  # noqa: E402


def test_supports_answers_without_error():
    assert isinstance(common.supports("space_sharing"), bool)
    assert isinstance(common.supports("estimator"), bool)


def test_verdict_and_ratio():
    assert common.verdict(3.3, 3.5) == "reproduced"
    assert common.verdict(1.6, 3.5) == "partly"
    assert common.verdict(0.8, 3.5) == "not reproduced"
    assert common.ratio(4.0, 2.0) == 2.0


def test_hierarchical_writes_claims_shares_and_figures(tmp_path, reference_table_path):
    assert hierarchical.main(["--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader((tmp_path / "claims.csv").open()))
    assert len(rows) == 3 and all(r["verdict"] for r in rows)
    shares = pd.read_csv(tmp_path / "fig12_shares.csv")
    het = shares[shares["variant"] == "hierarchical"]
    assert het.groupby("time")["share"].sum().round(6).eq(1.0).all()
    assert (tmp_path / "fig12_allocation_share.png").exists() and (tmp_path / "fig13_allocation_share.png").exists()
