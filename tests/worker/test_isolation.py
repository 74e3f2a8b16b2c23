"""What keeps a job to itself on a worker (worker.isolation): its environment is an allowlist, its directories
are its own, and the worker never follows a link a job planted nor reads more than it bounds."""

from __future__ import annotations

import os

import pytest

from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.worker.daemon import _unrunnable
from gavel_ng.worker.isolation import (
    Refused,
    RunAs,
    append_job_file,
    job_environment,
    own_dir,
    read_job_file,
)


def test_a_job_inherits_only_the_allowlisted_environment():
    env = {"PATH": "/usr/bin", "LC_ALL": "C", "NCCL_DEBUG": "INFO", "AWS_SECRET_ACCESS_KEY": "x", "GAVEL_NG_TOKEN": "t",
           "SSL_CERT_FILE": "/ca.pem", "HOME": "/root"}
    assert job_environment(env) == {"PATH": "/usr/bin", "LC_ALL": "C", "NCCL_DEBUG": "INFO", "HOME": "/root"}
    assert job_environment(env, ("PATH", "SSL_*")) == {"PATH": "/usr/bin", "SSL_CERT_FILE": "/ca.pem"}


def test_no_job_runs_as_root_or_as_an_account_the_worker_lacks():
    with pytest.raises(Refused, match="is root"):
        RunAs.user("root")
    with pytest.raises(Refused, match="has no account on this worker"):
        RunAs.user("no-such-user-gv")


def test_a_jobs_directory_must_be_a_real_directory_of_its_own(tmp_path):
    me = RunAs.own()
    own_dir(tmp_path / "job-1", me)
    assert (tmp_path / "job-1").stat().st_mode & 0o777 == 0o700
    own_dir(tmp_path / "job-1", me)                                   # again: it is ours
    (tmp_path / "job-2").symlink_to(tmp_path / "job-1")
    with pytest.raises(Refused, match="not a directory"):
        own_dir(tmp_path / "job-2", me)
    if os.geteuid() == 0:
        (tmp_path / "job-3").mkdir()
        os.chown(tmp_path / "job-3", 65534, 65534)                     # nobody's
        with pytest.raises(Refused, match="belongs to uid 65534"):
            own_dir(tmp_path / "job-3", me)


def test_the_worker_never_follows_a_planted_link(tmp_path):
    me = RunAs.own()
    secret = tmp_path / "secret"
    secret.write_text("the worker's credential")
    job = tmp_path / "job"
    (job / "logs").mkdir(parents=True)
    (job / "logs" / "attempt1-rank0.log").symlink_to(secret)
    assert read_job_file(job / "logs" / "attempt1-rank0.log", me, base=job) is None
    append_job_file(job / "logs" / "attempt1-rank0.log", me, "worker says\n", base=job)
    assert secret.read_text() == "the worker's credential"
    (job / "logs2").symlink_to(tmp_path)                               # a linked directory on the way
    append_job_file(job / "logs2" / "secret", me, "worker says\n", base=job)
    assert secret.read_text() == "the worker's credential"
    os.mkfifo(job / "fifo")
    assert read_job_file(job / "fifo", me) is None                     # neither blocks nor reads
    (job / "big").write_bytes(b"z" * (3 << 20))
    assert len(read_job_file(job / "big", me)) == 1 << 20              # bounded


def test_what_cannot_run_is_refused_before_it_takes_a_gpu():
    ok = pb.RunJobRequest(job_id=1, attempt=1, gpus=[0], checkpoint_dir="/c/job-1",
                          spec=pb.JobSpec(job_type="x", steps=5, command=["python", "a.py"]))
    assert _unrunnable(ok) == ""
    bad = pb.RunJobRequest()
    bad.CopyFrom(ok)
    bad.spec.env["X"] = "a\0b"
    assert "U+0000" in _unrunnable(bad)
    bad.CopyFrom(ok)
    bad.run_as = "../root"
    assert "not an account name" in _unrunnable(bad)
    bad.CopyFrom(ok)
    bad.checkpoint_dir = "relative"
    assert "absolute" in _unrunnable(bad)
