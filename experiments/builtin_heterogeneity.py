"""A question the paper could not ask: how much does heterogeneity-awareness buy as the
cluster gets more (or less) heterogeneous? LAS, aware vs agnostic, on gavel_ng's built-in
profiles with every job's speedup over a V100 raised to an exponent (0: all GPUs alike).

    python experiments/builtin_heterogeneity.py [--config reduced|full]
"""

from __future__ import annotations

import sys

import common as c

NAME = "builtin_heterogeneity"
EXPONENTS = (0.0, 0.5, 1.0, 1.5, 2.0)


def main(argv=None) -> int:
    from gavel_ng.sweep import expand
    from gavel_ng.sweep.figures import metric_vs

    args = c.parse_args(__doc__, argv)
    args.table = "builtin"
    rates = [2.0, 4.0, 5.6] if args.cfg.dense else [4.0]
    base = {"cluster": c.PAPER_CLUSTER, "window": args.cfg.window}
    df = c.run(NAME, expand({"policy": ["las", "las_agnostic"], "heterogeneity": list(EXPONENTS),
                             "jobs_per_hour": rates, "seed": list(args.cfg.seeds)}, base), args)
    high = rates[-1]
    parts = []
    for h in EXPONENTS:
        r = c.ratio(c.mean_of(df, "avg_jct_hours", policy="las_agnostic", heterogeneity=h, jobs_per_hour=high),
                    c.mean_of(df, "avg_jct_hours", policy="las", heterogeneity=h, jobs_per_hour=high))
        parts.append(f"{h:g}: {c.fmt_x(r)}")
    claims = [c.Claim(f"new: agnostic / aware LAS average JCT by heterogeneity exponent ({high} jobs/h, built-in "
                      "profiles)", "- (not in the paper)", "; ".join(parts), "new result",
                      "exponent 0: all GPU types as fast as a V100 (the aware policy can gain nothing)")]
    out = c.out_dir(NAME, args)
    sel = df[df["jobs_per_hour"] == high]
    fig = metric_vs(sel, out / "jct_vs_heterogeneity.png", x="heterogeneity",
                    xlabel="heterogeneity exponent (speedup over V100 raised to this power)",
                    title=f"LAS on built-in profiles at {high:g} jobs/h")
    c.report(NAME, claims, args, [fig])
    return 0


if __name__ == "__main__":
    sys.exit(main())
