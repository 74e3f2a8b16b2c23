"""A 2-GPU job spread over two 1-GPU workers on loopback.

The placement splits a job over servers when no server has room for it, so two v100
workers of one GPU each (and no bigger v100 worker) force a scale-factor-2 job onto
both: one rank per worker daemon, rendezvousing through a file in the checkpoint
directory. It must train to exactly its steps with both ranks stopping at the same step
in every attempt; when one of its workers is killed with SIGKILL the other rank must be
stopped too, and the job must resume from its checkpoint on the surviving worker and a
replacement.
"""

from __future__ import annotations

import re
import signal

from loopback_cluster import LocalCluster, check_training, wait_for, worker_name

from gavel_ng.iterator.checkpoint import step_of

SPREAD = {"job_type": "ResNet-18 (batch size 16)", "steps": 60, "size": "tiny", "scale_factor": 2, "name": "x2"}
# A 1-GPU job submitted once the spread job trains takes one of its GPUs from the next round on (a job never
# served ranks first): the spread job checkpoints after at most 1.3 rounds of training (some 700 steps on an
# idle machine, 200 on a busy one) and restores after it, with steps left to still run when its worker dies.
LONG = {**SPREAD, "steps": 1000}
OTHER = {"job_type": "ResNet-18 (batch size 32)", "steps": 100, "size": "tiny", "name": "one"}


def _start(cluster_factory) -> LocalCluster:
    cl = cluster_factory(round_seconds=6.0, worker_types=["v100"])
    cl.start(("w-a", "v100", 1), ("w-b", "v100", 1))
    return cl


def _workers(launch: dict) -> set[str]:
    return {w for w, _ in launch["placement"]}


def _spanning(cl: LocalCluster, job_id: int) -> list[dict]:
    """Launch events of job_id whose placement spans more than one worker."""
    return [e for e in cl.events("launch") if e["job_id"] == job_id and len(_workers(e)) > 1]


def _check_ranks_agree(cl: LocalCluster, job_id: int) -> int:
    """Both ranks of every attempt stopped at the same step; returns how many attempts stopped."""
    logs = cl.rank_logs(job_id)
    stopped = 0
    for name, text in logs.items():
        if "rank0" not in name:
            continue
        other = logs.get(name.replace("rank0", "rank1"))
        assert other is not None, f"{name}: rank 1 of that attempt never logged"
        stops = re.findall(r"stopping at step (\d+)", text)
        assert stops == re.findall(r"stopping at step (\d+)", other), (name, stops)
        stopped += bool(stops)
    return stopped


def _training_from(cl: LocalCluster, job_id: int, attempt: int) -> list[int]:
    """The step each rank of an attempt started training from (once both started)."""
    logs = cl.rank_logs(job_id)
    starts = [re.search(r"training from step (\d+)", logs.get(f"attempt{attempt}-rank{r}.log", "")) for r in (0, 1)]
    return [int(m[1]) for m in starts] if all(starts) else []


def _resumed_attempt(cl: LocalCluster, c, job_id: int) -> int | None:
    """The live attempt of job_id once both its ranks restored a checkpoint and are training."""
    job = next(j for j in c.jobs() if j.job_id == job_id)
    assert job.status != "done", "the spread job finished before it was ever restored: give it more steps"
    if job.status != "running" or job.steps_done <= 0:
        return None
    starts = _training_from(cl, job_id, job.attempts)
    return job.attempts if starts and min(starts) > 0 else None


def test_job_spread_over_two_workers_trains_exactly(cluster_factory):
    cl = _start(cluster_factory)
    with cl.client() as c:
        [job_id] = c.submit([SPREAD])
        [job] = c.wait([job_id], timeout=120)
    assert job.status == "done" and job.steps_done == SPREAD["steps"], job
    check_training(cl, job_id, SPREAD["steps"])
    assert _spanning(cl, job_id), cl.events("launch")
    assert _check_ranks_agree(cl, job_id) >= 1


def test_kill9_of_one_worker_stops_the_other_rank_and_resumes(cluster_factory):
    cl = _start(cluster_factory)
    with cl.client() as c:
        [job_id] = c.submit([LONG])
        wait_for(lambda: _training_from(cl, job_id, 1), 60, "the spread job did not start")
        [other_id] = c.submit([OTHER])
        attempt = wait_for(lambda: _resumed_attempt(cl, c, job_id), 150, "the spread job never resumed a checkpoint")
        lost_at = next(j for j in c.jobs() if j.job_id == job_id).steps_done
        launch = next(e for e in cl.events("launch") if e["job_id"] == job_id and e["attempt"] == attempt)
        (victim_id, _), (survivor_id, _) = launch["placement"]
        assert victim_id != survivor_id, launch
        victim, survivor = worker_name(cl, victim_id), worker_name(cl, survivor_id)

        # kill -9 the worker of rank 0, the rank that holds the lease: nothing on rank 1's side tells it to stop
        cl.workers[victim].send_signal(signal.SIGKILL)
        cl.workers[victim].wait(10)
        wait_for(lambda: f"job {job_id} attempt {attempt} ended" in (cl.root / f"{survivor}.log").read_text(), 30,
                 "the surviving rank was not stopped")
        wait_for(lambda: any(e["job_id"] == job_id and e["attempt"] == attempt for e in cl.events("lost")), 30,
                 "the attempt was not written off")
        latest = max(cl.job_dir(job_id).glob("ckpt-*"))
        assert step_of(latest) == lost_at, "a rank of the lost attempt wrote a checkpoint"

        cl.start_worker("w-c", "v100", 1)          # a replacement, so that the job fits again
        jobs = c.wait([job_id, other_id], timeout=180)
    for job, spec in zip(jobs, (LONG, OTHER)):
        assert job.status == "done" and job.steps_done == spec["steps"], job
        check_training(cl, job.job_id, spec["steps"])
    after = [e for e in _spanning(cl, job_id) if e["attempt"] > attempt]
    assert after and all(victim_id not in _workers(e) for e in after), cl.events("launch")
    assert _training_from(cl, job_id, after[0]["attempt"]) == [lost_at, lost_at]
    loads = [e["step"] for e in cl.train_log(job_id) if e.get("event") == "load"]
    assert lost_at in loads, ("did not resume from its last checkpoint", lost_at, loads)
    assert _check_ranks_agree(cl, job_id) >= 1
    assert not list(cl.job_dir(job_id).glob("rendezvous-*")), "rendezvous files were left behind"


def test_stale_rendezvous_files_of_earlier_attempts_are_removed(tmp_path):
    from gavel_ng.worker.proc import clear_stale_rendezvous

    for name in ("rendezvous-1", "rendezvous-2", "rendezvous-3", "rendezvous-10", "rendezvous-x", "train.jsonl"):
        (tmp_path / name).write_text("")
    removed = clear_stale_rendezvous(f"file://{tmp_path}/rendezvous-3", 3)
    assert sorted(p.name for p in removed) == ["rendezvous-1", "rendezvous-2"]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["rendezvous-10", "rendezvous-3", "rendezvous-x", "train.jsonl"]
    assert clear_stale_rendezvous("env://", 5) == [] and clear_stale_rendezvous("tcp://h:1", 5) == []
