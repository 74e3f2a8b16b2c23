"""Paper Fig 10: LAS, heterogeneity-aware vs agnostic, continuous-multiple trace (1/2/4/8 GPUs)
(paper: 2.2x lower average JCT at 2.6 jobs/h; Gandiva 2.2x worse than Gavel's packing).
AlloX handles single-GPU jobs only, so it is not run here (as in the paper).

    python experiments/fig10_las_multi.py [--config reduced|paper|full] [--table reference|builtin]
        [--gpus-per-server N]
"""

from __future__ import annotations

import sys

import common as c

NAME = "fig10_las_multi"
HIGH = 2.6


def main(argv=None) -> int:
    args = c.parse_args(__doc__, argv, c.server_size_option)
    rates = [0.5, 1.0, 1.5, 2.0, 2.6, 3.0] if args.cfg.dense else [1.0, 2.0, 2.6]
    ss = c.supports("space_sharing")
    policies = ["las", "las_agnostic"] + (["las_packed", "gandiva"] if ss else [])
    df = c.run(NAME, c.rate_points(args, policies, rates, multi_gpu=True), args)
    claims = [c.jct_claim(df, f"Fig 10: LAS het-aware vs agnostic, continuous-multiple, {HIGH} jobs/h", 2.2,
                          "las_agnostic", "las", HIGH)]
    if ss:
        claims.append(c.jct_claim(df, f"Fig 10: Gandiva vs Gavel LAS with space sharing at {HIGH} jobs/h", 2.2,
                                  "gandiva", "las_packed", HIGH))
    else:
        claims.append(c.Claim("Fig 10: Gandiva vs Gavel LAS with space sharing", "2.2x", "-", "pending",
                              c.PENDING_SS))
    figs = c.jct_figures(NAME, df, args, HIGH, "LAS, continuous-multiple")
    c.report(NAME, claims, args, figs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
