"""Built-in tables and the one resolver behind every flag that takes a table.

Nothing here reads outside the repository: "gavel-osdi20" is package data.
"""

from __future__ import annotations

import json

import pytest

from gavel_ng import InputError
from gavel_ng.cli import main
from gavel_ng.profiles import write_table
from gavel_ng.profiles.table_io import resolve_table
from gavel_ng.throughputs import BUILTIN_TABLES, ThroughputTable

R50 = ("ResNet-50 (batch size 64)", 1)
TINY = ["--static", "6", "--json"]


def summary(capsys, *argv: str) -> dict:
    assert main(["simulate", *argv]) == 0
    data = json.loads(capsys.readouterr().out)
    data.pop("wall_seconds")
    data.pop("solve_seconds")   # timings
    return data


def assert_exit_2(capsys, argv: list[str], *fragments: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for f in fragments:
        assert f in err, (f, err)


def test_gavel_osdi20_is_the_measured_k80_p100_v100_table(reference_table) -> None:
    t = ThroughputTable.builtin("gavel-osdi20")
    assert t == reference_table
    assert t.worker_types == ["k80", "p100", "v100"]
    assert set(t.isolated) == {"k80", "p100", "v100", "k80_unconsolidated", "p100_unconsolidated",
                               "v100_unconsolidated"}
    assert len(t.job_types) == 26 and {sf for _, sf in t.job_keys} == {1, 2, 4, 8}
    # entries of Gavel's simulation_throughputs.json, copied by hand
    assert t.get(R50, "v100") == 4.394774823323071
    assert t.get(R50, "k80") == 0.6190282202246573
    assert t.get_unconsolidated(("ResNet-50 (batch size 64)", 4), "v100") == 11.136430014818272
    assert t.get_pair(("ResNet-18 (batch size 16)", 1), ("ResNet-18 (batch size 32)", 1), "k80") == (
        2.539979567443098, 3.1201925448827033)


def test_unknown_builtin_name_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="gavel-osdi20") as exc:
        ThroughputTable.builtin("gavel-osdi21")
    assert exc.value.value == "gavel-osdi21"


def test_resolver_takes_a_name_a_json_file_or_a_csv(tmp_path, reference_table, reference_table_path) -> None:
    assert list(BUILTIN_TABLES) == ["gavel-osdi20"]
    assert resolve_table("gavel-osdi20") == reference_table
    assert resolve_table(reference_table_path) == reference_table
    csv_path = tmp_path / "gavel.csv"
    write_table(reference_table, csv_path)
    assert resolve_table(str(csv_path)) == reference_table   # pairs and placement twins too


def test_exported_csv_simulates_like_the_model_it_came_from(capsys, tmp_path) -> None:
    path = tmp_path / "model.csv"
    assert main(["profiles", "export", "--gpu", "v100,k80", "--out", str(path)]) == 0
    capsys.readouterr()
    cluster = ["--cluster", "v100=2,k80=2"]
    from_csv = summary(capsys, "--throughputs", str(path), *cluster, *TINY)
    assert from_csv == summary(capsys, *cluster, *TINY)   # no --throughputs: the modeled table
    assert from_csv["jobs_measured"] == 6


def test_gavel_table_by_name_or_as_csv_simulates_the_same(capsys, tmp_path, reference_table) -> None:
    path = tmp_path / "gavel.csv"
    write_table(reference_table, path)
    cluster = ["--cluster", "v100=2,p100=2,k80=2"]
    by_name = summary(capsys, "--throughputs", "gavel-osdi20", *cluster, *TINY)
    assert by_name == summary(capsys, "--throughputs", str(path), *cluster, *TINY)
    assert by_name != summary(capsys, *cluster, *TINY)   # the modeled table is another one


@pytest.mark.parametrize("name, text, fragment", [
    ("no-such-table", None, "neither a file nor a built-in table (built-in tables: gavel-osdi20"),
    ("missing.csv", None, "no such file"),
    ("bad.json", "{", "not valid JSON"),
    ("bad.csv", "job_type,scale_factor,worker_type\nA,1,v100\n", "missing column throughput"),
    ("neg.csv", "job_type,scale_factor,worker_type,throughput\nA,1,v100,-1\n", "line 2"),
])
def test_bad_table_exits_2_naming_flag_and_value(capsys, tmp_path, name, text, fragment) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    value = name if name == "no-such-table" else str(path)
    assert_exit_2(capsys, ["simulate", "--throughputs", value, "--static", "2"],
                  f"--throughputs={value!r}", fragment)


def test_sweep_checks_its_tables_before_running(capsys, tmp_path) -> None:
    results = tmp_path / "r.csv"
    assert_exit_2(capsys, ["sweep", "--results", str(results), "--static", "2", "--throughputs", "gavel-osdi19"],
                  "--throughputs='gavel-osdi19'")
    assert not results.exists()


def test_other_table_flags_use_the_resolver(capsys, tmp_path) -> None:
    from gavel_ng.estimator.report import main as report

    assert report(["--throughputs", str(tmp_path / "x.json"), "--out", str(tmp_path)]) == 2
    assert "--throughputs=" in capsys.readouterr().err
    assert_exit_2(capsys, ["profiles", "show", "--table", "nope"], "--table='nope'")
    assert main(["profiles", "show", "--table", "gavel-osdi20", "--job", "ResNet-50 (batch size 64)"]) == 0
    assert "4.395" in capsys.readouterr().out


def test_cluster_config_keeps_a_builtin_name(tmp_path) -> None:
    pytest.importorskip("google.protobuf")   # the worker extra
    from gavel_ng.runtime.config import ClusterConfig

    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"throughputs": "gavel-osdi20"}))
    assert ClusterConfig.load(path).throughputs == "gavel-osdi20"
    path.write_text(json.dumps({"throughputs": "mine.csv"}))
    assert ClusterConfig.load(path).throughputs == str(tmp_path / "mine.csv")
