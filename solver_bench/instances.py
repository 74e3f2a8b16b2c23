"""Random scheduling problems drawn from a measured throughput table."""

from __future__ import annotations

import numpy as np

from gavel_ng.pairs import PairTable
from gavel_ng.policies import Entity, SchedulingProblem
from gavel_ng.throughputs import ThroughputTable

SCALE_FACTORS = (1, 2, 4, 8)
SCALE_PROBS = (0.7, 0.1, 0.15, 0.05)
PRICES = {"v100": 2.48, "p100": 1.46, "k80": 0.45}  # Gavel §7 (AWS on-demand per GPU-hour)


def random_problem(table: ThroughputTable, num_jobs: int, seed: int = 0, entities: int = 0,
                   worker_types=("v100", "p100", "k80"), space_sharing: bool = False) -> SchedulingProblem:
    """num_jobs jobs on n/4 GPUs of each type, job types and scale factors as in the paper's traces.
    `space_sharing` adds the table's pair throughputs (the same jobs otherwise)."""
    rng = np.random.default_rng(seed)
    sf = rng.choice(SCALE_FACTORS, num_jobs, p=SCALE_PROBS)
    by_sf = {s: [k for k in table.job_keys if k[1] == s] for s in SCALE_FACTORS}
    keys = [by_sf[s][rng.integers(len(by_sf[s]))] for s in sf]
    T = table.matrix(keys, list(worker_types))
    cap = np.full(len(worker_types), max(8, num_jobs // 4))
    duration = 60 * 10 ** np.where(rng.random(num_jobs) < 0.8, rng.uniform(1.5, 3, num_jobs),
                                   rng.uniform(3, 4, num_jobs))
    v100 = T[:, list(worker_types).index("v100")] if "v100" in worker_types else T.max(axis=1)
    steps_total = np.maximum(duration * np.where(v100 > 0, v100, T.max(axis=1)), 1.0)
    done = rng.uniform(0, 0.5, num_jobs) * steps_total
    names = [f"e{i}" for i in range(entities)]
    specs = {n: Entity(weight=float(i + 1), policy="fifo" if i % 2 else "fairness") for i, n in enumerate(names)}
    return SchedulingProblem.build(
        [f"j{i}" for i in range(num_jobs)], list(worker_types), cap, T, scale_factors=sf,
        weights=np.where(rng.random(num_jobs) < 0.2, 5.0, 1.0), steps_remaining=steps_total - done,
        steps_total=steps_total, time_since_arrival=rng.uniform(0, 3600 * 10, num_jobs),
        slo_s=np.where(rng.random(num_jobs) < 0.5, duration * rng.choice([1.2, 2, 10], num_jobs) + 36000, np.inf),
        entities=[names[i % entities] for i in range(num_jobs)] if entities else None, entity_specs=specs,
        prices=[PRICES[w] for w in worker_types],
        pairs=PairTable.from_table(table, keys, list(worker_types)) if space_sharing else None,
    )
