"""Rules and admission on loopback: every constraint kind, on real workers and real jobs.

The scheduler's config carries the rules (admission, quotas, one distributed job per server); a
worker says its labels with `--label`; jobs carry theirs. The first test: a job that needs
`nvlink` only ever launches on that worker, a user's job quota refuses a second job at submission
(`gavel-ng submit` exits 2 naming it). The second: allowed types, a soft preference, anti-affinity,
affinity, one distributed job per server, an entity's quota, the per-user GPU quota and the queue
cap, checked on the plan of every round the scheduler recorded.
"""

from __future__ import annotations

import json
import subprocess
import sys

from loopback_cluster import ENV, check_training, wait_for, worker_name

LABELLED = {"job_type": "ResNet-18 (batch size 32)", "steps": 120, "size": "tiny", "name": "nv",
            "labels": ["nvlink"], "user": "alice", "entity": "vision", "allowed_types": ["v100"]}
SECOND = {"job_type": "ResNet-18 (batch size 32)", "steps": 50, "size": "tiny", "name": "more", "user": "alice"}


def _submit(cl, tmp_path, job: dict) -> subprocess.CompletedProcess:
    path = tmp_path / f"{job['name']}.json"
    path.write_text(json.dumps(job))
    return subprocess.run([sys.executable, "-m", "gavel_ng", "submit", str(path), "--scheduler",
                           f"127.0.0.1:{cl.port}", "--token-file", str(cl.state / "token")],
                          capture_output=True, text=True, env=ENV, timeout=60)


def test_labels_and_admission_on_a_loopback_cluster(cluster_factory, tmp_path):
    cl = cluster_factory(round_seconds=4.0, worker_types=["v100"],
                         rules={"admission": {"max_jobs_per_user": 1}, "quotas": {"vision": {"v100": 1}}},
                         entities={"vision": {"weight": 2}})
    cl.start_scheduler()
    cl.start_worker("w-plain", "v100", 1)
    cl.start_worker("w-nvlink", "v100", 1, "--label", "nvlink")
    cl.wait_workers(2)
    first = _submit(cl, tmp_path, LABELLED)
    assert first.returncode == 0, first.stderr
    refused = _submit(cl, tmp_path, SECOND)
    assert refused.returncode == 2
    assert "max_jobs_per_user" in refused.stderr and "alice" in refused.stderr
    stranger = _submit(cl, tmp_path, {**SECOND, "name": "x", "user": "bob", "entity": "nobody"})
    assert stranger.returncode == 2 and "jobs[0].entity='nobody'" in stranger.stderr   # not in the config
    job_id = cl.client().jobs()[0].job_id
    wait_for(lambda: cl.client().jobs()[0].status == "done", 120, "the labelled job to finish")
    check_training(cl, job_id, 120)
    launches = [e for e in cl.events("launch") if e["job_id"] == job_id]
    assert launches and all(worker_name(cl, w) == "w-nvlink" for e in launches for w, _ in e["placement"])
    again = _submit(cl, tmp_path, SECOND)            # alice's first job is done: her quota is free again
    assert again.returncode == 0, again.stderr


R18 = {"job_type": "ResNet-18 (batch size 32)", "steps": 20, "size": "tiny"}
WIDE = {"job_type": "ResNet-18 (batch size 16)", "steps": 10, "size": "tiny", "scale_factor": 4,
        "allowed_types": ["p100"]}
ON_V100 = {**R18, "allowed_types": ["v100"]}
# one user each, so that only carol meets max_gpus_per_user; nine jobs in all fill max_queue
FIRST = [   # on the k80 and three 2-GPU v100 workers
    {**ON_V100, "name": "b1", "user": "b1", "group": "big", "anti_affinity": ["big"]},
    {**ON_V100, "name": "b2", "user": "b2", "group": "big", "anti_affinity": ["big"]},
    {**ON_V100, "name": "prep", "user": "prep"},
    {**ON_V100, "name": "follow", "user": "follow", "affinity": ["prep"]},
    {**R18, "name": "pref", "user": "pref", "preferred_types": ["k80"]},   # the slowest type, 0.9 off elsewhere
    {**ON_V100, "name": "q1", "user": "q1", "entity": "vision"},
    {**ON_V100, "name": "q2", "user": "q2", "entity": "vision"},
]
THEN = [{**WIDE, "name": "d2", "user": "dave"}]   # d1 and d2 then on p100 workers of 3, 3 and 2 GPUs:
# the two 4-GPU jobs fit the 8 GPUs at once only by sharing a worker


def _rounds(cl) -> dict[int, dict[str, tuple[str, set[str], int]]]:
    """Each recorded round's plan: round number -> job name -> (worker type, worker names, GPUs)."""
    names = {j.job_id: j.name for j in cl.client().jobs()}
    return {e["round_no"]: {names[int(m)]: (t, {worker_name(cl, w) for w, _ in gpus}, len(gpus))
                            for m, (t, gpus, _) in e["plan"].items()} for e in cl.events("round")}


def test_every_rule_kind_on_a_loopback_cluster(cluster_factory, tmp_path):
    # plain las: a job that states a preference gets it off the bottleneck too (a second LP phase)
    cl = cluster_factory(round_seconds=10.0, worker_types=["v100", "p100", "k80"], policy="las",
                         rules={"quotas": {"vision": {"v100": 1}}, "one_distributed_per_server": True,
                                "preference_penalty": 0.9,
                                "admission": {"max_gpus_per_user": 4, "max_queue": 9}},
                         entities={"vision": {}})
    cl.start_scheduler()
    # admission first, before any worker: nothing can finish and free a place meanwhile
    with cl.client() as c:
        ids = c.submit([{**WIDE, "name": "d1", "user": "carol"}])
    over = _submit(cl, tmp_path, {**R18, "name": "c2", "user": "carol"})
    assert over.returncode == 2 and "max_gpus_per_user" in over.stderr and "carol" in over.stderr, over.stderr
    with cl.client() as c:
        first = c.submit(FIRST)
        ids += first + c.submit(THEN)
    full = _submit(cl, tmp_path, {**R18, "name": "late", "user": "erin"})
    assert full.returncode == 2 and "max_queue" in full.stderr, full.stderr

    # two stages, to keep a few processes on the CPU at a time; the k80 comes first, so pref has room there
    cl.start_worker("k0", "k80", 1)
    for k in range(3):                      # b1, b2, prep + follow and a vision job fit at once
        cl.start_worker(f"v{k}", "v100", 2)
    cl.wait_workers(4)
    with cl.client() as c:
        c.wait(first, timeout=600)
        cl.start_worker("p0", "p100", 3)
        cl.start_worker("p1", "p100", 3)
        cl.start_worker("p2", "p100", 2)
        jobs = c.wait(ids, timeout=600)
    assert all(j.status == "done" and j.steps_done == j.steps_total for j in jobs), jobs

    rounds = _rounds(cl)
    name = {j.job_id: j.name for j in jobs}
    # a job can also start mid-round on GPUs an earlier job freed (backfill): its event names where
    backfilled = {(e["round_no"], name[e["job_id"]]): e for e in cl.events("backfill")}
    for (r, n), e in backfilled.items():    # the same type rules hold for what backfill chose
        assert n not in rounds[r], e
        if n != "pref":                     # (pref's preference is soft: the policy's, not a rule)
            assert e["worker_type"] == ("p100" if n in ("d1", "d2") else "v100"), e
        assert n not in ("b1", "b2", "prep", "follow", "d1", "d2"), e   # rules' jobs wait for a placement
    for e in cl.events("launch"):           # what launched is what its round planned, or backfilled
        key = (e["round_no"], name[e["job_id"]])
        planned = rounds[key[0]].get(key[1], (None,))[0]
        assert e["worker_type"] == (planned if key not in backfilled else backfilled[key]["worker_type"]), e
    for plan in rounds.values():
        # allowed types
        assert all(t == "p100" for n, (t, _, _) in plan.items() if n in ("d1", "d2")), plan
        assert all(t == "v100" for n, (t, _, _) in plan.items() if n in {j["name"] for j in FIRST} - {"pref"}), plan
        # a soft preference: the k80 has room for pref, so it never runs anywhere else
        assert plan.get("pref", ("k80",))[0] == "k80", plan
        # anti-affinity
        if "b1" in plan and "b2" in plan:
            assert not plan["b1"][1] & plan["b2"][1], plan
        # affinity
        if "prep" in plan and "follow" in plan:
            assert plan["prep"][1] == plan["follow"][1] and len(plan["prep"][1]) == 1, plan
        # one distributed job per server: each split, never on a common worker
        for n in ("d1", "d2"):
            assert n not in plan or len(plan[n][1]) > 1, plan
        if "d1" in plan and "d2" in plan:
            assert not plan["d1"][1] & plan["d2"][1], plan
        # the entity's quota: vision holds at most one v100 GPU in any round
        assert sum(g for n, (t, _, g) in plan.items() if n in ("q1", "q2") and t == "v100") <= 1, plan
    # the pairs the rules keep apart or together did run in one round
    ran = list(rounds.values())
    assert any("b1" in p and "b2" in p for p in ran) and any("prep" in p and "follow" in p for p in ran), rounds
