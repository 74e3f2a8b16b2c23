"""The reproduction scripts' shared helpers and the one that needs no simulation."""

import csv
import sys
from pathlib import Path

import pandas as pd
import pytest

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
    assert common.verdict(5.2, 2.7) == "partly (larger)"
    assert common.verdict(0.5, 0.9) == "partly (larger)"    # a cut the paper made smaller
    assert common.ratio(4.0, 2.0) == 2.0


def test_results_directory_suffix_per_configuration():
    assert common.suffix("reduced", "reference") == ""
    assert common.suffix("paper", "reference") == "-paper"
    assert common.suffix("full", "builtin") == "-builtin-full"


def test_claim_carries_the_range_of_its_ratio_over_seeds():
    rows = [("a", 0, 30.0), ("b", 0, 10.0), ("a", 1, 40.0), ("b", 1, 20.0)]
    df = pd.DataFrame([{"policy": p, "seed": s, "jobs_per_hour": 5.6, "avg_jct_hours": v, "unstable": False}
                       for p, s, v in rows])
    claim = common.jct_claim(df, "a vs b", 2.0, "a", "b", 5.6)
    assert claim.ours == "2.33x (35.0 h vs 15.0 h); seeds 2.00-3.00x"
    assert common.seed_band(df[df["seed"] == 0], "avg_jct_hours", "a", "b") == ""   # one seed: no range


def test_hierarchical_writes_claims_shares_and_figures(tmp_path, reference_table_path):
    assert hierarchical.main(["--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader((tmp_path / "claims.csv").open()))
    assert len(rows) == 3 and all(r["verdict"] for r in rows)
    shares = pd.read_csv(tmp_path / "fig12_shares.csv")
    het = shares[shares["variant"] == "hierarchical"]
    assert het.groupby("time")["share"].sum().round(6).eq(1.0).all()
    assert (tmp_path / "fig12_allocation_share.png").exists() and (tmp_path / "fig13_allocation_share.png").exists()


@pytest.mark.slow
def test_gpu_scripts_dry_run_on_the_cpu(tmp_path):
    """gpu_pairs.py and gpu_cluster.py are meant for a GPU; on the CPU with tiny models they must
    still run through and write their tables (so they do not rot between GPU sessions)."""
    import gpu_cluster
    import gpu_pairs

    types = ["ResNet-18 (batch size 32)", "A3C"]
    assert gpu_pairs.main(["--job-types", *types, "--size", "tiny", "--seconds", "0.3", "--repeats", "1",
                           "--out", str(tmp_path)]) == 0
    iso = pd.read_csv(tmp_path / "gpu_isolated.csv")
    assert list(iso["job_type"]) == types and (iso["plain_steps_per_s"] > 0).all()
    pairs = pd.read_csv(tmp_path / "gpu_pairs.csv")
    assert len(pairs) == 1 and 0 < pairs["frac_a"][0] and 0 < pairs["frac_b"][0]

    out = tmp_path / "cluster"
    assert gpu_cluster.main(["--gpu-types", "h100", "--job-types", "A3C", "--size", "tiny", "--job-seconds", "2",
                             "--round-seconds", "3", "--isolated", str(tmp_path / "gpu_isolated.csv"),
                             "--timeout", "120", "--out", str(out)]) == 0
    jobs = pd.read_csv(out / "gpu_cluster_jobs.csv")
    assert len(jobs) == 1 and jobs["status"][0] == "done", jobs.to_dict("records")
    assert jobs["jct_s"][0] > 0 and jobs["devices"][0].startswith("cpu")
    assert (pd.read_csv(out / "gpu_cluster_attempts.csv")["steps"] > 0).all()


REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (REPO / "experiments").glob("*.py") if p.name != "common.py")


def test_scripts_write_under_an_untracked_root_unless_told(tmp_path):
    """By default no reproduction script writes over a tracked file: results go under out/experiments/
    (git-ignored); experiments/results/ only when asked (--results-root or --out)."""
    import argparse
    import subprocess

    args = argparse.Namespace(config="reduced", table="reference", out=None, results_root=common.RESULTS)
    assert common.out_dir("fig09_las_single", args) == REPO / "out" / "experiments" / "fig09_las_single"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(common.RESULTS / "x" / "results.csv")], cwd=REPO)
    assert ignored.returncode == 0, "out/experiments/ must be git-ignored"
    args.results_root = tmp_path
    assert common.out_dir("cost", args) == tmp_path / "cost"
    for script in SCRIPTS:   # no other default points into the committed tree
        text = script.read_text()
        assert '/ "results" /' not in text and '"experiments" / "results"' not in text, script.name


def test_committed_results_hold_no_machine_paths():
    bad = []
    for path in (REPO / "experiments" / "results").rglob("*"):
        if path.is_file() and path.suffix in (".csv", ".md", ".log", ".json", ".txt"):
            text = path.read_text(errors="replace")
            bad += [f"{path.relative_to(REPO)}: {m}" for m in ("/work/", "/root/", "/tmp/", "/home/") if m in text]
    assert not bad, bad


def test_rows_of_different_kinds_share_one_csv(tmp_path):
    """sim_vs_cluster's four policies in one command: the allocation policies' rows carry columns that
    `goodput`'s lack; the file has every column, a missing cell empty (the default command failed here
    after 18 minutes of cluster runs)."""
    path = tmp_path / "summary.csv"
    common.write_rows(path, [{"policy": "las", "err": 1.0, "err_at_boundary": 2.0}, {"policy": "goodput", "err": 3.0},
                             {"policy": "x", "extra": 4}])
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["policy", "err", "err_at_boundary", "extra"]
    assert rows[1] == {"policy": "goodput", "err": "3.0", "err_at_boundary": "", "extra": ""}
    assert rows[2]["extra"] == "4"
