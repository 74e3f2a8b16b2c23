"""Paper Fig 11: finish-time fairness, heterogeneity-aware vs agnostic, continuous-multiple
trace (paper: 3x lower average JCT and 2.8x lower average FTF rho; FTF CDF at 2.6 jobs/h).

    python experiments/fig11_ftf.py [--config reduced|full] [--table reference|builtin]
"""

from __future__ import annotations

import sys

import common as c

NAME = "fig11_ftf"
HIGH = 2.6


def main(argv=None) -> int:
    args = c.parse_args(__doc__, argv)
    rates = [0.5, 1.0, 1.5, 2.0, 2.6, 3.0] if args.cfg.dense else [1.0, 2.6]
    df = c.run(NAME, c.rate_points(args, ["ftf", "ftf_agnostic"], rates, multi_gpu=True), args)
    claims = [c.jct_claim(df, f"Fig 11: FTF het-aware vs agnostic, average JCT at {HIGH} jobs/h", 3.0,
                          "ftf_agnostic", "ftf", HIGH),
              c.jct_claim(df, f"Fig 11: FTF het-aware vs agnostic, average FTF rho at {HIGH} jobs/h", 2.8,
                          "ftf_agnostic", "ftf", HIGH, metric="avg_ftf_rho",
                          note="rho = JCT / (steps / throughput on 1/n of the cluster), n = average active jobs")]
    figs = c.jct_figures(NAME, df, args, HIGH, "finish-time fairness, continuous-multiple", ftf=True)
    c.report(NAME, claims, args, figs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
