"""The state directory: one scheduler at a time, owner-only files, an id that names job directories, a
damaged file told in one line with the way back (runtime.statedir)."""

from __future__ import annotations

import os
import sqlite3

import pytest

from gavel_ng.errors import InputError
from gavel_ng.iterator import checkpoint as ckpt
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.records import job_dir
from gavel_ng.runtime.service import SchedulerService
from gavel_ng.runtime.statedir import BACKUP_NAME


def _service(path, **config) -> SchedulerService:
    return SchedulerService(ClusterConfig(round_seconds=60.0, **config), path, port=0, bind="127.0.0.1")


def test_a_second_scheduler_on_the_same_state_refuses_naming_the_first(tmp_path):
    first = _service(tmp_path / "state")
    first.start()
    try:
        with pytest.raises(InputError) as err:
            _service(tmp_path / "state")
        assert f"pid {os.getpid()}" in str(err.value) and f":{first.port}" in str(err.value)
    finally:
        first.stop(grace=0.1)
    _service(tmp_path / "state").stop(grace=0.1)          # released by stop()


def test_state_files_are_the_owners_and_a_clean_start_leaves_a_backup(tmp_path):
    svc = _service(tmp_path / "state")
    svc.stop(grace=0.1)
    state = tmp_path / "state"
    for name in ("gavel.sqlite", "token", BACKUP_NAME, "scheduler.lock"):
        assert (state / name).stat().st_mode & 0o777 == 0o600, name
    assert state.stat().st_mode & 0o777 == 0o711            # jobs pass through to STATE/checkpoints, never list it
    with pytest.raises(InputError) as err:
        _service(tmp_path / "other", checkpoint_root=str(tmp_path))
    assert "cluster-config.checkpoint_root" in str(err.value) and "holds the state directory" in str(err.value)


@pytest.mark.parametrize("damage", ["zeroed pages", "a job row that is not JSON"])
def test_a_damaged_state_is_one_line_naming_the_file_and_the_backup(tmp_path, damage):
    svc = _service(tmp_path / "state")
    svc.state.submit([__import__("gavel_ng.protocol.jobspec", fromlist=["JobSpec"]).JobSpec(
        "ResNet-18 (batch size 32)", steps=10, size="tiny") for _ in range(300)])
    svc.stop(grace=0.1)
    db_path = tmp_path / "state" / "gavel.sqlite"
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if damage != "zeroed pages":
        db.execute("UPDATE jobs SET spec = '{not json' WHERE job_id = 7")
        db.commit()
    db.close()
    if damage == "zeroed pages":
        with open(db_path, "r+b") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(size - 3 * 4096)
            f.write(b"\0" * 3 * 4096)
    with pytest.raises(InputError) as err:
        _service(tmp_path / "state")
    text = str(err.value)
    assert "\n" not in text and str(db_path) in text and "is damaged" in text, text
    assert f"mv {tmp_path / 'state' / BACKUP_NAME} {db_path}" in text, text
    if damage != "zeroed pages":
        assert "job 7" in text
    with pytest.raises(InputError) as again:
        _service(tmp_path / "state")
    assert "is damaged" in str(again.value)                 # not "in use": the refused one released its lock


def test_jobs_of_a_new_state_never_find_another_states_checkpoints(tmp_path):
    root = tmp_path / "ckpt"
    old = _service(tmp_path / "state", checkpoint_root=str(root))
    sid = old.state_id
    old.stop(grace=0.1)
    for f in (tmp_path / "state").glob("gavel.sqlite*"):
        f.unlink()                                          # the state is lost; the checkpoints are not
    new = _service(tmp_path / "state", checkpoint_root=str(root))
    try:
        assert new.state_id and new.state_id != sid
        assert job_dir(root, 1, new.state_id) != job_dir(root, 1, sid)
    finally:
        new.stop(grace=0.1)


def test_a_job_restores_only_checkpoints_that_carry_its_identity(tmp_path, caplog):
    d = tmp_path / "job"
    bare = ckpt.commit(d, ckpt.begin(d, 95, 2), 95, attempt=2)                       # one that records none
    foreign = ckpt.commit(d, ckpt.begin(d, 90, 1), 90, attempt=1, identity="s0:7")   # planted, or a lost state's
    own = ckpt.commit(d, ckpt.begin(d, 20, 1), 20, attempt=1, identity="s1:7")
    assert ckpt.latest(d, "s1:7") == (20, own)
    assert "refused checkpoint" in caplog.text and "job s0:7" in caplog.text
    assert ckpt.latest(d) == (95, bare) and foreign.exists()
