"""The `gavel-ng solve` JSON problem format, validated field by field."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .cluster import Cluster
from .errors import InputError, read_json, require
from .policies.input.entities import parse_entities
from .policies.input.scheduling_problem import SchedulingProblem
from .rules import ClusterRules, JobRules, RuleCompiler, check_entity, parse_job_rules, simulated_servers

TOP_FIELDS = {"policy", "cluster", "jobs", "entities", "prices", "pairs", "rules", "gpus_per_server"}
PAIR_FIELDS = {"jobs", "throughputs"}
JOB_FIELDS = {"id", "throughputs", "job_type", "scale_factor", "weight", "steps_remaining", "steps_total",
              "time_since_arrival_s", "slo_s", "entity", *JobRules.FIELDS}


def load_problem(path: str | Path, space_sharing: bool = False,
                 warnings: list[str] | None = None) -> tuple[SchedulingProblem, str | None]:
    """Read a problem file; returns the problem and the policy it names (if any).

    With `space_sharing`, jobs may share a GPU: pairs of built-in job types take their
    throughputs from the built-in profiles, other pairs from the file's "pairs" list;
    notes on jobs that can share with nobody are appended to `warnings`."""
    return parse_problem(read_json(path, "--problem"), space_sharing, warnings)


def parse_problem(data: object, space_sharing: bool = False,
                  warnings: list[str] | None = None) -> tuple[SchedulingProblem, str | None]:
    require(isinstance(data, dict), "problem", type(data).__name__, "must be a JSON object")
    unknown = set(data) - TOP_FIELDS
    require(not unknown, "problem", sorted(unknown)[0] if unknown else None,
            f"unknown field (expected {', '.join(sorted(TOP_FIELDS))})")
    policy = data.get("policy")
    require(policy is None or isinstance(policy, str), "policy", policy, "must be a string")
    cluster = data.get("cluster")
    require(isinstance(cluster, dict) and cluster, "cluster", cluster, "must be an object of worker type: GPU count")
    for w, n in cluster.items():
        require(_is_int(n) and n >= 0, f"cluster.{w}", n, "GPU count must be a non-negative integer")
    workers = list(cluster)
    jobs = data.get("jobs")
    require(isinstance(jobs, list) and jobs, "jobs", jobs, "must be a non-empty list")
    entity_specs = parse_entities(data.get("entities"))
    prices = _prices(data.get("prices"), workers)
    cols: dict[str, list] = {k: [] for k in ("ids", "T", "sf", "w", "R", "S", "t", "slo", "entity", "key", "rules")}
    for i, job in enumerate(jobs):
        _job(job, i, workers, entity_specs, cols)
    entries = _pair_entries(data.get("pairs"), cols, workers)
    warnings = [] if warnings is None else warnings
    pairs = None
    if space_sharing:
        pairs = _pair_table(cols, workers, entries, warnings)
    elif entries:
        warnings.append("'pairs' is ignored without space sharing (--space-sharing)")
    problem = SchedulingProblem.build(
        cols["ids"], workers, [cluster[w] for w in workers], cols["T"], scale_factors=cols["sf"],
        weights=cols["w"], steps_remaining=cols["R"], steps_total=cols["S"], time_since_arrival=cols["t"],
        slo_s=cols["slo"], entities=cols["entity"], entity_specs=entity_specs, prices=prices, pairs=pairs,
    )
    return _with_rules(problem, data, cluster, cols["rules"]), policy


def _with_rules(problem: SchedulingProblem, data: dict, cluster: dict, job_rules: list):
    """Quotas and job rules compiled in (gavel_ng.rules); servers as a simulated cluster lays them out
    (`gpus_per_server`, default up to 4, the first N of a type carrying `rules.server_labels`)."""
    rules = ClusterRules.from_dict(data.get("rules"), "rules")
    rules.check_types(list(cluster), "rules")
    rules.check_entities(problem.entity_specs, "rules")
    if rules.empty and not any(job_rules):
        return problem
    per = data.get("gpus_per_server") or {}
    require(isinstance(per, dict), "gpus_per_server", per, "must map worker type -> GPUs per server")
    layout = Cluster(dict(cluster), gpus_per_server=dict(per))
    return RuleCompiler(rules, simulated_servers(layout.gpus, layout.server_size, rules)).apply(problem, job_rules)


def _pair_entries(raw: object, cols: dict, workers: list[str]) -> list[tuple[int, int, dict]]:
    """"pairs": [{"jobs": ["a", "b"], "throughputs": {"v100": [a's steps/s, b's steps/s]}}, ...];
    [0, 0] marks a pair that cannot share that type. At least one of the two jobs must give
    explicit throughputs (pairs of built-in job types come from the built-in profiles)."""
    if raw is None:
        return []
    require(isinstance(raw, list), "pairs", raw, "must be a list of {jobs, throughputs}")
    index = {jid: i for i, jid in enumerate(cols["ids"])}
    seen: set = set()
    out = []
    for n, entry in enumerate(raw):
        f = f"pairs[{n}]"
        require(isinstance(entry, dict), f, entry, "must be an object")
        unknown = set(entry) - PAIR_FIELDS
        require(not unknown, f, sorted(unknown)[0] if unknown else None,
                f"unknown field (expected {', '.join(sorted(PAIR_FIELDS))})")
        ids = entry.get("jobs")
        require(isinstance(ids, list) and len(ids) == 2, f"{f}.jobs", ids, "must list two job ids")
        for jid in ids:
            require(str(jid) in index, f"{f}.jobs", jid, "unknown job id")
        a, b = index[str(ids[0])], index[str(ids[1])]
        require(a != b, f"{f}.jobs", ids, "a job cannot share a GPU with itself")
        require(cols["sf"][a] == cols["sf"][b], f"{f}.jobs", ids, "jobs sharing a GPU need the same scale_factor")
        require(cols["key"][a] is None or cols["key"][b] is None, f"{f}.jobs", ids,
                "pairs of two built-in job types come from the built-in profiles")
        require(frozenset((a, b)) not in seen, f"{f}.jobs", ids, "pair given twice")
        seen.add(frozenset((a, b)))
        thr = entry.get("throughputs")
        require(isinstance(thr, dict) and thr, f"{f}.throughputs", thr,
                "must be an object of worker type: [first job's steps/s, second job's steps/s]")
        for w, v in thr.items():
            require(w in workers, f"{f}.throughputs", w, f"unknown worker type (cluster has {', '.join(workers)})")
            require(isinstance(v, list) and len(v) == 2 and all(_is_num(e) and e >= 0 for e in v),
                    f"{f}.throughputs.{w}", v, "must be [first job's steps/s, second job's steps/s], each >= 0")
            for who, val in zip((a, b), v):
                iso = cols["T"][who][workers.index(w)]
                require(val == 0 or iso > 0, f"{f}.throughputs.{w}", v,
                        f"job {cols['ids'][who]} cannot run on {w} alone, so it cannot share it")
        out.append((a, b, thr))
    return out


def _pair_table(cols: dict, workers: list[str], entries: list, warnings: list[str]):
    """Pair classes: one per built-in (job_type, scale_factor), one per job with explicit throughputs."""
    from .pairs import PairTable

    keys = [k if k is not None else ("id", jid) for k, jid in zip(cols["key"], cols["ids"])]
    typed = [k for k in keys if k[0] != "id"]
    uniq = list(dict.fromkeys(keys))
    index = {k: i for i, k in enumerate(uniq)}
    frac = np.zeros((len(uniq), len(uniq), len(workers)))
    if typed:
        from .profiles import default_table

        t_uniq = list(dict.fromkeys(typed))
        sub = PairTable.from_table(default_table(workers), t_uniq, workers).frac
        ti = [index[k] for k in t_uniq]
        frac[np.ix_(ti, ti)] = sub
    T = np.asarray(cols["T"], dtype=float)
    for a, b, thr in entries:
        for w, (va, vb) in thr.items():
            j = workers.index(w)
            ca, cb = index[keys[a]], index[keys[b]]
            frac[ca, cb, j] = va / T[a, j] if T[a, j] > 0 else 0.0
            frac[cb, ca, j] = vb / T[b, j] if T[b, j] > 0 else 0.0
    named = {i for a, b, _ in entries for i in (a, b)}
    alone = [jid for i, (k, jid) in enumerate(zip(cols["key"], cols["ids"])) if k is None and i not in named]
    if alone:
        warnings.append(f"{len(alone)} job(s) with explicit throughputs have no pair throughputs and never share "
                        f"a GPU ({', '.join(alone[:5])}{', ...' if len(alone) > 5 else ''}); give them under 'pairs'")
    return PairTable(np.array([index[k] for k in keys], dtype=int), frac,
                     tuple(k[0] if k[0] != "id" else f"job {k[1]}" for k in uniq))


def _job(job: object, i: int, workers: list[str], entity_specs: dict, cols: dict) -> None:
    f = f"jobs[{i}]"
    require(isinstance(job, dict), f, job, "must be an object")
    unknown = set(job) - JOB_FIELDS
    require(not unknown, f, sorted(unknown)[0] if unknown else None,
            f"unknown field (expected {', '.join(sorted(JOB_FIELDS))})")
    jid = job.get("id")
    require(isinstance(jid, (str, int)) and not isinstance(jid, bool) and str(jid) != "", f"{f}.id", jid,
            "must be a non-empty string")
    jid = str(jid)
    require(jid not in cols["ids"], f"{f}.id", jid, "duplicate job id")
    sf = job.get("scale_factor", 1)
    require(_is_int(sf) and sf >= 1, f"{f}.scale_factor", sf, "must be an integer >= 1")
    thr = job.get("throughputs")
    job_key = None
    if thr is None and "job_type" in job:
        thr = _builtin_throughputs(job["job_type"], sf, workers, f"{f}.job_type")
        job_key = (job["job_type"], sf)
    require(isinstance(thr, dict) and thr, f"{f}.throughputs", thr,
            "must be an object of worker type: steps/s (or give a built-in job_type)")
    for w, v in thr.items():
        require(w in workers, f"{f}.throughputs", w, f"unknown worker type (cluster has {', '.join(workers)})")
        require(_is_num(v) and v >= 0, f"{f}.throughputs.{w}", v, "must be a non-negative number")
    weight = job.get("weight", 1.0)
    require(_is_num(weight) and weight > 0, f"{f}.weight", weight, "must be a positive number")
    R = job.get("steps_remaining", math.inf)
    require(_is_num(R, allow_inf=True) and R >= 0, f"{f}.steps_remaining", R, "must be a non-negative number")
    S = job.get("steps_total", R)
    require(_is_num(S, allow_inf=True) and S >= R, f"{f}.steps_total", S, "must be a number >= steps_remaining")
    t = job.get("time_since_arrival_s", 0.0)
    require(_is_num(t) and t >= 0, f"{f}.time_since_arrival_s", t, "must be a non-negative number")
    slo = job.get("slo_s")
    require(slo is None or (_is_num(slo) and slo > 0), f"{f}.slo_s", slo, "must be a positive number of seconds")
    ent = job.get("entity")
    check_entity(ent, entity_specs, f"{f}.entity")
    rules = parse_job_rules(job, f)
    if rules is not None:
        rules = rules.with_type_names(workers, f"{f}.allowed_types")
    for key, value in (("ids", jid), ("T", [float(thr.get(w, 0.0)) for w in workers]), ("sf", sf),
                       ("w", weight), ("R", R), ("S", S), ("t", t), ("slo", math.inf if slo is None else slo),
                       ("entity", ent), ("key", job_key), ("rules", rules)):
        cols[key].append(value)


def _builtin_throughputs(job_type: object, sf: int, workers: list[str], field: str) -> dict[str, float]:
    """Throughputs of a named job type from the built-in modeled table (gavel_ng.profiles)."""
    from .profiles import default_table

    require(isinstance(job_type, str), field, job_type, "must be a job type name")
    try:
        table = default_table(workers)
    except InputError as exc:
        raise InputError("cluster", exc.value, "job_type needs worker types the built-in profiles know "
                         f"({exc.reason})") from None
    require((job_type, sf) in table.isolated[workers[0]], field, job_type,
            f"not a built-in job type at scale factor {sf}; see `gavel-ng profiles list`")
    return {w: table.get((job_type, sf), w) for w in workers}


def _prices(raw: object, workers: list[str]):
    if raw is None:
        return None
    require(isinstance(raw, dict), "prices", raw, "must be an object of worker type: $/GPU-hour")
    for w, v in raw.items():
        require(w in workers, "prices", w, "unknown worker type")
        require(_is_num(v) and v >= 0, f"prices.{w}", v, "must be a non-negative number")
    missing = [w for w in workers if w not in raw]
    require(not missing, "prices", missing[0] if missing else None, "no price for this worker type")
    return [float(raw[w]) for w in workers]


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: object, allow_inf: bool = False) -> bool:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x)
    return ok and (allow_inf or math.isfinite(x))
