"""Table files: CSV and Gavel JSON round-trip exactly, and bad files fail with line and field."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gavel_ng.errors import InputError
from gavel_ng.profiles import default_table, read_table, write_table
from gavel_ng.profiles.table_io import resolve_table
from gavel_ng.throughputs import ThroughputTable

A, B = ("ResNet-18 (batch size 16)", 1), ("LM (batch size 5)", 1)
HEADER = "job_type,scale_factor,worker_type,throughput"
PAIR_HEADER = HEADER + ",partner,partner_scale_factor,throughput_with_partner,partner_throughput_with_partner"
AWKWARD = [1 / 3, 0.1 + 0.2, 5e-324, 1.7976931348623157e308, 123456789.12345679, 0.0]


def awkward_table() -> ThroughputTable:
    """Floats that print badly with fewer than 17 digits, an asymmetric pair, a twin."""
    t = ThroughputTable()
    t.isolated["v100"] = {A: AWKWARD[0], B: AWKWARD[1], ("Odd, \"quoted\" job", 8): AWKWARD[3]}
    t.isolated["v100_unconsolidated"] = {("Odd, \"quoted\" job", 8): AWKWARD[4]}
    t.isolated["rtx"] = {A: AWKWARD[2], B: AWKWARD[5]}
    t.pairs["v100"] = {A: {B: (AWKWARD[0] / 7, AWKWARD[1] / 3), A: (0.0, 0.0)}, B: {A: (0.1, 0.2)}}
    return t


def round_trip(table: ThroughputTable, fmt: str, tmp_path: Path) -> ThroughputTable:
    path = tmp_path / ("t.csv" if fmt == "csv" else "t.json")
    write_table(table, path, fmt)
    return read_table(path)


def assert_bit_equal(got: ThroughputTable, want: ThroughputTable) -> None:
    assert got == want
    for worker, per in want.isolated.items():
        assert [repr(got.isolated[worker][k]) for k in per] == [repr(v) for v in per.values()]
    for worker, per in want.pairs.items():
        for key, row in per.items():
            assert {o: tuple(map(repr, v)) for o, v in got.pairs[worker][key].items()} == \
                   {o: tuple(map(repr, v)) for o, v in row.items()}


@pytest.mark.parametrize("fmt", ["csv", "gavel-json"])
def test_round_trip_awkward_floats(fmt: str, tmp_path: Path) -> None:
    assert_bit_equal(round_trip(awkward_table(), fmt, tmp_path), awkward_table())


@pytest.mark.parametrize("fmt", ["csv", "gavel-json"])
def test_round_trip_modeled_table(fmt: str, tmp_path: Path) -> None:
    table = default_table(["k80", "h100"], heterogeneity=1.7)
    assert sum(len(r) for per in table.pairs.values() for r in per.values()) > 3000
    assert_bit_equal(round_trip(table, fmt, tmp_path), table)


@pytest.mark.parametrize("fmt", ["csv", "gavel-json"])
def test_round_trip_reference_table(fmt: str, tmp_path: Path, reference_table: ThroughputTable) -> None:
    assert_bit_equal(round_trip(reference_table, fmt, tmp_path), reference_table)


def test_stream_and_format_rules(tmp_path: Path) -> None:
    buf = io.StringIO()
    write_table(awkward_table(), buf, "csv")
    assert buf.getvalue().splitlines()[0] == PAIR_HEADER
    with pytest.raises(InputError, match="required when writing to a stream"):
        write_table(awkward_table(), io.StringIO())
    with pytest.raises(InputError, match="cannot tell the format"):
        write_table(awkward_table(), tmp_path / "t.txt")
    (tmp_path / "t.txt").write_text(buf.getvalue())
    assert read_table(tmp_path / "t.txt", "csv") == awkward_table()
    with pytest.raises(InputError, match="cannot read"):
        read_table(tmp_path / "missing.csv")


def test_table_without_pairs_writes_four_columns() -> None:
    buf = io.StringIO()
    write_table(ThroughputTable(isolated={"k80": {A: 2.5}}), buf, "csv")
    assert buf.getvalue() == f"{HEADER}\n{A[0]},1,k80,2.5\n"


def write(tmp_path: Path, text: str, name: str = "table.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_hand_written_csv_with_mirror_rows_and_defaults(tmp_path: Path) -> None:
    text = ("\ufeffJob_Type , scale_factor,worker_type,throughput,partner,throughput_with_partner\r\n"
            f"{A[0]},1,v100,10,,\r\n\r\n{B[0]},1,v100,4.5,,\r\n"
            f"{A[0]},1,v100,,{B[0]},6\r\n{B[0]},1,v100,4.5,{A[0]},3\r\n")
    t = read_table(write(tmp_path, text))
    assert t.isolated == {"v100": {A: 10.0, B: 4.5}}
    assert t.get_pair(A, B, "v100") == (6.0, 3.0) and t.get_pair(B, A, "v100") == (3.0, 6.0)


BAD_CSV = [
    # (content, expected message fragment)
    ("job_type,worker_type,throughput\nx,k80,1\n", "table.csv line 1: header='job_type,worker_type,throughput': "
                                                  "missing column scale_factor"),
    (f"{HEADER}\nx,1,k80,1\nx,2,k80,abc\n", "table.csv line 3: throughput='abc': must be a non-negative number"),
    (f"{HEADER}\nx,1,k80,-0.5\n", "table.csv line 2: throughput='-0.5': must be a non-negative number"),
    (f"{HEADER}\nx,1,k80,nan\n", "table.csv line 2: throughput='nan': must be finite"),
    (f"{HEADER}\nx,1,k80,1_000\n", "table.csv line 2: throughput='1_000'"),
    (f"{HEADER}\nx,1,k80,\n", "table.csv line 2: throughput='': must be a non-negative number"),
    (f"{HEADER}\nx,0,k80,1\n", "table.csv line 2: scale_factor='0': must be a whole number of GPUs"),
    (f"{HEADER}\nx,1.5,k80,1\n", "table.csv line 2: scale_factor='1.5'"),
    (f"{HEADER}\nx,two,k80,1\n", "table.csv line 2: scale_factor='two'"),
    (f"{HEADER}\nx,-1,k80,1\n", "table.csv line 2: scale_factor='-1'"),
    (f"{HEADER},colour\nx,1,k80,1,red\n", "table.csv line 1: header='colour': unknown column"),
    (f"{HEADER},throughput\n", "table.csv line 1: header='throughput': duplicate column"),
    (f"{HEADER},partner\nx,1,k80,1,\n", "a partner column needs a throughput_with_partner column"),
    (f"{HEADER},throughput_with_partner\n", "header='throughput_with_partner': pair columns need a partner column"),
    (f"{HEADER},partner,throughput_with_partner\nx,1,k80,1,,\nx,1,k80,,x,\n",
     "table.csv line 3: throughput_with_partner='': must be a non-negative number"),
    (f"{HEADER},partner,throughput_with_partner\nx,1,k80,1,,\nx,1,k80,,y,0.5\n",
     "table.csv line 3: partner='y': no isolated row for scale factor 1 on k80"),
    (f"{HEADER},partner,throughput_with_partner\nx,1,k80,1,,\ny,1,k80,1,,\nx,1,k80,,y,0.5\n",
     "table.csv line 4: partner_throughput_with_partner='': required unless a mirror row"),
    (f"{HEADER},partner,throughput_with_partner\nx,1,k80,1,,\nx,1,k80,2,x,0.5\n",
     "table.csv line 3: throughput=2.0: differs from the isolated row on line 2"),
    (f"{HEADER},partner,throughput_with_partner\nx,1,k80,1,,0.5\n",
     "table.csv line 2: throughput_with_partner='0.5': only allowed on a pair row"),
    (f"{HEADER}\nx,1,k80,1\n\nx,1,k80,2\n", "table.csv line 4: job_type='x': duplicate row for scale factor 1 on "
                                           "k80 (first on line 2)"),
    (f"{HEADER}\nx,1,,1\n", "table.csv line 2: worker_type='': required"),
    (f"{HEADER}\nx,1,k80,1,5\n", "table.csv line 2='5': 5 fields but the header has 4"),
    ("", "table.csv line 1='': empty file"),
    (f"{HEADER}\n", "no data rows"),
]


@pytest.mark.parametrize(("text", "message"), BAD_CSV)
def test_bad_csv_names_line_and_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        read_table(write(tmp_path, text))
    assert message in str(info.value)


def test_exact_error_text(tmp_path: Path) -> None:
    lines = [HEADER] + [f"x,{sf},k80,1" for sf in (1, 2, 4, 8)] + ["y,1,k80,1", "y,2,k80,abc"]
    with pytest.raises(InputError) as info:
        read_table(write(tmp_path, "\n".join(lines)))
    assert str(info.value) == "table.csv line 7: throughput='abc': must be a non-negative number"


@pytest.mark.parametrize(("data", "message"), [
    ([1, 2], "table.json='list': expected an object of worker types"),
    ("k80", "table.json='str': expected an object"),
    ({"k80": {"('x', 1)": {"null": "fast"}}}, "table.json.k80.('x', 1).null='fast'"),
    ({"k80": {"x": {"null": 1}}}, "job key must look like"),
    ({"k80": {"('x', 1)": {"null": 1, "('y', 1)": [1, 1]}}}, "partner has no isolated throughput on k80"),
])
def test_bad_gavel_json(tmp_path: Path, data: object, message: str) -> None:
    with pytest.raises(InputError) as info:
        read_table(write(tmp_path, json.dumps(data), "table.json"))
    assert message in str(info.value)


def test_invalid_json_names_line(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        read_table(write(tmp_path, '{\n "k80": {\n  "a": 1,,\n }\n}', "table.json"))
    assert str(info.value).startswith("table.json line 3='\"a\": 1,,': not valid JSON")


def test_a_table_is_read_by_its_content_not_its_name(tmp_path: Path) -> None:
    """A Gavel JSON table named .csv and a CSV table named .json (or with no suffix) read as what they are."""
    as_json = json.dumps({"v100": {"('A', 1)": {"null": 2.0}}})
    as_csv = "job_type,scale_factor,worker_type,throughput\nA,1,v100,2.0\n"
    for text, name in ((as_json, "t.csv"), (as_csv, "t.json"), (as_csv, "table"), (as_json, "table.txt")):
        t = read_table(write(tmp_path, text, name))
        assert t.get(("A", 1), "v100") == 2.0, name
        assert resolve_table(str(tmp_path / name)).get(("A", 1), "v100") == 2.0, name
