"""Paper Fig 9: LAS, heterogeneity-aware vs agnostic, continuous-single trace, with AlloX
and Gandiva baselines (paper: 3.5x lower average JCT at 5.6 jobs/h; Gandiva 2.2x worse than
Gavel's packing).

    python experiments/fig09_las_single.py [--config reduced|full] [--table reference|builtin]
"""

from __future__ import annotations

import sys

import common as c

NAME = "fig09_las_single"
HIGH = 5.6


def main(argv=None) -> int:
    args = c.parse_args(__doc__, argv)
    rates = [1.0, 2.0, 3.0, 4.0, 5.0, 5.6, 6.0, 7.0] if args.cfg.dense else [2.0, 4.0, 5.6]
    ss = c.supports("space_sharing")
    policies = ["las", "las_agnostic", "allox"] + (["las_packed", "gandiva"] if ss else [])
    df = c.run(NAME, c.rate_points(args, policies, rates), args)
    claims = [c.jct_claim(df, f"Fig 9: LAS het-aware vs agnostic, continuous-single, {HIGH} jobs/h", 3.5,
                          "las_agnostic", "las", HIGH),
              c.jct_claim(df, "Fig 9: AlloX vs het-aware LAS at moderate load (4 jobs/h): AlloX is the best case",
                          1.0, "allox", "las", 4.0, note="AlloX optimizes average JCT directly"),
              high_load(df)]
    if ss:
        claims.append(c.jct_claim(df, f"Fig 9: Gandiva vs Gavel LAS with space sharing at {HIGH} jobs/h", 2.2,
                                  "gandiva", "las_packed", HIGH))
    else:
        claims.append(c.Claim("Fig 9: Gandiva vs Gavel LAS with space sharing", "2.2x", "-", "pending", c.PENDING_SS))
    figs = c.jct_figures(NAME, df, args, HIGH, "LAS, continuous-single")
    c.report(NAME, claims, args, figs)
    return 0


def high_load(df) -> c.Claim:
    """Fig 9: past moderate load AlloX falls behind LAS and starves long jobs (long CDF tail)."""
    claim = c.jct_claim(df, f"Fig 9: AlloX vs het-aware LAS at high load ({HIGH} jobs/h): LAS sustains more load",
                        1.0, "allox", "las", HIGH)
    r = c.ratio(c.mean_of(df, "avg_jct_hours", policy="allox", jobs_per_hour=HIGH),
                c.mean_of(df, "avg_jct_hours", policy="las", jobs_per_hour=HIGH))
    a = c.mean_of(df, "p99_jct_hours", policy="allox", jobs_per_hour=HIGH)
    b = c.mean_of(df, "p99_jct_hours", policy="las", jobs_per_hour=HIGH)
    claim.paper = "> 1x (no number), long AlloX tail"
    # AlloX runs that hit the cap left jobs unfinished: LAS sustaining the load it did not is the claim,
    # however close the means of the jobs that did finish; without that, a mean within 5 % is noise
    capped = c.any_unstable(df, policy="allox", jobs_per_hour=HIGH) and not c.any_unstable(
        df, policy="las", jobs_per_hour=HIGH)
    claim.verdict = "reproduced" if a > b and (r > 1.05 or capped) else "partly" if r > 1 or a > b \
        else "not reproduced"
    claim.note = "; ".join(filter(None, [f"p99 JCT AlloX {a:.0f} h vs LAS {b:.0f} h", claim.note.lstrip("; ")]))
    return claim


if __name__ == "__main__":
    sys.exit(main())
