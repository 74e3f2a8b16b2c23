"""`gavel-ng solve` end to end: JSON shape, tables, and one-line errors for bad input."""

import json
import subprocess
import sys

import pytest

from gavel_ng.cli import main

PAPER = {"policy": "las", "cluster": {"v100": 1, "k80": 1},
         "jobs": [{"id": "j0", "throughputs": {"v100": 40.0, "k80": 10.0}},
                  {"id": "j1", "throughputs": {"v100": 12.0, "k80": 4.0}},
                  {"id": "j2", "throughputs": {"v100": 100.0, "k80": 50.0}}]}


def write(tmp_path, data, name="p.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_json_output_has_exactly_the_documented_shape(tmp_path, capsys):
    assert main(["solve", "--problem", write(tmp_path, PAPER), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"policy", "allocation", "effective_throughput", "objective", "solver",
                        "solve_seconds", "warnings"}
    assert out["policy"] == "las"
    assert out["allocation"]["j0"]["v100"] == pytest.approx(0.4545, abs=1e-3)
    assert out["objective"] == pytest.approx(0.727, abs=1e-3)
    assert out["effective_throughput"]["j2"] == pytest.approx(54.545, abs=1e-2)
    assert out["warnings"] == []


def test_table_output_and_aliases(tmp_path, capsys):
    assert main(["solve", "--problem", write(tmp_path, PAPER), "--policy", "max_min_fairness"]) == 0
    out = capsys.readouterr().out
    assert "las_agnostic" in out and "j2" in out and "v100" in out


def test_plot_is_written(tmp_path, capsys):
    png = tmp_path / "a.png"
    assert main(["solve", "--example", "teams", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib import image

    assert image.imread(png).shape[0] > 100


def test_every_shipped_example_solves_with_every_policy(capsys):
    from gavel_ng.cli.solve_cmd import example_names
    from gavel_ng.policies import get_policy, list_policies

    for example in example_names():
        for policy in list_policies():
            if get_policy(policy).is_round:
                continue  # no one-shot allocation (test_a_round_policy_is_a_one_line_error)
            if example == "paper_example" and policy in ("makespan", "ftf", "sjf", "allox", "min_cost",
                                                         "min_cost_slo", "makespan_agnostic", "ftf_agnostic",
                                                         "sjf_agnostic", "allox_agnostic", "min_cost_agnostic",
                                                         "min_cost_slo_agnostic"):
                continue  # the paper example has neither steps nor prices
            assert main(["solve", "--example", example, "--policy", policy, "--json"]) == 0, (example, policy)
    capsys.readouterr()


@pytest.mark.parametrize("policy", ["tiresias", "goodput"])
def test_a_round_policy_is_a_one_line_error(policy, capsys):
    assert main(["solve", "--example", "paper_example", "--policy", policy]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert policy in err and "round policy" in err


def test_a_plugin_reading_a_missing_field_is_a_one_line_error(tmp_path):
    """A wrong guess at a field of p.input names the field, the policy, its line and what exists."""
    plugin = tmp_path / "reader.py"
    plugin.write_text("import gavel_ng\n\n\n@gavel_ng.policy(\"bad_reader\", \"reads what is not there\")\n"
                      "def bad_reader(p):\n    return p.input.nonexistent\n")
    out = subprocess.run([sys.executable, "-m", "gavel_ng", "solve", "--example", "paper_example",
                          "--plugin", str(plugin), "--policy", "bad_reader"], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "bad_reader" in err and "'nonexistent'" in err and f"{plugin}:6" in err
    assert "throughputs" in err and "scale_factors" in err   # what exists


BAD = [
    ("not json", "{", "--problem"),
    ("missing cluster", {"jobs": PAPER["jobs"]}, "cluster"),
    ("negative throughput", {**PAPER, "jobs": [{"id": "a", "throughputs": {"v100": -1}}]}, "jobs[0].throughputs.v100"),
    ("unknown worker", {**PAPER, "jobs": [{"id": "a", "throughputs": {"h100": 1}}]}, "jobs[0].throughputs"),
    ("missing id", {**PAPER, "jobs": [{"throughputs": {"v100": 1}}]}, "jobs[0].id"),
    ("bad scale factor", {**PAPER, "jobs": [{"id": "a", "throughputs": {"v100": 1}, "scale_factor": 0}]},
     "jobs[0].scale_factor"),
    ("fits nowhere", {**PAPER, "jobs": [{"id": "a", "throughputs": {"v100": 1}, "scale_factor": 4}]}, "jobs[a]"),
    ("negative gpus", {**PAPER, "cluster": {"v100": -1}}, "cluster.v100"),
    ("unknown field", {**PAPER, "jbos": []}, "problem"),
    ("unknown policy", {**PAPER, "policy": "nope"}, "policy"),
    ("undeclared entity", {**PAPER, "jobs": [{"id": "a", "throughputs": {"v100": 1}, "entity": "x"}]},
     "jobs[0].entity"),
    ("steps needed", {**PAPER, "policy": "makespan"}, "steps_remaining"),
]


@pytest.mark.parametrize("label,data,field", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, label, data, field):
    assert main(["solve", "--problem", write(tmp_path, data)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Traceback" not in err


def test_missing_file_and_bad_plugin(tmp_path, capsys):
    assert main(["solve", "--problem", str(tmp_path / "nope.json")]) == 2
    assert main(["solve", "--problem", write(tmp_path, PAPER), "--plugin", write(tmp_path, "1/0", "bad.py")]) == 2
    err = capsys.readouterr().err
    assert "nope.json" in err and "ZeroDivisionError" in err


@pytest.mark.slow
def test_console_script_help_for_every_subcommand():
    exe = [sys.executable, "-m", "gavel_ng"]
    top = subprocess.run(exe + ["--help"], capture_output=True, text=True, check=True).stdout
    commands = [c for c in ("solve", "policies", "simulate", "profiles", "sweep", "plot") if c in top]
    assert "solve" in commands
    for cmd in commands:
        sub = subprocess.run(exe + [cmd, "--help"], capture_output=True, text=True)
        assert sub.returncode == 0 and "usage" in sub.stdout
    bad = subprocess.run(exe + ["solve", "--policy"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_job_types_resolve_through_the_builtin_profiles(tmp_path, capsys):
    data = {"cluster": {"v100": 2, "a100": 2, "h100": 1},
            "jobs": [{"id": "a", "job_type": "ResNet-50 (batch size 64)", "steps_remaining": 5000},
                     {"id": "b", "job_type": "Transformer (batch size 128)", "scale_factor": 2},
                     {"id": "c", "throughputs": {"v100": 3.0, "h100": 9.0}}]}
    assert main(["solve", "--problem", write(tmp_path, data), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["effective_throughput"]["a"] > 0 and out["effective_throughput"]["b"] > 0
    data["jobs"][0]["job_type"] = "Nope"
    assert main(["solve", "--problem", write(tmp_path, data)]) == 2
    assert "jobs[0].job_type='Nope'" in capsys.readouterr().err
