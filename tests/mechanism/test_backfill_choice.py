"""The mid-round backfill choice (gavel_ng.mechanism.backfill): order, fit, server rules, nothing to do."""

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.mechanism import AllocationRows, JobView, MechanismConfig, RoundMechanism, worth_starting
from gavel_ng.mechanism.backfill import Candidates, Waitlist, remember_in
from gavel_ng.mechanism.placement import Placer
from gavel_ng.topology import Topology


def topo(spec="v100=8,k80=4", per=4):
    return Topology.from_cluster(Cluster.parse(spec, gpus_per_server=per))


def cands(rows):
    """rows: (key, type, sf, spread); rows and columns numbered as given."""
    keys = [tuple(r[0]) for r in rows]
    return Candidates(keys, np.arange(len(rows)), np.array([r[1] for r in rows], np.int64),
                      np.array([r[1] for r in rows], np.int64), np.array([r[2] for r in rows], np.int64),
                      np.array([r[3] for r in rows], bool), np.array([k[0] for k in keys], np.int64))


def free_of(t: Topology, gpus) -> np.ndarray:
    free = np.zeros(t.num_gpus, bool)
    free[list(gpus)] = True
    return free


def gpu_ids(t: Topology, typ: str, server: int) -> list[int]:
    """GPU ids of the `server`-th server of type `typ`."""
    j = list(t.worker_types).index(typ)
    return t.server_gpus[t.type_servers[j][server]].tolist()


def test_the_first_waiting_entry_that_fits_gets_the_freed_gpu_in_order():
    t = topo()
    v = list(t.worker_types).index("v100")
    wl = Waitlist(lambda: cands([((1,), v, 2, False), ((2,), v, 1, False), ((3,), v, 1, False)]), t, True)
    busy = {9}
    got = wl.choose(free_of(t, gpu_ids(t, "v100", 0)[:1]), busy)
    assert [b.key for b in got] == [(2,)]          # job 1 needs 2 GPUs: skipped; 2 comes before 3
    assert busy == {9, 2}
    got = wl.choose(free_of(t, gpu_ids(t, "v100", 0)[:2]), {9})
    assert [b.key for b in got] == [(1,)] and got[0].consolidated and len(got[0].gpus) == 2


def test_busy_jobs_and_other_types_never_backfill():
    t = topo()
    v, k = (list(t.worker_types).index(w) for w in ("v100", "k80"))
    wl = Waitlist(lambda: cands([((1,), v, 1, False), ((2, 3), v, 1, False), ((4,), k, 1, False)]), t, True)
    assert wl.choose(free_of(t, gpu_ids(t, "v100", 0)[:1]), {1, 3}) == []   # 1 runs; the pair has 3 running
    assert wl.choose(np.zeros(t.num_gpus, bool), set()) == []               # nothing free
    got = wl.choose(free_of(t, gpu_ids(t, "k80", 0)[:1]), set())
    assert [b.key for b in got] == [(4,)] and t.gpu_type[got[0].gpus[0]] == k


def test_a_consolidated_entry_needs_one_server_and_a_spread_one_does_not():
    t = topo()
    v = list(t.worker_types).index("v100")
    split = [gpu_ids(t, "v100", 0)[0], gpu_ids(t, "v100", 1)[0]]   # one free GPU on each of two servers
    whole = Waitlist(lambda: cands([((1,), v, 2, False)]), t, consolidate=True)
    assert whole.choose(free_of(t, split), set()) == []
    spread = Waitlist(lambda: cands([((1,), v, 2, True)]), t, consolidate=True)
    got = spread.choose(free_of(t, split), set())
    assert sorted(got[0].gpus) == sorted(split) and not got[0].consolidated
    loose = Waitlist(lambda: cands([((1,), v, 2, False)]), t, consolidate=False)   # the prototype's placement
    assert len(loose.choose(free_of(t, split), set())) == 1


def test_one_gpu_entries_take_the_fullest_server():
    """Best fit, as placement does: the lone free GPU goes first, the whole free server stays whole."""
    t = topo()
    v = list(t.worker_types).index("v100")
    lone = gpu_ids(t, "v100", 1)[2]
    wl = Waitlist(lambda: cands([((1,), v, 1, False)]), t, True)
    got = wl.choose(free_of(t, gpu_ids(t, "v100", 0) + [lone]), set())
    assert got[0].gpus == (lone,)


def test_chosen_entries_renew_where_they_run_next_round():
    t = topo()
    placer = Placer(t)
    g = gpu_ids(t, "v100", 0)[0]
    placer.last = {(7,): (0, (g,)), (8,): (0, (g + 1,))}
    remember_in(placer)((2,), 0, (g,))
    assert placer.last == {(8,): (0, (g + 1,)), (2,): (0, (g,))}   # the GPU's last holder is the backfilled job


def test_worth_starting_needs_a_quarter_round_after_the_start_up():
    assert worth_starting(100.0, 0.0, 360.0)
    assert not worth_starting(80.0, 0.0, 360.0)
    assert not worth_starting(120.0, 40.0, 360.0)     # 80 s left after starting: under a quarter round
    assert not worth_starting(100.0, 60.0, 120.0)     # would run less than it spent starting
    assert worth_starting(130.0, 30.0, 360.0)


def three_jobs_two_gpus(config=None):
    mech = RoundMechanism(topo("v100=2", per=2), config or MechanismConfig())
    mech.reset(AllocationRows([(0,), (1,), (2,)], np.array([[0.6], [0.5], [0.9]]), np.ones(3)))
    return mech


def test_the_mechanism_hands_its_own_order_to_the_waitlist():
    """Job 2 has the largest share (never served: ranked by X), then 0, then 1: 2 and 0 run, 1 waits;
    job 1, then a job no allocation knows yet, are the waiting entries."""
    mech = three_jobs_two_gpus()
    plan = mech.plan(JobView([5], [1], np.array([[1.0]])))
    assert sorted(plan.member_job.tolist()) == [0, 2]
    c = plan.waiting.candidates
    assert c.keys == [(1,), (5,)] and c.rows.tolist() == [1, -1]
    freed = free_of(mech.topo, plan.gpus[0])
    got = plan.waiting.choose(freed, set(plan.member_job.tolist()))
    assert [b.key for b in got] == [(1,)] and got[0].gpus == plan.gpus[0]
    assert mech.placer.last[(1,)] == (0, plan.gpus[0])


def test_no_waitlist_under_gavel_compat_or_when_off():
    assert three_jobs_two_gpus(MechanismConfig.gavel_compat(False)).plan().waiting is None
    assert three_jobs_two_gpus(MechanismConfig(mid_round_backfill=False)).plan().waiting is None
