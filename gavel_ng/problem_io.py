"""The `gavel-ng solve` JSON problem format, validated field by field."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .errors import InputError, require
from .policies.inputs import ENTITY_POLICIES, Entity, SchedulingProblem

TOP_FIELDS = {"policy", "cluster", "jobs", "entities", "prices"}
JOB_FIELDS = {"id", "throughputs", "job_type", "scale_factor", "weight", "steps_remaining", "steps_total",
              "time_since_arrival_s", "slo_s", "entity"}


def load_problem(path: str | Path) -> tuple[SchedulingProblem, str | None]:
    """Read a problem file; returns the problem and the policy it names (if any)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError("--problem", str(path), f"cannot read file ({exc.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError("--problem", str(path), f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") \
            from None
    return parse_problem(data)


def parse_problem(data: object) -> tuple[SchedulingProblem, str | None]:
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
    entity_specs = _entities(data.get("entities"))
    prices = _prices(data.get("prices"), workers)
    cols: dict[str, list] = {k: [] for k in ("ids", "T", "sf", "w", "R", "S", "t", "slo", "entity")}
    for i, job in enumerate(jobs):
        _job(job, i, workers, entity_specs, cols)
    return SchedulingProblem.build(
        cols["ids"], workers, [cluster[w] for w in workers], cols["T"], scale_factors=cols["sf"],
        weights=cols["w"], steps_remaining=cols["R"], steps_total=cols["S"], time_since_arrival=cols["t"],
        slo_s=cols["slo"], entities=cols["entity"], entity_specs=entity_specs, prices=prices,
    ), policy


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
    if thr is None and "job_type" in job:
        thr = _builtin_throughputs(job["job_type"], sf, workers, f"{f}.job_type")
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
    require(ent is None or ent in entity_specs, f"{f}.entity", ent, "not declared under 'entities'")
    for key, value in (("ids", jid), ("T", [float(thr.get(w, 0.0)) for w in workers]), ("sf", sf),
                       ("w", weight), ("R", R), ("S", S), ("t", t), ("slo", math.inf if slo is None else slo),
                       ("entity", ent)):
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


def _entities(raw: object) -> dict[str, Entity]:
    if raw is None:
        return {}
    require(isinstance(raw, dict), "entities", raw, "must be an object of name: {weight, policy}")
    out = {}
    for name, spec in raw.items():
        require(isinstance(spec, dict), f"entities.{name}", spec, "must be an object")
        w = spec.get("weight", 1.0)
        require(_is_num(w) and w > 0, f"entities.{name}.weight", w, "must be a positive number")
        pol = spec.get("policy", "fairness")
        require(pol in ENTITY_POLICIES, f"entities.{name}.policy", pol, f"must be one of {', '.join(ENTITY_POLICIES)}")
        out[name] = Entity(float(w), pol)
    return out


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
