"""Several policies on one trace: a comparison line per pair and one CDF with every policy.

`gavel-ng simulate --policy las,las_agnostic ...` runs each policy on the same trace and
ends with one line per policy after the first, comparing the first against it:

    las (heterogeneity-aware) vs las_agnostic: average JCT 9.22 h vs 10.24 h (1.11x better), ...

Lower is better for every metric compared (JCT, makespan, cost, SLO violations).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..policies.registry import is_agnostic_twin
from .metrics import window_jcts

# (summary key, label, unit) of the metrics compared, lower is better for each
METRICS = (("avg_jct_hours", "average JCT", "h"), ("p90_jct_hours", "p90 JCT", "h"),
           ("makespan_hours", "makespan", "h"), ("total_cost_usd", "cost", "$"))
SAME = 1.005   # ratios closer to 1 than this read "same"


def compare(first: dict, other: dict) -> dict:
    """The first run's summary against another's: per metric both values and other / first."""
    out = {"policy": first["policy"], "versus": other["policy"], "metrics": {}}
    for key, _, _ in METRICS:
        a, b = first.get(key), other.get(key)
        ratio = b / a if a and b is not None else None
        out["metrics"][key] = {"value": a, "versus": b, "ratio": None if ratio is None else round(ratio, 6)}
    if first.get("jobs_with_slo") or other.get("jobs_with_slo"):
        out["metrics"]["slo_violations"] = {"value": first["slo_violations"], "versus": other["slo_violations"]}
    out["unstable"] = [s["policy"] for s in (first, other) if s.get("unstable")]
    return out


def comparison_line(c: dict) -> str:
    """One line a person reads: `A vs B: average JCT 9.22 h vs 10.24 h (1.11x better), ...`."""
    parts = []
    for key, label, unit in METRICS:
        m = c["metrics"][key]
        if m["value"] is None or m["versus"] is None:
            continue
        parts.append(f"{label} {_fmt(m['value'], unit)} vs {_fmt(m['versus'], unit)} ({_verdict(m['ratio'])})")
    slo = c["metrics"].get("slo_violations")
    if slo is not None:
        a, b = slo["value"], slo["versus"]
        diff = "same" if a == b else f"{abs(b - a)} {'fewer' if a < b else 'more'}"
        parts.append(f"SLO violations {a} vs {b} ({diff})")
    first = c["policy"] + (" (heterogeneity-aware)" if is_agnostic_twin(c["policy"], c["versus"]) else "")
    line = f"{first} vs {c['versus']}: " + ", ".join(parts)
    if c["unstable"]:
        line += f"; unstable (hit a cap, values are floors): {', '.join(c['unstable'])}"
    return line


def comparisons(summaries: list[dict]) -> list[dict]:
    """The first policy against each of the others."""
    return [compare(summaries[0], s) for s in summaries[1:]]


def write_compared(results: list, out_dir: str | Path) -> Path:
    """The JCT CDF of every policy in OUT/jct.png and the comparisons in OUT/comparison.json (each run's
    own outputs are under OUT/POLICY/, written as it finished); returns the CDF's path."""
    from ..plots import plot_jct_cdf

    out = Path(out_dir)
    jcts, totals = {}, {}
    for r in results:
        jcts[r.summary["policy"]], totals[r.summary["policy"]] = window_jcts(r)
    lo, hi = results[0].window
    png = plot_jct_cdf(jcts, out / "jct.png", title=f"job completion times, jobs {lo}-{hi - 1}, same trace",
                       totals=totals)
    cmp = comparisons([r.summary for r in results])
    (out / "comparison.json").write_text(json.dumps(
        [{**c, "line": comparison_line(c)} for c in cmp], indent=2) + "\n")
    return png


def _fmt(v: float, unit: str) -> str:
    return f"${v:,.0f}" if unit == "$" else f"{v:.2f} {unit}"


def _verdict(ratio: float | None) -> str:
    if not ratio:
        return "n/a"
    if ratio >= SAME:
        return f"{ratio:.2f}x better"
    if ratio <= 1 / SAME:
        return f"{1 / ratio:.2f}x worse"
    return "same"
