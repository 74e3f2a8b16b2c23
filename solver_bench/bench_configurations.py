"""The configuration 0/1 program (`policies.configurations.assign`): the project's LP layer against scipy's milp.

    python -m solver_bench.bench_configurations [--repeat 3] [--seed 0]

`assign` used to solve its program with `scipy.optimize.milp` (scipy's bundled HiGHS, presolve
on); it now goes through `policies.lp.LinearProgram` with integer columns (highspy, presolve
on, as HiGHS chooses for a MIP). Both solve the same program (`configurations.program`) to a relative gap of 1e-6. Two
families of instances:

* realistic: adaptive jobs of the Pollux mix at random progress on t4/v100/a100, their speedups
  on every (type, K GPUs) column from `best_goodput_many` (as the round context builds them),
  the `goodput` policy's values (p = -1) and undominated columns;
* random: speedups uniform on a random half of the columns, GPUs per column 1-8.

Printed per instance: variables, the objective of each (and their relative difference), the
best-of-`--repeat` time of each and milp / LinearProgram; then LinearProgram with presolve off
(as it solves LPs), which is why MIPs keep it on.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from gavel_ng.columns import Columns
from gavel_ng.elastic import best_goodput_many, pollux_workload
from gavel_ng.policies.lp.highs import LinearProgram
from gavel_ng.policies.rounds import to_speedups
from gavel_ng.policies.rounds.configurations import MIP_GAP, _undominated, config_values, program

TYPES = ("t4", "v100", "a100")
PER_SERVER = np.array([4, 4, 8])
# (jobs, GPU counts per type): 3 types x counts + 3 plain columns = 40-120 columns
SIZES = ((50, 12), (100, 20), (200, 32), (400, 39))


def realistic(jobs: int, counts: int, seed: int):
    """(V, need, keep, pool, cap) of the goodput policy on adaptive jobs of the Pollux mix."""
    rng = np.random.default_rng(seed)
    et = pollux_workload(num_jobs=jobs, hours=8, seed=seed)
    M = len(et)
    cap = np.array([jobs * 0.6, jobs * 0.4, jobs * 0.3]).round()
    cols = Columns.configurations(list(TYPES), cap, range(1, counts + 1))
    S = np.zeros((M, cols.num))
    progress = rng.random(M)
    for t, w in enumerate(TYPES):
        c = np.flatnonzero((cols.pool == t) & (cols.gpus > 0))
        k = cols.gpus[c]
        for m, spec in enumerate(et.specs):
            S[m, c], _, _ = best_goodput_many(spec, w, k, -(-k // PER_SERVER[t]), progress[m])
    adaptive = np.ones(M, bool)
    need = cols.needs(np.ones(M))
    S = to_speedups(S, need, cols, adaptive, np.ones(M))
    S = np.where(need <= cap[cols.pool][None, :], S, 0.0)
    return config_values(S, -1.0), need, _undominated(S, need, cols.pool), cols.pool, cap


def random_instance(jobs: int, columns: int, seed: int):
    rng = np.random.default_rng(seed)
    pool = np.sort(rng.integers(0, 3, columns))
    S = rng.random((jobs, columns)) * (rng.random((jobs, columns)) < 0.5)
    need = rng.integers(1, 9, (jobs, columns)).astype(float)
    cap = np.full(3, jobs * 4.5 / 3).round()
    return config_values(S, -1.0), need, S > 0, pool, cap


def solve_milp(prog) -> np.ndarray:
    """The former `assign` solve."""
    vr, vc, v, g, A, ub = prog
    res = milp(-v / v.max(), integrality=np.ones(len(v)), bounds=Bounds(0, 1),
               constraints=LinearConstraint(A, -np.inf, ub), options={"time_limit": 60, "mip_rel_gap": MIP_GAP})
    return res.x


def solve_lp(prog, presolve: str | None = None) -> np.ndarray:
    vr, vc, v, g, A, ub = prog
    lp = LinearProgram(v / v.max(), A, -np.inf, ub, 0.0, 1.0, time_limit=60, integrality=True, mip_gap=MIP_GAP)
    if presolve is not None:
        lp.highs.setOptionValue("presolve", presolve)
    return lp.run().x


def best(fn, repeat: int) -> tuple[float, np.ndarray]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"{'instance':<22}{'vars':>7}{'objective':>13}{'rel diff':>10}{'milp ms':>10}{'LP ms':>9}{'ratio':>7}"
          f"{'LP presolve off ms':>20}")
    ratios = []
    for kind in ("realistic", "random"):
        for jobs, counts in SIZES:
            make = realistic if kind == "realistic" else random_instance
            width = 3 * counts + 3
            prog = program(*make(jobs, counts if kind == "realistic" else width, args.seed))
            v = prog[2]
            t_milp, x_milp = best(lambda prog=prog: solve_milp(prog), args.repeat)
            t_lp, x_lp = best(lambda prog=prog: solve_lp(prog), args.repeat)
            t_pre, x_pre = best(lambda prog=prog: solve_lp(prog, "off"), args.repeat)
            o_milp, o_lp, o_pre = (float(v @ (x > 0.5)) for x in (x_milp, x_lp, x_pre))
            diff = max(abs(o_lp - o_milp), abs(o_pre - o_milp)) / max(abs(o_milp), 1e-12)
            ratios.append(t_milp / t_lp)
            print(f"{f'{kind} {jobs}x{width}':<22}{len(v):>7}{o_lp:>13.6f}{diff:>10.1e}{t_milp * 1e3:>10.1f}"
                  f"{t_lp * 1e3:>9.1f}{t_milp / t_lp:>7.2f}{t_pre * 1e3:>20.1f}")
    print(f"milp / LinearProgram time: geometric mean {np.exp(np.mean(np.log(ratios))):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
