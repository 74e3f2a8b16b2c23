"""Split brain and bounded loss on loopback: a frozen worker's job is fenced off its relaunch,
and a worker killed with -9 costs at most one round of training."""

from __future__ import annotations

import json
import logging
import signal
import time

from loopback_cluster import check_training, wait_for, worker_name

log = logging.getLogger(__name__)
JOB = {"job_type": "ResNet-18 (batch size 32)", "size": "tiny", "name": "f"}


def _launch(cl, job_id, after):
    """The first launch of the job after attempt `after`."""
    return next((e for e in cl.events("launch") if e["job_id"] == job_id and e["attempt"] > after), None)


def _training(cl, job_id, steps):
    """The launch event of the job's current attempt once that attempt trained `steps` steps (a loaded
    machine may take more than a lease to start a job: such attempts end and are relaunched)."""
    launches = [e for e in cl.events("launch") if e["job_id"] == job_id]
    return launches[-1] if launches and len(_steps(cl, job_id, launches[-1]["attempt"])) > steps else None


def _steps(cl, job_id, attempt):
    return [e for e in cl.train_log(job_id) if e["attempt"] == attempt and "loss" in e]


def test_a_frozen_workers_job_stops_before_its_relaunch_starts(cluster_factory):
    # a 3 s save: before fencing, the frozen worker's job committed it beside its relaunch
    cl = cluster_factory(round_seconds=4.0, checkpoint_every_rounds=50, grace_seconds=8.0)
    cl.start(("w-a", "v100", 1), ("w-b", "v100", 1))
    with cl.client() as c:
        [job_id] = c.submit([{**JOB, "steps": 3000, "env": {"RUN_JOB_SAVE_DELAY": "3"}}])
        first = wait_for(lambda: _training(cl, job_id, 50), 120, "the job never trained")
        a = first["attempt"]
        name = worker_name(cl, first["placement"][0][0])
        cl.workers[name].send_signal(signal.SIGSTOP)          # its job trains on: the worker is frozen
        try:
            lost = wait_for(lambda: next((e for e in cl.events("lost") if e["job_id"] == job_id), None), 60,
                            "the frozen worker's attempt was not written off")
            second = wait_for(lambda: _launch(cl, job_id, a), 90, "the job was not relaunched")
            time.sleep(8.0)                                   # still frozen: the old attempt's lease and save pass
        finally:
            cl.workers[name].send_signal(signal.SIGCONT)
        [job] = c.wait([job_id], timeout=300)
    assert job.status == "done" and job.steps_done == 3000, job
    check_training(cl, job_id, 3000)
    assert lost["attempt"] == a, lost
    old, new = _steps(cl, job_id, a), _steps(cl, job_id, second["attempt"])
    t0 = lost["ts"]
    print(f"written off at 0 s ({lost['ts'] - first['ts']:.1f} s after launch); old attempt's last step "
          f"{old[-1]['t'] - t0:.1f} s, fence until {lost.get('fenced_until', t0) - t0:.1f} s, relaunch "
          f"{second['ts'] - t0:.1f} s, first new step {new[0]['t'] - t0:.1f} s")
    saves = [e for e in cl.train_log(job_id) if e.get("event") == "save"]
    assert not [e for e in saves if e["attempt"] == a and e["t"] > lost["ts"]], "the stale attempt saved"
    assert old[-1]["t"] < new[0]["t"], "two attempts trained side by side"
    assert second["ts"] >= lost["fenced_until"], "relaunched before the old attempt's lease and grace ran out"
    rank_log = cl.rank_logs(job_id)[f"attempt{a}-rank0.log"]
    assert "wrote this attempt off" in rank_log, rank_log[-2000:]
    for p in cl.job_dir(job_id).glob("ckpt-*"):
        meta = json.loads((p / "gavel.json").read_text())
        assert p.name.endswith(f"-a{meta['attempt']}"), p.name


def test_kill9_of_a_worker_loses_at_most_one_round(cluster_factory):
    L = 5.0
    cl = cluster_factory(round_seconds=L, checkpoint_every_rounds=1, grace_seconds=8.0)
    cl.start(("w-a", "v100", 1), ("w-b", "v100", 1))
    with cl.client() as c:
        [job_id] = c.submit([{**JOB, "steps": 100000}])
        first = wait_for(lambda: _training(cl, job_id, 0), 120, "the job never trained")
        a = first["attempt"]
        time.sleep(3.5 * L)                                   # renewed a few times: it checkpoints without stopping
        name = worker_name(cl, first["placement"][0][0])
        killed = time.time()
        cl.workers[name].send_signal(signal.SIGKILL)
        cl.workers[name].wait(10)
        second = wait_for(lambda: _launch(cl, job_id, a), 90, "the job was not relaunched")
        resumed = wait_for(lambda: next((e for e in cl.train_log(job_id) if "loss" in e and e["attempt"] > a), None),
                           120, "the relaunch never trained")
        resumed = resumed["step"] - 1                         # the step it restored (0: none)
        c.cancel(job_id)
    ran = _steps(cl, job_id, a)
    assert len(ran) > 0 and [e for e in cl.events("renew") if e["attempt"] == a], "not renewed before the kill"
    last = ran[-1]["step"]                                    # the last step the killed attempt recorded
    lost = last - resumed
    # a round's worth: the most steps the attempt trained in any L seconds
    j, best = 0, 0
    for e in ran:
        while e["t"] - ran[j]["t"] > L:
            j += 1
        best = max(best, e["step"] - ran[j]["step"])
    print(f"kill -9 of a worker, renewals on, round {L:g} s: lost {lost} steps = {lost / best:.2f} rounds "
          f"(a round = {best} steps; resumed from {resumed}, last step {last}); "
          f"kill to relaunch {second['ts'] - killed:.1f} s")
    assert 0 <= lost <= best, (lost, best)
