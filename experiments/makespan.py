"""Paper §7.3 makespan on a static trace (all jobs at t=0): Gavel's heterogeneity-aware
makespan policy vs a FIFO baseline (paper 2.5x) and vs Gandiva's ad-hoc space sharing
(paper 1.4x); space sharing lowers makespan a further 8 % with many jobs.

    python experiments/makespan.py [--config reduced|full] [--table reference|builtin]
"""

from __future__ import annotations

import sys

import common as c

NAME = "makespan"


def main(argv=None) -> int:
    from gavel_ng.sweep import expand
    from gavel_ng.sweep.figures import bars

    args = c.parse_args(__doc__, argv)
    sizes = [200, 400, 800] if args.cfg.dense else [400]
    ss = c.supports("space_sharing")
    policies = ["makespan", "fifo_agnostic", "fifo"] + (["gandiva", "makespan_packed"] if ss else [])
    base = {"cluster": c.PAPER_CLUSTER, "throughputs": c.throughputs(args)}
    df = c.run(NAME, expand({"policy": policies, "static": sizes, "seed": list(args.cfg.seeds)}, base), args)
    n = sizes[-1]
    note = f"static trace of {n} single-GPU jobs (durations as the continuous traces); FIFO = agnostic FIFO"
    claims = [c.jct_claim(df.assign(jobs_per_hour=df["static"]), f"makespan vs FIFO, static {n} jobs", 2.5,
                          "fifo_agnostic", "makespan", float(n), metric="makespan_hours", note=note)]
    if ss:
        claims.append(c.jct_claim(df.assign(jobs_per_hour=df["static"]), f"makespan vs Gandiva, static {n} jobs",
                                  1.4, "gandiva", "makespan", float(n), metric="makespan_hours"))
        claims.append(c.jct_claim(df.assign(jobs_per_hour=df["static"]), "makespan with space sharing vs without "
                                  "(paper: a further 8 %, with many jobs)", 1.08, "makespan", "makespan_packed",
                                  float(n), metric="makespan_hours"))
    else:
        claims.append(c.Claim("makespan vs Gandiva", "1.4x", "-", "pending", c.PENDING_SS))
    out = c.out_dir(NAME, args)
    fig = bars(df[df["static"] == n], out / "makespan.png", metrics=["makespan_hours"],
               title=f"makespan, static trace of {n} jobs, 36 V100 + 36 P100 + 36 K80")
    c.report(NAME, claims, args, [fig])
    return 0


if __name__ == "__main__":
    sys.exit(main())
