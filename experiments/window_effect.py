"""Why the reduced configuration understates Figs 9-10 and priorities: at high load the
agnostic policy's queue keeps growing, so its average JCT depends on how late in the trace
the measured jobs arrive. LAS aware vs agnostic measured over jobs 250-500, 1000-1500 and the
paper's 4000-5000: continuous-single at 5.6 jobs/h (Fig 9), continuous-multiple at 2.6
(Fig 10), and continuous-single with priorities at 5.6 (§7.3).

    python experiments/window_effect.py [--config reduced|full] [--table reference|builtin]
"""

from __future__ import annotations

import math
import sys

import common as c
import numpy as np
import pandas as pd

NAME = "window_effect"
PAPER_WINDOW = "4000:5000"
SINGLE = {"jobs_per_hour": 5.6, "multi_gpu": False, "priorities": False}
MULTI = {"jobs_per_hour": 2.6, "multi_gpu": True, "priorities": False, "gpus_per_server": c.MULTI_GPU_SERVER}
PRIORITIES = {"jobs_per_hour": 5.6, "multi_gpu": False, "priorities": True}
CASES = (  # label, settings, windows, [(metric, paper ratio)]
    ("Fig 9, continuous-single, 5.6 jobs/h", SINGLE, ("250:500", "1000:1500", PAPER_WINDOW),
     [("avg_jct_hours", 3.5)]),
    ("Fig 10, continuous-multiple, 2.6 jobs/h", MULTI, ("250:500", PAPER_WINDOW),
     [("avg_jct_hours", 2.2)]),
    ("LAS with priorities, 5.6 jobs/h", PRIORITIES, (PAPER_WINDOW,),
     [("avg_jct_high_priority_hours", 1.5), ("avg_jct_low_priority_hours", 2.7)]),
)


def same_jobs_ratio(runs: pd.DataFrame, args, metric: str) -> tuple[int, float]:
    """Agnostic / aware over the jobs both runs finished (seed by seed, then averaged): a capped
    run's mean leaves out its slowest jobs, the other run's does not. (jobs, ratio)."""
    column = {"avg_jct_hours": "jct_s"}.get(metric)
    if column is None:
        return 0, math.nan
    ratios, n = [], 0
    for seed in sorted(runs["seed"].unique()):
        jobs = c.job_records(NAME, args, runs, ("las_agnostic", "las"), seed)
        if len(jobs) < 2:
            continue
        both = sorted(set.intersection(*(set(j.index[j["finish_s"].notna()]) for j in jobs.values())))
        a, b = (float(jobs[p].loc[both, column].mean()) for p in ("las_agnostic", "las"))
        ratios.append(c.ratio(a, b))
        n += len(both)
    return n, float(np.mean(ratios)) if ratios else math.nan


def main(argv=None) -> int:
    from gavel_ng.sweep import expand

    args = c.parse_args(__doc__, argv)
    base = {"cluster": c.PAPER_CLUSTER, "throughputs": c.throughputs(args), "max_active_jobs": 1500}
    pts, claims = [], []
    for _label, settings, windows, _metrics in CASES:
        pts += expand({"policy": ["las", "las_agnostic"], "window": list(windows), "seed": list(args.cfg.seeds)},
                      {**base, **settings})
    df = c.run(NAME, pts, args)
    for label, settings, windows, metrics in CASES:
        sel = df
        for k, v in settings.items():
            sel = sel[sel[k].astype(str) == str(v)]
        for metric, paper in metrics:
            parts, final = [], float("nan")
            for w in windows:
                s = sel[sel["window"] == w]
                final = c.ratio(c.mean_of(s, metric, policy="las_agnostic"), c.mean_of(s, metric, policy="las"))
                capped = c.any_unstable(s, policy="las_agnostic") or c.any_unstable(s, policy="las")
                flag = ""
                if capped:
                    n, same = same_jobs_ratio(s, args, metric)
                    flag = " (a run hit a cap: its mean is a floor" + (
                        f"; over the {n} jobs both finished: {c.fmt_x(same)})" if n else ")")
                parts.append(f"jobs {w}: {c.fmt_x(final)}{flag}")
            what = {"avg_jct_hours": "average JCT", "avg_jct_high_priority_hours": "high-priority JCT",
                    "avg_jct_low_priority_hours": "low-priority JCT"}[metric]
            claims.append(c.Claim(f"{label}: LAS agnostic / aware {what}, by measured window", f"{paper}x "
                                  f"(jobs {PAPER_WINDOW})", "; ".join(parts), c.verdict(final, paper),
                                  "verdict at the paper's window"))
    c.report(NAME, claims, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
