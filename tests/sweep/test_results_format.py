"""The results table's format: a new table's by its name (.csv or .parquet; anything else is refused in
one line naming the flag and the path), an existing table's by its content, whatever its name."""

from __future__ import annotations

import pandas as pd
import pytest

from gavel_ng.cli import main
from gavel_ng.errors import InputError
from gavel_ng.sweep import ResultsStore, SweepPoint
from gavel_ng.sweep.point import PointResult
from gavel_ng.sweep.store import table_format


def _row(point: SweepPoint, finished: float) -> PointResult:
    return PointResult({**point.as_row(), "point_id": point.point_id, "status": "ok", "finished_at": finished,
                        "avg_jct_hours": 1.5})


def _pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name, shown", [("r.txt", "'.txt'"), ("r.xlsx", "'.xlsx'"), ("results", "(no suffix)")])
def test_a_new_table_with_an_unknown_suffix_is_refused_in_one_line(tmp_path, capsys, name, shown):
    path = tmp_path / name
    with pytest.raises(InputError) as err:
        ResultsStore(path)
    assert str(err.value) == f"--results={str(path)!r}: unknown table format {shown}: name a new table .csv or .parquet"
    assert main(["sweep", "--results", str(path), "--static", "2", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == f"gavel-ng sweep: error: {err.value}"
    assert not path.exists()


def test_the_suffix_is_read_in_any_case(tmp_path):
    store = ResultsStore(tmp_path / "R.CSV")
    store.append(_row(SweepPoint(static=2), 1.0))
    assert list(store.load()["avg_jct_hours"]) == [1.5]


def test_an_existing_table_is_read_and_appended_as_its_content_says(tmp_path, caplog):
    a, b = SweepPoint(static=2), SweepPoint(static=3)
    ResultsStore(tmp_path / "r.csv").append(_row(a, 1.0))
    misnamed = tmp_path / "r.parquet"                     # a CSV table under a Parquet name: no pyarrow needed
    (tmp_path / "r.csv").rename(misnamed)
    store = ResultsStore(misnamed)
    assert "holds a csv table although its name says parquet" in caplog.text
    store.append(_row(b, 2.0))
    assert list(store.load()["point_id"]) == [a.point_id, b.point_id]
    assert table_format(misnamed) == "csv" and pd.read_csv(misnamed)["static"].tolist() == [2, 3]


def test_parquet_content_under_a_csv_name_is_read_as_parquet(tmp_path):
    path = tmp_path / "r.csv"
    if _pyarrow():
        pd.DataFrame([_row(SweepPoint(static=2), 1.0).row]).to_parquet(path, index=False)
        assert table_format(path) == "parquet" and len(ResultsStore(path).load()) == 1
        return
    path.write_bytes(b"PAR1\x15\x04\xff\xfe\x00\x00PAR1")  # a Parquet file's frame: never parsed as CSV
    assert table_format(path) == "parquet"
    with pytest.raises(InputError, match=r"^--results='.*r\.csv': Parquet needs pyarrow"):
        ResultsStore(path)


def test_content_that_is_neither_is_refused_naming_the_argument(tmp_path, capsys):
    path = tmp_path / "r.csv"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00binary")
    with pytest.raises(InputError, match="is neither a CSV nor a Parquet table"):
        ResultsStore(path)
    assert main(["plot", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"gavel-ng plot: error: RESULTS={str(path)!r}: is neither a CSV nor a Parquet table"
