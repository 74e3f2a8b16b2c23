"""Checkpoints of two attempts in one directory: names never collide, the newest wins, pruning is safe."""

from __future__ import annotations

from gavel_ng.iterator import checkpoint as ckpt


def _save(root, step, attempt, value):
    tmp = ckpt.begin(root, step, attempt)
    (tmp / "w.txt").write_text(str(value))
    return ckpt.commit(root, tmp, step, attempt=attempt)


def test_two_attempts_commit_the_same_step_apart_and_the_higher_attempt_wins(tmp_path):
    a = _save(tmp_path, 100, 1, "old")
    b = _save(tmp_path, 100, 2, "new")
    assert a != b and a.is_dir() and b.is_dir()
    assert (a / "w.txt").read_text() == "old"           # the second commit did not replace the first's files
    step, path = ckpt.latest(tmp_path)
    assert (step, path) == (100, b) and ckpt.attempt_of(path) == 2 and ckpt.step_of(path) == 100


def test_the_highest_step_wins_whatever_the_attempt(tmp_path):
    _save(tmp_path, 300, 1, "stale attempt, further")
    _save(tmp_path, 200, 2, "relaunch")
    assert ckpt.latest(tmp_path)[0] == 300 and ckpt.attempt_of(ckpt.latest(tmp_path)[1]) == 1


def test_old_format_directories_are_read_and_ordered_with_new_ones(tmp_path):
    _save(tmp_path, 50, 0, "old format")
    assert (tmp_path / "ckpt-000000000050").is_dir()
    assert ckpt.latest(tmp_path) == (50, tmp_path / "ckpt-000000000050")
    _save(tmp_path, 50, 3, "same step, attempt 3")
    assert ckpt.latest(tmp_path)[1].name == "ckpt-000000000050-a3"


def test_prune_keeps_the_newest_and_leaves_saves_in_progress(tmp_path):
    other = ckpt.begin(tmp_path, 900, 2)                  # another attempt's save, not committed yet
    (other / "w.txt").write_text("in progress")
    for step, attempt in ((10, 1), (20, 1), (30, 2), (30, 1), (40, 1)):
        _save(tmp_path, step, attempt, step)
    left = [(s, a) for s, a, _ in ckpt.committed(tmp_path)]
    assert left == [(30, 2), (40, 1)]                      # KEEP = 2 newest by (step, attempt)
    assert (other / "w.txt").read_text() == "in progress"
    ckpt.prune(tmp_path, keep=0)                           # never removes the newest
    assert [(s, a) for s, a, _ in ckpt.committed(tmp_path)] == [(40, 1)]
