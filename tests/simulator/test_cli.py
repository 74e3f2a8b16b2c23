import json

import pytest

from gavel_ng.cli import main

GOOD = "Transformer (batch size 32)\tcmd\t.\t--n\t0\t1000\t1\t1\t-1\t0\n"


@pytest.fixture
def table_args(reference_table_path):
    return ["--throughputs", str(reference_table_path), "--cluster", "v100=2,p100=2,k80=2"]


def test_json_output_is_clean(capsys, table_args, tmp_path):
    rc = main(["simulate", *table_args, "--static", "6", "--json",
               "--out", str(tmp_path / "o")])
    out = capsys.readouterr()
    assert rc == 0
    data = json.loads(out.out)
    assert data == json.loads((tmp_path / "o" / "summary.json").read_text())   # all of it, as the file has it
    assert {"policy", "avg_jct_hours", "p50_jct_hours", "p90_jct_hours", "p99_jct_hours", "makespan_hours",
            "utilization", "gpu_hours", "jobs_measured", "jobs_unfinished", "adaptive_jobs", "reallocations",
            "total_cost_usd", "run_cost_usd", "slo_violations", "slo_dropped", "lease_renewal_fraction", "unstable",
            "policy_solves", "solver_fallbacks", "wall_seconds", "warnings"} <= set(data)
    assert data["jobs_measured"] == 6
    assert (tmp_path / "o" / "jobs.csv").exists() and (tmp_path / "o" / "summary.json").exists()


@pytest.mark.parametrize("extra, lines, needle", [
    (["--cluster", "v100=x"], None, "--cluster"),
    (["--window", "0:5"], GOOD * 2, "--window"),
    ([], GOOD + "A\tb\tc\td\te\tf\tg\th\ti\n", "line 2"),
    ([], GOOD + GOOD.replace("Transformer (batch size 32)", "NoSuchNet"), "NoSuchNet"),
])
def test_bad_input_exits_2_naming_the_problem(capsys, table_args, tmp_path, extra, lines, needle):
    trace = tmp_path / "t.trace"
    trace.write_text(lines or GOOD)
    rc = main(["simulate", *table_args, "--trace", str(trace), *extra])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
