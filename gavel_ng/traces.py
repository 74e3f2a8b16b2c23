"""Job traces: the Gavel trace format, and seeded generators for continuous and static traces.

A trace is held as aligned arrays (one entry per job, job id = position) because the
simulator reads them in its hot loop; `Trace.jobs()` gives `Job` objects at boundaries.
Every generated trace is a pure function of its seed: continuous traces are drawn in
fixed-size chunks from one generator, so asking for more jobs never changes earlier ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import InputError
from .jobs import Job
from .throughputs import ThroughputTable

NUM_COLUMNS = 10
POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")   # a Pollux workload CSV's header
TRACE_FORMATS = ("gavel", "pollux")
CHUNK = 1024  # continuous traces are drawn in chunks of this many jobs (part of the seed contract)
SCALE_FACTORS = (1, 2, 4, 8)
SCALE_PROBS = (0.70, 0.10, 0.15, 0.05)
SLO_FACTORS = (1.2, 2.0, 10.0)
HIGH_PRIORITY_WEIGHT = 5.0
HIGH_PRIORITY_FRACTION = 0.2
REFERENCE_WORKER = "v100"  # durations are drawn as time on one of these (Gavel §7.1)


@dataclass
class Trace:
    """Jobs in id order. slo_s is +inf where a job has no SLO."""

    job_types: list[str] = field(default_factory=list)
    scale_factors: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    slo_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    arrivals: np.ndarray = field(default_factory=lambda: np.zeros(0))
    rules: list = field(default_factory=list)   # per job JobRules or None (gavel_ng.rules); empty: none at all

    def __len__(self) -> int:
        return len(self.job_types)

    def extend(self, other: Trace) -> None:
        self.job_types.extend(other.job_types)
        self.scale_factors = np.concatenate([self.scale_factors, other.scale_factors])
        self.weights = np.concatenate([self.weights, other.weights])
        self.steps = np.concatenate([self.steps, other.steps])
        self.slo_s = np.concatenate([self.slo_s, other.slo_s])
        self.arrivals = np.concatenate([self.arrivals, other.arrivals])
        if self.rules or other.rules:
            n = len(self) - len(other)
            self.rules = (self.rules or [None] * n) + (other.rules or [None] * len(other))

    def rules_of(self, i: int):
        """Job i's JobRules, or None."""
        return self.rules[i] if self.rules else None

    def jobs(self) -> list[Job]:
        return [Job(str(i), t, int(sf), float(w), float(s), float(s), float(a),
                    None if not math.isfinite(slo) else float(slo), getattr(self.rules_of(i), "entity", None))
                for i, (t, sf, w, s, slo, a) in enumerate(zip(self.job_types, self.scale_factors, self.weights,
                                                             self.steps, self.slo_s, self.arrivals))]

    def check_against(self, table: ThroughputTable, source: str = "trace") -> None:
        """Every (job type, scale factor) must have throughputs: name the first job that has none."""
        keys = set(table.job_keys)
        for i, (t, sf) in enumerate(zip(self.job_types, self.scale_factors)):
            if (t, int(sf)) not in keys:
                what = "unknown job type" if t not in table.job_types else f"no throughputs at scale factor {sf}"
                raise InputError(f"{source} job {i}", t, f"{what} (not in the throughput table)")


# ----- which format a trace file is in -------------------------------------------------------
def trace_format(path: str | Path) -> str:
    """'gavel' or 'pollux', from the file's first non-blank line, never its name: a user's file
    may be called anything, and a wrong guess would run the wrong jobs without a word.

    A Pollux workload CSV starts with its header (name,time,application,num_replicas,batch_size
    in any order, comma-separated); a Gavel trace line has 10 or 11 tab-separated columns."""
    path = Path(path)
    try:
        with path.open(errors="replace") as fh:
            first = next((line for line in fh if line.strip()), "")
    except OSError as exc:
        raise InputError("--trace", str(path), f"cannot read file ({exc.strerror})") from None
    if not first:
        raise InputError("--trace", str(path), "no jobs in trace (the file is empty)")
    if len(first.rstrip("\r\n").split("\t")) in (NUM_COLUMNS, NUM_COLUMNS + 1):
        return "gavel"
    header = {c.strip().strip('"').lower() for c in first.split(",")}
    if set(POLLUX_COLUMNS) <= header:
        return "pollux"
    raise InputError("--trace", str(path), f"neither a Gavel trace ({NUM_COLUMNS} tab-separated columns a line) nor "
                     f"a Pollux workload CSV (header {','.join(POLLUX_COLUMNS)}); --trace-format names it")


# ----- the Gavel trace format --------------------------------------------------------------
def read_trace(path: str | Path) -> Trace:
    """Read a Gavel trace: 10 tab-separated columns a line, and an optional 11th holding the job's
    rules as a JSON object (gavel_ng.rules, e.g. {"entity": "a", "anti_affinity": ["big"]}); errors name
    the line."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise InputError("--trace", str(path), f"cannot read file ({exc.strerror})") from None
    cols: list[list] = [[] for _ in range(6)]
    rules: list = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.rstrip("\n").split("\t")
        where = f"{path.name} line {n}"
        if len(parts) not in (NUM_COLUMNS, NUM_COLUMNS + 1):
            raise InputError(where, line[:80], f"expected {NUM_COLUMNS} tab-separated columns (and optionally "
                                               f"an 11th, the job's rules), got {len(parts)}")
        rules.append(_rules_column(parts[NUM_COLUMNS], f"{where} rules") if len(parts) > NUM_COLUMNS else None)
        job_type = parts[0].strip()
        if not job_type:
            raise InputError(where, parts[0], "empty job type")
        steps = _number(parts[5], f"{where} total_steps", positive=True)
        sf = _number(parts[6], f"{where} scale_factor", positive=True)
        if sf != int(sf):
            raise InputError(f"{where} scale_factor", parts[6], "must be an integer")
        weight = _number(parts[7], f"{where} priority_weight", positive=True)
        slo = _number(parts[8], f"{where} SLO")
        if slo <= 0 and slo != -1:
            raise InputError(f"{where} SLO", parts[8], "must be positive seconds, or -1 for none")
        arrival = _number(parts[9], f"{where} arrival_time")
        if arrival < 0:
            raise InputError(f"{where} arrival_time", parts[9], "must be >= 0")
        for c, v in zip(cols, (job_type, int(sf), weight, steps, math.inf if slo == -1 else slo, arrival)):
            c.append(v)
    if not cols[0]:
        raise InputError("--trace", str(path), "no jobs in trace")
    return Trace(cols[0], np.array(cols[1], dtype=np.int64), np.array(cols[2], float), np.array(cols[3], float),
                 np.array(cols[4], float), np.array(cols[5], float), rules if any(r is not None for r in rules) else [])


def _rules_column(text: str, where: str):
    import json

    from .rules.model import parse_job_rules

    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(where, text[:80], f"not a JSON object ({exc.msg})") from None
    if not isinstance(data, dict):
        raise InputError(where, text[:80], "must be a JSON object of rule fields")
    from .rules.model import JobRules

    for key in data:
        if key not in JobRules.FIELDS:
            raise InputError(f"{where}.{key}", data[key], f"unknown rule; known: {', '.join(JobRules.FIELDS)}")
    return parse_job_rules(data, where)


def write_trace(trace: Trace, path: str | Path) -> None:
    """Write the Gavel format. Command and working directory are placeholders we can run."""
    import json

    out = []
    for i, (t, sf, w, s, slo, a) in enumerate(zip(trace.job_types, trace.scale_factors, trace.weights, trace.steps,
                                                  trace.slo_s, trace.arrivals)):
        cmd = f"gavel-ng-workload --job-type '{t}'"
        slo_text = "-1" if not math.isfinite(slo) else repr(float(slo))
        out.append("\t".join([t, cmd, ".", "--num_steps", "0", repr(int(round(s))) if s == int(s) else repr(float(s)),
                              str(int(sf)), _num_text(w), slo_text, repr(float(a))]
                            + ([json.dumps(trace.rules[i].to_dict() if trace.rules[i] else {})]
                               if trace.rules else [])))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")


def _num_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _number(text: str, where: str, positive: bool = False) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InputError(where, text, "must be a number") from None
    if not math.isfinite(v) or (positive and v <= 0):
        raise InputError(where, text, "must be a positive finite number" if positive else "must be finite")
    return v


# ----- generators (Gavel §7.1, DESIGN.md "Simulation semantics") ---------------------------
@dataclass(frozen=True)
class TraceSpec:
    """What to draw. jobs_per_hour=None means a static trace (all jobs at t=0)."""

    jobs_per_hour: float | None = None
    multi_gpu: bool = False
    priorities: bool = False
    slos: bool = False
    seed: int = 0


def single_gpu_types(table: ThroughputTable) -> list[str]:
    keys = set(table.job_keys)
    return [t for t in table.job_types if (t, 1) in keys]


class TraceGenerator:
    """Draws jobs lazily: `ensure(n)` makes the first n jobs exist, always the same ones."""

    def __init__(self, spec: TraceSpec, table: ThroughputTable):
        if spec.jobs_per_hour is not None and not (spec.jobs_per_hour > 0 and math.isfinite(spec.jobs_per_hour)):
            raise InputError("--jobs-per-hour", spec.jobs_per_hour, "must be a positive number")
        self.spec = spec
        self.types = single_gpu_types(table)
        if not self.types:
            raise InputError("throughputs", "table", "has no single-GPU job types to draw from")
        self._keys = set(table.job_keys)
        ref = REFERENCE_WORKER if REFERENCE_WORKER in table.worker_types else None
        self._ref = {k: (table.get(k, ref) if ref else max(table.get(k, w) for w in table.worker_types))
                     for k in table.job_keys}
        self.rng = np.random.default_rng(spec.seed)
        self.trace = Trace()
        self._clock = 0.0

    def ensure(self, n: int) -> Trace:
        while len(self.trace) < n:
            self.trace.extend(self._chunk())
        return self.trace

    def _chunk(self) -> Trace:
        rng, spec, n = self.rng, self.spec, CHUNK
        gaps = rng.exponential(3600.0 / spec.jobs_per_hour, n) if spec.jobs_per_hour else np.zeros(n)
        type_idx = rng.integers(0, len(self.types), n)
        long = rng.random(n) < 0.2
        x = np.where(long, rng.uniform(3.0, 4.0, n), rng.uniform(1.5, 3.0, n))
        sf_draw = rng.choice(np.array(SCALE_FACTORS), size=n, p=SCALE_PROBS)
        high = rng.random(n) < HIGH_PRIORITY_FRACTION
        slo_factor = rng.choice(np.array(SLO_FACTORS), size=n)
        sfs = np.ones(n, dtype=np.int64)
        if spec.multi_gpu:
            sfs, type_idx = self._multi_gpu(sf_draw, type_idx)
        types = [self.types[i] for i in type_idx]
        duration = 60.0 * 10.0 ** x
        steps = np.round(duration * np.array([self._ref[(t, int(s))] for t, s in zip(types, sfs)]))
        steps = np.maximum(steps, 1.0)
        arrivals = self._clock + np.concatenate([[0.0], np.cumsum(gaps[1:])]) if len(self.trace) == 0 \
            else self._clock + np.cumsum(gaps)
        self._clock = float(arrivals[-1])
        return Trace(types, sfs, np.where(high, HIGH_PRIORITY_WEIGHT, 1.0) if spec.priorities else np.ones(n),
                     steps, slo_factor * duration if spec.slos else np.full(n, math.inf),
                     arrivals if spec.jobs_per_hour else np.zeros(n))


    def _multi_gpu(self, sf_draw: np.ndarray, type_idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gavel's order: the GPU count first (1/2/4/8 GPUs, 70/10/15/5 %), then a job type with a
        profile at that count, uniformly (its generator re-draws the job until one has; single-GPU
        jobs keep the type already drawn). Drawing the type first and keeping one GPU for types
        without a multi-GPU profile, as we did, made fewer and different multi-GPU jobs (about 22 %
        of jobs instead of 30 %) and a lighter trace at the same rate. A count no type has stays 1."""
        sfs = sf_draw.astype(np.int64)
        type_idx = type_idx.copy()
        redraw = self.rng.random(len(sfs))    # one more draw per job, after the chunk's others
        for s in SCALE_FACTORS[1:]:
            at = np.flatnonzero(sfs == s)
            able = np.array([i for i, t in enumerate(self.types) if (t, s) in self._keys], dtype=np.int64)
            if not len(able):
                sfs[at] = 1
                continue
            type_idx[at] = able[np.minimum((redraw[at] * len(able)).astype(np.int64), len(able) - 1)]
        return sfs, type_idx


def generate(spec: TraceSpec, table: ThroughputTable, num_jobs: int) -> Trace:
    """The first num_jobs jobs of the trace `spec` describes."""
    if num_jobs < 1:
        raise InputError("num_jobs", num_jobs, "must be at least 1")
    t = TraceGenerator(spec, table).ensure(num_jobs)
    return Trace(t.job_types[:num_jobs], t.scale_factors[:num_jobs], t.weights[:num_jobs], t.steps[:num_jobs],
                 t.slo_s[:num_jobs], t.arrivals[:num_jobs])
