"""`gavel-ng simulate`: one path for Gavel traces and Pollux workloads, any policy kind.

The format of a --trace file is read from its content, never its name; policy options come
from --policy-option. The runs below need the unified simulator (simulate() of an
ElasticTrace, round policies, SimConfig.options/realloc_delay); the parsing tests do not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gavel_ng.cli import main
from gavel_ng.cli.simulate_cmd import parse_policy_options
from gavel_ng.elastic import pollux_workload, write_pollux_csv
from gavel_ng.errors import InputError
from gavel_ng.traces import Trace, trace_format, write_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROUND = ["--plugin", str(EXAMPLES / "round_policy.py"), "--policy", "speedup_sum"]
ALLOCATION = ["--plugin", str(EXAMPLES / "allocation_policy.py"), "--policy", "proportional_fairness"]
CLUSTER = ["--cluster", "t4=8,v100=4"]
WORKLOAD = ["--workload", "pollux", "--jobs", "12", "--hours", "1"]


def gavel_trace(path: Path, jobs: int = 4) -> Path:
    import numpy as np

    write_trace(Trace(["ResNet-18 (batch size 64)"] * jobs, np.ones(jobs, np.int64), np.ones(jobs),
                      np.full(jobs, 2000.0), np.full(jobs, np.inf), np.arange(jobs) * 60.0), path)
    return path


def pollux_csv(path: Path, jobs: int = 4) -> Path:
    write_pollux_csv(pollux_workload(num_jobs=jobs, hours=0.5, seed=0), path)
    return path


def run_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["simulate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ----- no simulation: flags, sniffing ------------------------------------------------------------
def test_a_trace_is_read_by_its_content_not_its_name(tmp_path):
    assert trace_format(pollux_csv(tmp_path / "x.txt")) == "pollux"
    assert trace_format(gavel_trace(tmp_path / "y.csv")) == "gavel"
    (tmp_path / "z.csv").write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError, match="--trace-format"):
        trace_format(tmp_path / "z.csv")


def test_policy_options_parse_as_json_else_text():
    assert parse_policy_options(["p=-1", "mode=fast", "counts=[1, 2]", "on=true", "name="]) == \
        {"p": -1, "mode": "fast", "counts": [1, 2], "on": True, "name": ""}
    assert parse_policy_options(None) == {}


@pytest.mark.parametrize("bad", ["p", "=1", "not a name=1"])
def test_a_bad_policy_option_is_a_one_line_error(capsys, bad):
    assert main(["simulate", "--static", "2", *CLUSTER, "--policy-option", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert "--policy-option" in err and "KEY=VALUE" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("args, flag", [
    (["--static", "2", "--jobs", "3"], "--jobs"),
    (["--jobs-per-hour", "2", "--hours", "1"], "--hours"),
    (["--static", "2", "--trace-format", "pollux"], "--trace-format"),
    (["--static", "2", "--round-seconds", "0"], "--round-seconds"),
    (["--static", "2", "--realloc-delay", "-1"], "--realloc-delay"),
])
def test_flags_of_another_source_are_errors(capsys, args, flag):
    assert main(["simulate", *args, *CLUSTER]) == 2
    assert flag in capsys.readouterr().err


def test_a_pollux_csv_read_as_a_gavel_trace_names_the_line(tmp_path, capsys):
    path = pollux_csv(tmp_path / "w.csv")
    assert main(["simulate", "--trace", str(path), "--trace-format", "gavel", *CLUSTER]) == 2
    assert "w.csv line 1" in capsys.readouterr().err


# ----- runs (the unified simulator) ----------------------------------------------------------------
def test_a_round_plugin_policy_runs_the_pollux_workload(capsys):
    assert main(["simulate", *ROUND, *WORKLOAD, *CLUSTER]) == 0
    out = capsys.readouterr().out
    assert "policy speedup_sum" in out and "jobs measured      12" in out
    assert "GPU hours" in out and "re-allocations" in out


@pytest.mark.parametrize("source", [["--static", "6"], WORKLOAD], ids=["gavel", "pollux"])
def test_an_allocation_plugin_policy_runs_either_source(capsys, source):
    assert main(["simulate", *ALLOCATION, *source, *CLUSTER]) == 0
    out = capsys.readouterr().out
    assert "policy proportional_fairness" in out and "rounds of 360 s" in out   # its declared interval
    assert "GPU hours" in out and "re-allocations" in out


def test_a_pollux_csv_named_txt_runs_as_a_workload(tmp_path, capsys):
    run = run_json(capsys, *ROUND, "--trace", str(pollux_csv(tmp_path / "x.txt")), *CLUSTER)
    assert run["jobs_measured"] == 4 and run["adaptive_jobs"] == 4   # speedup_sum adapts adaptive jobs
    assert run["gpu_hours"] > 0


def test_a_gavel_trace_named_csv_runs_as_a_gavel_trace(tmp_path, capsys):
    run = run_json(capsys, *ALLOCATION, "--trace", str(gavel_trace(tmp_path / "y.csv")), *CLUSTER)
    assert run["jobs_measured"] == 4 and run["adaptive_jobs"] == 0


def test_several_policies_of_both_kinds_run_the_same_workload(tmp_path, capsys):
    out = run_json(capsys, *ROUND[:2], *ALLOCATION[:2], "--policy", "speedup_sum,proportional_fairness,las",
                   *WORKLOAD, *CLUSTER)
    assert [r["policy"] for r in out["runs"]] == ["speedup_sum", "proportional_fairness", "las"]
    assert all(r["jobs_measured"] == 12 and r["gpu_hours"] > 0 for r in out["runs"])


def test_save_trace_writes_a_workload_back_in_its_own_format(tmp_path, capsys):
    saved = tmp_path / "saved.dat"
    first = run_json(capsys, *ALLOCATION, *WORKLOAD, *CLUSTER, "--save-trace", str(saved))
    assert trace_format(saved) == "pollux"
    again = run_json(capsys, *ALLOCATION, "--trace", str(saved), *CLUSTER)
    assert again["avg_jct_hours"] == pytest.approx(first["avg_jct_hours"])
