"""Paper §7.3 LAS with priorities: 20 % of jobs have weight 5 (paper: at high load Gavel lowers
the average JCT of high-priority jobs 1.5x and of low-priority jobs 2.7x).

    python experiments/las_priorities.py [--config reduced|full] [--table reference|builtin]
"""

from __future__ import annotations

import sys

import common as c

NAME = "las_priorities"
HIGH = 5.6


def main(argv=None) -> int:
    args = c.parse_args(__doc__, argv)
    rates = [2.0, 3.0, 4.0, 5.0, 5.6, 6.0] if args.cfg.dense else [3.0, 5.6]
    df = c.run(NAME, c.rate_points(args, ["las", "las_agnostic"], rates, priorities=True), args)
    note = "continuous-single trace (the paper does not say which); 'high load' taken as 5.6 jobs/h"
    claims = [c.jct_claim(df, f"LAS with priorities, high-priority jobs, {HIGH} jobs/h", 1.5, "las_agnostic", "las",
                          HIGH, metric="avg_jct_high_priority_hours", note=note),
              c.jct_claim(df, f"LAS with priorities, low-priority jobs, {HIGH} jobs/h", 2.7, "las_agnostic", "las",
                          HIGH, metric="avg_jct_low_priority_hours")]
    figs = c.jct_figures(NAME, df, args, HIGH, "LAS with priorities")
    c.report(NAME, claims, args, figs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
