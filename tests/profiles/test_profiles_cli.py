"""`gavel-ng profiles` run in-process: output, files written, exit codes."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from gavel_ng.cli import main
from gavel_ng.profiles import GPUS, default_table, read_table
from gavel_ng.profiles.table_io import parse_csv
from gavel_ng.throughputs import ThroughputTable


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["profiles", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_input_error(capsys, *argv: str, fragment: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gavel-ng profiles: error: ") and fragment in err
    assert "Traceback" not in err


def test_list(capsys) -> None:
    code, out, _ = run(capsys, "list")
    assert code == 0
    assert "26 job types (83 with scale factors)" in out
    assert any(line.split()[-1] == "1,2,4,8" and "ResNet-50 (batch size 64)" in line for line in out.splitlines())
    assert any(line.split()[-1] == "1" and line.strip().startswith("A3C") for line in out.splitlines())
    for name in GPUS:
        assert f"\n  {name} " in out
    assert "989.0" in out  # H100 tensor TFLOPS
    assert run(capsys)[1] == out  # bare `profiles` lists too


def test_show(capsys) -> None:
    code, out, _ = run(capsys, "show", "--gpu", "v100,h100")
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split() == ["job", "type", "sf", "v100", "h100"]
    assert len(lines) == 2 + 83
    table = default_table(["v100", "h100"])
    row = next(line for line in lines if line.startswith("ResNet-50 (batch size 64) ") and line.split()[4] == "1")
    assert row.split()[-2:] == [f"{table.get(('ResNet-50 (batch size 64)', 1), g):.3f}" for g in ("v100", "h100")]


def test_show_options(capsys) -> None:
    code, out, _ = run(capsys, "show", "--gpu", "k80", "--job", "lm (", "--unconsolidated",
                       "--heterogeneity", "0.5", "--network-gbps", "100")
    assert code == 0
    assert "heterogeneity 0.5, network 100 Gbit/s" in out
    assert out.splitlines()[1].split()[-2:] == ["k80", "k80_unconsolidated"]
    assert len(out.splitlines()) == 2 + 20


def test_show_a_users_table(capsys, tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("job_type,scale_factor,worker_type,throughput\nmy job,1,rtx,0\nmy job,1,k80,2.5\n")
    code, out, _ = run(capsys, "show", "--table", str(path))
    assert code == 0
    assert out.splitlines()[1].split() == ["job", "type", "sf", "rtx", "k80"]
    assert out.splitlines()[2].split() == ["my", "job", "1", "-", "2.500"]
    assert_input_error(capsys, "show", "--table", str(path), "--gpu", "v100", fragment="--gpu='v100': not in")


@pytest.mark.parametrize("fmt", ["csv", "gavel-json"])
def test_export_to_stdout_reads_back(capsys, fmt: str) -> None:
    code, out, _ = run(capsys, "export", "--format", fmt, "--gpu", "t4,a100", "--heterogeneity", "1.5")
    assert code == 0
    want = default_table(["t4", "a100"], heterogeneity=1.5)
    got = parse_csv(out) if fmt == "csv" else ThroughputTable.from_gavel_dict(json.loads(out))
    assert got == want


def test_export_to_file_by_suffix(capsys, tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    code, out, _ = run(capsys, "export", "--gpu", "k80", "--out", str(path))
    assert code == 0 and out.startswith(f"wrote {path} (csv, 2 worker types, 83 job keys")
    assert read_table(path) == default_table(["k80"])


def test_import_summarizes_and_converts(capsys, tmp_path: Path) -> None:
    src = tmp_path / "measured.csv"
    src.write_text("job_type,scale_factor,worker_type,throughput,partner,throughput_with_partner\n"
                   "a,1,v100,10,,\nb,1,v100,5,,\nb,2,v100,9,,\na,1,v100,,b,6\nb,1,v100,,a,2\n"
                   "a,1,v100_unconsolidated,10,,\n")
    out_path = tmp_path / "measured.json"
    code, out, _ = run(capsys, "import", str(src), "--out", str(out_path))
    assert code == 0
    assert f"{src}: csv, 2 worker types, 3 job keys, 2 pair entries, 2 job types" in out
    assert "warning: v100_unconsolidated: no throughput for 2 job keys" in out
    assert out.rstrip().endswith(f"wrote {out_path} (gavel-json)")
    assert read_table(out_path) == read_table(src)
    code, out, _ = run(capsys, "import", str(out_path), "--format", "gavel-json")
    assert code == 0 and "gavel-json, 2 worker types" in out


def test_import_reference_table(capsys, reference_table_path: Path) -> None:
    code, out, _ = run(capsys, "import", str(reference_table_path))
    assert code == 0 and "6 worker types, 83 job keys, 10338 pair entries" in out


def test_bad_input_exits_2_with_one_line(capsys, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("job_type,scale_factor,worker_type,throughput\na,1,v100,10\na,2,v100,-3\n")
    assert_input_error(capsys, "import", str(bad), fragment="bad.csv line 3: throughput='-3'")
    notobj = tmp_path / "t.json"
    notobj.write_text("[1, 2]")
    assert_input_error(capsys, "import", str(notobj), fragment="t.json='list'")
    assert_input_error(capsys, "import", str(bad), "--format", "xml", fragment="--format='xml'")
    assert_input_error(capsys, "import", str(bad), "--out", str(tmp_path / "x.txt"), fragment="cannot tell")
    assert_input_error(capsys, "import", str(tmp_path / "nope.csv"), fragment="cannot read")
    assert_input_error(capsys, "show", "--gpu", "v100,x100", fragment="--gpu='x100': unknown GPU type")
    assert_input_error(capsys, "show", "--heterogeneity", "-1", fragment="--heterogeneity=-1.0")
    assert_input_error(capsys, "show", "--network-gbps", "0", fragment="--network-gbps=0.0")
    assert_input_error(capsys, "show", "--job", "nothing like it", fragment="--job='nothing like it'")
    assert_input_error(capsys, "export", "--format", "yaml", fragment="--format='yaml'")
    assert_input_error(capsys, "export", "--out", str(tmp_path / "no/such/dir.json"), fragment="cannot write")


def test_export_survives_a_closed_pipe(capsys, monkeypatch) -> None:
    class Closed(io.StringIO):
        def write(self, s: str) -> int:
            raise BrokenPipeError

        def fileno(self) -> int:
            return self.fd
    r, w = os.pipe()
    closed = Closed()
    closed.fd = os.dup(w)
    monkeypatch.setattr(sys, "stdout", closed)
    try:
        assert main(["profiles", "export", "--gpu", "k80"]) == 0
    finally:
        for fd in (r, w, closed.fd):
            os.close(fd)
