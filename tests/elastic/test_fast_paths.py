"""The simulator's fast paths give what the plain ones give: a measured noise-scale table's
piecewise inversion against Newton on `seconds_to_progress`, the batched runner against one
search and one inversion per entry, and the cached goodput rows against a fresh search."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from gavel_ng.elastic import AdaptiveSpec, best_goodput, best_goodput_many, progress_after, seconds_to_progress
from gavel_ng.elastic.efficiency import PhiTable
from gavel_ng.elastic.goodput import throughput_params
from gavel_ng.elastic.profile_sets import phi_curve
from gavel_ng.simulator.adaptive import AdaptiveRunner, ArraysSource


def _random_table(rng: np.random.Generator) -> PhiTable:
    k = int(rng.integers(1, 8))
    progress = np.sort(rng.choice(np.linspace(0.0, 1.0, 101), k, replace=False))
    return PhiTable(tuple(progress), tuple(np.exp(rng.uniform(0.0, 8.0, k))))


@pytest.mark.parametrize("seed", range(6))
def test_table_inversion_inverts_seconds_to_progress(seed):
    rng = np.random.default_rng(seed)
    for _ in range(20):
        table = _random_table(rng)
        m0, n = float(rng.integers(1, 300)), 40
        batch = m0 * rng.uniform(0.5, 40.0, n)
        x, work = rng.uniform(1.0, 1e4, n), rng.uniform(1e3, 1e8, n)
        p0 = rng.uniform(0.0, 1.0, n) * (rng.uniform(size=n) < 0.8)
        p0[:3] = table.progress[0]                      # on a knot
        t_end = seconds_to_progress(table, m0, batch, x, work, p0, 1.0)
        seconds = t_end * rng.uniform(0.0, 1.2, n)
        p = progress_after(table, m0, batch, x, work, p0, seconds)
        assert np.all(p[seconds >= t_end] == 1.0)
        inside = seconds < t_end
        assert np.all((p[inside] >= p0[inside]) & (p[inside] < 1.0))
        back = seconds_to_progress(table, m0, batch[inside], x[inside], work[inside], p0[inside], p[inside])
        assert back == pytest.approx(seconds[inside], rel=1e-9, abs=1e-9)
        # one entry at a time gives the same figures as the batch
        j = int(np.argmax(inside))
        assert progress_after(table, m0, batch[j], x[j], work[j], p0[j], seconds[j]) == p[j]


SPECS = [AdaptiveSpec("cifar10", 128, 4096, profiles="sia"), AdaptiveSpec("bert", 12, 384, profiles="sia"),
         AdaptiveSpec("imagenet", 200, 12800)]


def _jobs(rng: np.random.Generator, n: int) -> SimpleNamespace:
    """The fields of the simulator's job arrays that adaptive entries read and write."""
    specs = [SPECS[i] for i in rng.integers(0, len(SPECS), n)]
    return SimpleNamespace(specs=specs,
                           progress=rng.uniform(0.0, 0.95, n) * (rng.uniform(size=n) < 0.7),
                           work=rng.uniform(1e5, 1e8, n), adaptive=np.ones(n, bool), rules=[],
                           reallocations=np.zeros(n, np.int64),
                           # the total batch each ran at last round (0: not yet run)
                           batch=np.array([float(rng.choice([0, s.init_batch, 2 * s.init_batch, s.max_batch]))
                                           for s in specs]),
                           restart=np.full(n, np.nan))


@pytest.mark.parametrize("seed", range(3))
def test_batched_runner_matches_one_entry_at_a_time(seed):
    rng = np.random.default_rng(seed)
    n, names = 30, ["t4", "a100"]
    ja = _jobs(rng, n)
    jobs = rng.permutation(n)[:20]
    types = rng.integers(0, 2, len(jobs))
    ks = rng.integers(1, 9, len(jobs))
    servers = np.minimum(ks, rng.integers(1, 3, len(jobs)))
    seconds = rng.uniform(-10.0, 400.0, len(jobs))
    before, ran_at = ja.progress.copy(), ja.batch.copy()
    runner = AdaptiveRunner(ja, None, names, 360.0, 30.0)
    used, done = runner._progress(jobs, types, ks, servers, seconds)
    for i, m in enumerate(jobs.tolist()):   # the per-entry computation the batch replaces
        spec, p, w = ja.specs[m], float(before[m]), names[types[i]]
        g, mb, s = best_goodput(spec, w, int(ks[i]), int(servers[i]), p, runner.network,
                                batch=ran_at[m] if ran_at[m] > 0 else None)
        if g <= 0 or seconds[i] <= 0:
            assert (used[i], done[i], ja.progress[m]) == (max(seconds[i], 0.0), False, p)
            continue
        x = float(throughput_params(spec.family, w, runner.network, profiles=spec.profiles)
                  .throughput(mb, s, int(ks[i]), int(servers[i])))
        batch = int(ks[i]) * mb * (s + 1)
        curve = phi_curve(spec, batch)   # the measured set's noise scale at the batch the job picked
        assert ja.batch[m] == batch
        need = float(seconds_to_progress(curve, spec.init_batch, batch, x, float(ja.work[m]), p, 1.0))
        if need <= seconds[i]:
            assert (used[i], done[i], ja.progress[m]) == (need, True, 1.0)
        else:
            after = progress_after(curve, spec.init_batch, batch, x, float(ja.work[m]), p, seconds[i])
            # equal up to rounding: numpy's vector exp/log may round the last bit differently by length
            assert (used[i], done[i]) == (seconds[i], False)
            assert ja.progress[m] == pytest.approx(after, rel=1e-12)


def test_cached_goodput_rows_match_a_fresh_search():
    rng = np.random.default_rng(7)
    ja = _jobs(rng, 25)
    ja.progress[:10] = 0.0                          # many jobs at one progress
    src = ArraysSource(ja, ["t4", "a100"])
    k = np.arange(1, 9)
    n = -(-k // 4)
    for _ in range(3):
        rows = rng.permutation(25)[:18].tolist()
        got = src.goodput(rows, "a100", k, n)
        for i, m in enumerate(rows):
            g, _, _ = best_goodput_many(ja.specs[m], "a100", k, n, float(ja.progress[m]), src.network,
                                        batch=ja.batch[m] if ja.batch[m] > 0 else None)
            assert np.array_equal(got[i], g)
        ja.progress[rows[:5]] += 0.01               # some run, the others wait
