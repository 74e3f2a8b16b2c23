"""`gavel-ng logs` reads directories jobs own: ids range-checked, no link followed, only regular files (a FIFO
never blocks it), and a log of any size streamed in bounded memory."""

from __future__ import annotations

import os
import subprocess
import sys

from gavel_ng.cli import main


def _root(tmp_path):
    root = tmp_path / "ckpt"
    for job in (1, 2):
        logs = root / f"job-{job}" / "logs"
        logs.mkdir(parents=True)
        (logs / "attempt1-rank0.log").write_text(f"job {job} says hello\n")
    return root


def test_ids_out_of_range_are_one_line(tmp_path, capsys):
    root = _root(tmp_path)
    for args in (["9223372036854775808"], ["0"], ["1", "--attempt", "-1"]):
        assert main(["logs", *args, "--checkpoint-root", str(root)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "must be" in err, err


def test_links_and_fifos_planted_by_a_job_are_never_followed_or_opened(tmp_path, capsys):
    root = _root(tmp_path)
    logs1 = root / "job-1" / "logs"
    (logs1 / "attempt2-rank0.log").symlink_to(root / "job-2" / "logs" / "attempt1-rank0.log")   # job 2's output
    os.mkfifo(logs1 / "attempt3-rank0.log")
    for attempt in ("2", "3"):
        assert main(["logs", "1", "--attempt", attempt, "--checkpoint-root", str(root)]) == 2
        captured = capsys.readouterr()
        assert "not a regular file" in captured.err and "job 2 says" not in captured.out
    (root / "job-3").mkdir()
    (root / "job-3" / "logs").symlink_to(root / "job-2" / "logs")           # a whole logs directory
    assert main(["logs", "3", "--checkpoint-root", str(root)]) == 2
    assert "job 2 says" not in capsys.readouterr().out
    assert main(["logs", "1", "--attempt", "1", "--checkpoint-root", str(root)]) == 0
    assert capsys.readouterr().out == "[rank 0] job 1 says hello\n"


def test_an_endless_line_is_printed_in_pieces(tmp_path, capsys):
    root = _root(tmp_path)
    (root / "job-1" / "logs" / "attempt4-rank0.log").write_bytes(b"x" * (1 << 20) + b"\nend\n")
    assert main(["logs", "1", "--attempt", "4", "--rank", "0", "--checkpoint-root", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "end" and max(len(x) for x in lines) == 1 << 16 and sum(map(len, lines[:-1])) == 1 << 20


def _peak_kib(root, attempt: str) -> int:
    p = subprocess.Popen([sys.executable, "-m", "gavel_ng", "logs", "1", "--attempt", attempt, "--checkpoint-root",
                          str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_maxrss


def test_a_big_log_is_streamed_in_bounded_memory(tmp_path):
    root = _root(tmp_path)
    with open(root / "job-1" / "logs" / "attempt5-rank0.log", "wb") as f:
        for _ in range(64):
            f.write((b"y" * 1023 + b"\n") * 1024)                           # 64 MiB
    small, big = _peak_kib(root, "1"), _peak_kib(root, "5")
    assert big - small < 24 * 1024, (small, big)                             # not the file's size
