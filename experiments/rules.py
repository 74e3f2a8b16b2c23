"""Cost of placement rules and entity quotas (issue 16): JCT and utilization with and without.

Continuous multi-GPU trace (Gavel §7.1) on v100/p100/k80 = 16/16/16, 4 GPUs per server, LAS,
jobs 0-200 measured. Variants: no rules; one distributed job per server (Pollux's interference
avoidance); anti-affinity between all multi-GPU jobs (hard, per server); entity quotas (every
other job is of entity "a", capped at 4 V100s); and the hierarchical policy with entities a
(weight 2) and b (weight 1), with and without a's V100 quota, where the quota and fairness interact.

    python experiments/rules.py [--jobs-per-hour 3] [--window 0:200] [--out experiments/results/rules.csv]
"""

from __future__ import annotations

import argparse
import csv
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.policies.input.entities import Entity
from gavel_ng.rules import ClusterRules, JobRules
from gavel_ng.simulator.engine import SimConfig, parse_window, simulate
from gavel_ng.throughputs import ThroughputTable
from gavel_ng.traces import TraceSpec, generate

log = logging.getLogger(__name__)


def _rules(trace, anti: bool, entities: bool) -> list:
    out = []
    for i, sf in enumerate(trace.scale_factors):
        multi = sf > 1
        out.append(JobRules(group="multi" if anti and multi else None,
                            anti_affinity=("multi",) if anti and multi else (),
                            entity=("a" if i % 2 else "b") if entities else None))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs-per-hour", type=float, default=3.0)
    ap.add_argument("--window", default="0:200")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "out" / "experiments" / "rules.csv"),
                    help="default out/experiments/rules.csv (the committed one: experiments/results/rules.csv)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    window = parse_window(args.window)
    table = ThroughputTable.builtin("gavel-osdi20")
    cluster = Cluster({"v100": 16, "p100": 16, "k80": 16}, gpus_per_server={"v100": 4, "p100": 4, "k80": 4})
    base = generate(TraceSpec(jobs_per_hour=args.jobs_per_hour, multi_gpu=True, seed=args.seed), table,
                    window[1] + 100)
    quota = {"a": {"v100": 4}}
    variants = [
        ("las", "none", {}, False, False),
        ("las", "one distributed job per server", {"one_distributed_per_server": True}, False, False),
        ("las", "anti-affinity between multi-GPU jobs", {}, True, False),
        ("las", "entity a: at most 4 V100s", {"quotas": quota}, False, True),
        ("hierarchical", "entities a (w=2), b (w=1)", {}, False, True),
        ("hierarchical", "entities a (w=2), b (w=1); a: at most 4 V100s", {"quotas": quota}, False, True),
    ]
    entities = {"a": Entity(2.0), "b": Entity(1.0)}   # the weights matter to the hierarchical policy only
    rows = []
    for policy, name, crules, anti, owned in variants:
        trace = replace(base, rules=_rules(base, anti, owned))
        cfg = SimConfig(policy=policy, window=window, seed=args.seed, rules=ClusterRules.from_dict(crules),
                        entities=entities if owned else {})
        res = simulate(cluster, table, trace, cfg)
        s = res.summary
        ja = res.jobs
        lo, hi = window
        jct = {e: float(np.nanmean([(ja.finish[m] - ja.arrival[m]) / 3600 for m in range(lo, hi)
                                    if trace.rules[m].entity == e])) for e in ("a", "b")} if owned else {}
        rows.append({"policy": policy, "rules": name, "avg_jct_h": s["avg_jct_hours"], "p90_jct_h": s["p90_jct_hours"],
                     "makespan_h": s["makespan_hours"], "utilization": s["utilization"],
                     "entity_a_jct_h": round(jct["a"], 3) if jct else "",
                     "entity_b_jct_h": round(jct["b"], 3) if jct else "",
                     "wall_s": s["wall_seconds"]})
        print(" | ".join(str(v) for v in rows[-1].values()), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
