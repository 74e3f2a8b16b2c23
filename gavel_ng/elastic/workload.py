"""The ``pollux`` workload and the Pollux artifact's workload CSVs as gavel_ng traces.

**Workload.** Pollux (OSDI'21 §5.1) samples 160 jobs from the busiest 8 hours of
Microsoft's Philly trace and gives each a training task of Table 1 in the share of its
size class: cifar10 36 %, ncf 36 %, deepspeech2 10 %, bert 10 %, yolov3 6 %, imagenet
2 %. `pollux_workload` draws that mix with Poisson arrivals at the same rate (160 jobs /
8 h = 20 per hour; the first job at t = 0, as gavel_ng's other generators) and, for the
fixed-batch baselines, gives each job a tuned GPU count and batch size the way the
artifact did: among 1, 2, 4, 6, 8, 12, 16, 24, 32, 48 GPUs on 4-GPU T4 servers (their
testbed), each with its best batch (fastest whole training run among ``M0 * 2^k`` and
the maximum batch), a GPU count is valid when its training time is under 12 h and its
speedup over one GPU is 50-80 % of linear; one valid count is drawn uniformly. Where no
count is valid the artifact falls back to one GPU; here the 12-hour cap is dropped first
(our FP32 model puts ImageNet at 235 T4-hours: over a 10 Gb/s network no 50-80 % count
finishes it in 12 h, and a one-GPU ImageNet job would run for ten days), and only then
one GPU is used. Servers
are linked at 50 Gb/s by default (g4dn.12xlarge: "up to 50 Gigabit").

**CSV.** The artifact's workload files (``simulator/workloads*/workload-N.csv``) have the
columns ``name,time,application,num_replicas,batch_size``: arrival second, task, and
the tuned GPU count and total batch size. `read_pollux_csv` reads them; bad rows raise
InputError naming the file, line, column and value. `write_pollux_csv` writes the same
format.

**Jobs.** Both give an `ElasticTrace`: each job's `AdaptiveSpec` (its family's M0,
maximum batch, LR rule, ...), its total work in M0-equivalent examples, and a plain
`Trace` with the fixed-job fields, so that every existing policy runs it unchanged: the
job type is the Gavel job type of the family's profile whose per-GPU batch is nearest
(in log scale) to the tuned per-GPU batch, in profile examples; the scale factor is the
tuned GPU count; the steps are what makes the job take, on the reference GPU type (T4)
under the built-in table, as long as the goodput model says the whole run takes at the
tuned configuration (``fixed_seconds``: ``work x mean over training of 1/E(M)``
examples at the configuration's throughput), i.e. ``fixed_seconds x`` the job type's
modeled steps/s on that many reference GPUs, as Gavel's traces define steps by a
duration on a reference GPU. On other types the duration then follows the built-in
table. Per-GPU batch and accumulation follow from the tuned batch and the reference
GPU's memory (``s`` = fewest accumulation steps that fit). GPU counts that the built-in
table lacks (6, 12, 16, ...) are added by `fixed_job_table` from the same model.

**Profile sets.** Everything above reads the job's profile set (``profiles=``, recorded in
each `AdaptiveSpec` and in `ElasticTrace.profiles`), so that fixed and adaptive jobs see the
same speeds. Under a measured set (``sia``) the tuned configurations, per-GPU batch and
fixed seconds come from the measured parameters and noise scale, and a fixed job's type is
its own, ``"<application> <set> (batch size <M>)"`` (the Gavel job types model other
networks); a step is one optimizer step at total batch M, and `fixed_job_table` gives its
steps/s on every type from the measured model (on a type with less memory the same batch
takes more accumulation steps; 0 where it cannot fit).
"""

from __future__ import annotations

import csv
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from gavel_ng.cluster import Cluster
from gavel_ng.errors import InputError
from gavel_ng.jobs import Job
from gavel_ng.profiles import default_table, get_gpu, load_workload_profiles
from gavel_ng.profiles.model import load_constants, throughput
from gavel_ng.throughputs import UNCONSOLIDATED, ThroughputTable
from gavel_ng.traces import POLLUX_COLUMNS, Trace

from .efficiency import AdaptiveSpec, seconds_to_progress
from .families import FAMILIES, ElasticFamily, get_family
from .goodput import DEFAULT_NETWORK_GBPS, throughput_params
from .profile_sets import MODELED, check_profiles, measured_set, phi_curve, restart_seconds

log = logging.getLogger(__name__)

POLLUX_APPLICATIONS = ("cifar10", "imagenet", "deepspeech2", "bert", "yolov3", "ncf")
CSV_COLUMNS = POLLUX_COLUMNS
POLLUX_JOBS = 160
POLLUX_HOURS = 8.0
REFERENCE_WORKER = "t4"  # Pollux's testbed: AWS g4dn.12xlarge, 4 T4 GPUs per server
POLLUX_GPUS_PER_SERVER = 4
TUNED_GPU_COUNTS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48)
TUNED_EFFICIENCY = (0.5, 0.8)
TUNED_MAX_HOURS = 12.0
POLLUX_NETWORK_GBPS = 50.0


@dataclass
class ElasticTrace:
    """Jobs in id order (id = position): the fixed-job `Trace` plus each job's adaptivity."""

    trace: Trace
    names: list[str] = field(default_factory=list)
    applications: list[str] = field(default_factory=list)
    specs: list[AdaptiveSpec] = field(default_factory=list)
    work: np.ndarray = field(default_factory=lambda: np.zeros(0))  # M0-equivalent examples
    batch_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # tuned total batch
    local_batches: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # tuned per-GPU m
    accum_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # tuned s
    fixed_seconds: np.ndarray = field(default_factory=lambda: np.zeros(0))  # tuned run on the reference GPU
    profiles: str = MODELED  # the profile set every job's speeds come from

    def __len__(self) -> int:
        return len(self.trace)

    @property
    def gpus(self) -> np.ndarray:
        """Tuned GPU count of each job (the fixed jobs' scale factor)."""
        return self.trace.scale_factors

    def jobs(self) -> list[Job]:
        """The fixed-job view as `Job` objects (aligned with `specs`)."""
        return self.trace.jobs()

    @property
    def restart_seconds(self) -> np.ndarray:
        """Each job's restart delay under the profile set (its application's; nan where the set has none:
        the run's flat delays apply)."""
        out = [restart_seconds(self.profiles, a) for a in self.applications]
        return np.array([math.nan if v is None else v for v in out], float)


# ----- building jobs ---------------------------------------------------------------------
@cache
def _profile_batches(profile_family: str) -> tuple[tuple[int, str], ...]:
    return tuple(sorted((p.batch_size, name) for name, p in load_workload_profiles().items()
                        if p.family == profile_family))


def _fixed_config(fam: ElasticFamily, gpus: int, batch: int, worker_type: str,
                  network_gbps: float, profiles: str = MODELED) -> tuple[int, int]:
    """(m, s) a fixed job with this total batch runs at: fewest accumulation steps that fit."""
    local = -(-batch // gpus)
    cap = throughput_params(fam, worker_type, network_gbps, profiles=profiles).max_local_batch
    s = max(0, -(-local // cap) - 1) if fam.accumulation and cap >= 1 else 0
    return -(-local // (s + 1)), s


def _fixed_seconds(fam: ElasticFamily, gpus: int, m: int, s: int, worker_type: str, gpus_per_server: int,
                   network_gbps: float, profiles: str = MODELED) -> float:
    """Seconds the whole run takes at a fixed (K, m, s) on worker_type, packed onto few servers."""
    params = throughput_params(fam, worker_type, network_gbps, profiles=profiles)
    x = float(params.throughput(m, s, gpus, -(-gpus // gpus_per_server)))
    batch = gpus * m * (s + 1)
    return float(seconds_to_progress(phi_curve(fam.spec(profiles=profiles), batch), fam.init_batch, batch, x,
                                     fam.work, 0.0, 1.0))


def measured_job_type(app: str, batch: int, profiles: str) -> str:
    """A fixed job's type under a measured set (module docstring)."""
    return f"{app} {profiles} (batch size {int(batch)})"


def _measured_rate(fam: ElasticFamily, gpus: int, batch: int, worker_type: str, servers: int,
                   profiles: str) -> float:
    """Optimizer steps/s of a fixed job (total batch, K GPUs on `servers` servers) under a measured set; 0
    where the batch cannot fit."""
    params = throughput_params(fam, worker_type, profiles=profiles)
    m, s = _fixed_config(fam, gpus, batch, worker_type, DEFAULT_NETWORK_GBPS, profiles)
    if not 1 <= m <= params.max_local_batch:
        return 0.0
    return float(1.0 / params.t_iter(m, s, gpus, servers))


def _job_fields(fam: ElasticFamily, gpus: int, batch: int, worker_type: str, gpus_per_server: int,
                network_gbps: float, profiles: str = MODELED) -> tuple[str, float, int, int, float]:
    """(job type, steps, m, s, seconds on worker_type) of the fixed job (module docstring)."""
    m, s = _fixed_config(fam, gpus, batch, worker_type, network_gbps, profiles)
    seconds = _fixed_seconds(fam, gpus, m, s, worker_type, gpus_per_server, network_gbps, profiles)
    if profiles != MODELED:
        job_type = measured_job_type(fam.name, batch, profiles)
        rate = _measured_rate(fam, gpus, batch, worker_type, -(-gpus // gpus_per_server), profiles)
    else:
        want = m * fam.work_scale
        _, job_type = min(_profile_batches(fam.profile_family), key=lambda bt: abs(math.log(bt[0] / want)))
        rate, _ = throughput(load_workload_profiles()[job_type], get_gpu(worker_type), gpus,
                             gpus <= gpus_per_server, network_gbps * 1e9 / 8, load_constants())
    steps = max(1.0, round(seconds * rate)) if rate > 0 and math.isfinite(seconds) else math.inf
    if not math.isfinite(steps):
        raise InputError("batch_size", batch, f"{fam.name} on {gpus} {worker_type} GPU(s) cannot run "
                         f"(per-GPU batch {m} does not fit)")
    return job_type, steps, m, s, seconds


def _build(names: Sequence[str], times: Sequence[float], apps: Sequence[str], gpus: Sequence[int],
           batches: Sequence[int], worker_type: str, gpus_per_server: int, network_gbps: float, *,
           profiles: str = MODELED) -> ElasticTrace:
    check_profiles(profiles)
    fields = [_job_fields(FAMILIES[app], int(n), int(b), worker_type, gpus_per_server, network_gbps, profiles)
              for app, n, b in zip(apps, gpus, batches)]
    count = len(names)
    types = [f[0] for f in fields]
    trace = Trace(types, np.asarray(gpus, np.int64), np.ones(count), np.array([f[1] for f in fields], float),
                  np.full(count, math.inf), np.asarray(times, float))
    return ElasticTrace(trace, list(names), list(apps), [FAMILIES[a].spec(profiles=profiles) for a in apps],
                        np.array([FAMILIES[a].work for a in apps], float), np.asarray(batches, np.int64),
                        np.array([f[2] for f in fields], np.int64), np.array([f[3] for f in fields], np.int64),
                        np.array([f[4] for f in fields], float), profiles)


# ----- tuned configurations (the fixed-batch baselines' jobs) -----------------------------
def tuned_configurations(application: str, worker_type: str = REFERENCE_WORKER,
                         gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                         network_gbps: float = POLLUX_NETWORK_GBPS, *,
                         profiles: str = MODELED) -> list[tuple[int, int, float]]:
    """Valid (GPU count, total batch, training seconds) for a well-tuned fixed job (module docstring)."""
    check_profiles(profiles)
    worker = get_gpu(worker_type).name if profiles == MODELED else str(worker_type).lower()
    return list(_tuned(get_family(application).name, worker, int(gpus_per_server), float(network_gbps), profiles))


@cache
def _tuned(app: str, worker_type: str, gpus_per_server: int,
           network_gbps: float, profiles: str = MODELED) -> tuple[tuple[int, int, float], ...]:
    fam = FAMILIES[app]
    params = throughput_params(fam, worker_type, network_gbps, profiles=profiles)
    batches = sorted({*(fam.init_batch * 2 ** k for k in range(32) if fam.init_batch * 2 ** k <= fam.max_batch),
                      fam.max_batch})
    best: list[tuple[int, int, float]] = []
    for n in TUNED_GPU_COUNTS:
        options = []
        for batch in batches:
            if batch < n * fam.min_local_batch:
                continue
            m, s = _fixed_config(fam, n, batch, worker_type, network_gbps, profiles)
            if m > params.max_local_batch:
                continue
            options.append((_fixed_seconds(fam, n, m, s, worker_type, gpus_per_server, network_gbps, profiles),
                            batch))
        if options:
            seconds, batch = min(options)
            best.append((n, batch, float(seconds)))
    if not best or best[0][0] != 1:
        raise InputError("application", app, f"cannot run on one {worker_type} GPU")
    base = best[0][2]
    lo, hi = TUNED_EFFICIENCY
    scaling = [c for c in best[1:] if lo < base / c[2] / c[0] < hi]
    valid = [c for c in scaling if c[2] < TUNED_MAX_HOURS * 3600]
    return tuple(valid or scaling or best[:1])


# ----- the generated workload ------------------------------------------------------------
def pollux_workload(num_jobs: int = POLLUX_JOBS, hours: float = POLLUX_HOURS, seed: int = 0,
                    worker_type: str = REFERENCE_WORKER, gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                    network_gbps: float = POLLUX_NETWORK_GBPS, *, profiles: str = MODELED) -> ElasticTrace:
    """Pollux's synthetic workload: Table 1's mix, Poisson arrivals at num_jobs / hours; the tuned
    configurations and fixed-job fields from the profile set `profiles`."""
    check_profiles(profiles)
    if not (isinstance(num_jobs, int) and num_jobs >= 1):
        raise InputError("num_jobs", num_jobs, "must be an integer >= 1")
    if not (isinstance(hours, (int, float)) and math.isfinite(hours) and hours > 0):
        raise InputError("hours", hours, "must be a positive number")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(3600.0 * hours / num_jobs, num_jobs)
    times = np.concatenate([[0.0], np.cumsum(gaps[1:])])
    shares = np.array([FAMILIES[a].fraction for a in POLLUX_APPLICATIONS])
    drawn = rng.choice(len(POLLUX_APPLICATIONS), size=num_jobs, p=shares / shares.sum())
    apps = [POLLUX_APPLICATIONS[i] for i in drawn]
    picks = rng.random(num_jobs)
    gpus, batches = [], []
    for app, u in zip(apps, picks):
        configs = tuned_configurations(app, worker_type, gpus_per_server, network_gbps, profiles=profiles)
        n, b, _ = configs[min(int(u * len(configs)), len(configs) - 1)]
        gpus.append(n)
        batches.append(b)
    names = [f"{a}-{i}" for i, a in enumerate(apps)]
    return _build(names, np.round(times), apps, gpus, batches, worker_type, gpus_per_server, network_gbps,
                  profiles=profiles)


def cap_tuned_gpus(etrace: ElasticTrace, max_gpus: int, worker_type: str = REFERENCE_WORKER,
                   gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                   network_gbps: float = POLLUX_NETWORK_GBPS) -> ElasticTrace:
    """The same jobs with no tuned GPU count above ``max_gpus``.

    A fixed job runs on GPUs of one type, so on a cluster whose largest type has fewer
    GPUs than a job's tuned count (48 on 4-GPU T4 servers; a 64-GPU cluster of three
    types) it could never start. Each wider job gets the widest valid tuned
    configuration of its task that fits (`tuned_configurations`), else the widest count
    of `TUNED_GPU_COUNTS` that fits at its own batch; the fixed-job fields are rebuilt,
    adaptivity and work are kept. Jobs that fit are unchanged.
    """
    if not (isinstance(max_gpus, (int, np.integer)) and max_gpus >= 1):
        raise InputError("max_gpus", max_gpus, "must be an integer >= 1")
    gpus = etrace.gpus.astype(np.int64).copy()
    batches = etrace.batch_sizes.astype(np.int64).copy()
    wide = np.flatnonzero(gpus > max_gpus)
    if not len(wide):
        return etrace
    for m in wide.tolist():
        app = etrace.applications[m]
        fits = [c for c in tuned_configurations(app, worker_type, gpus_per_server, network_gbps,
                                                profiles=etrace.profiles) if c[0] <= max_gpus]
        if fits:
            gpus[m], batches[m] = fits[-1][0], fits[-1][1]
        else:
            gpus[m] = max(c for c in TUNED_GPU_COUNTS if c <= max_gpus)
            batches[m] = max(int(batches[m]), int(gpus[m]))
    out = _build(etrace.names, etrace.trace.arrivals, etrace.applications, gpus, batches, worker_type,
                 gpus_per_server, network_gbps, profiles=etrace.profiles)
    out.specs = list(etrace.specs)
    out.work = etrace.work.copy()
    return out


def fit_to_cluster(etrace: ElasticTrace, cluster: Cluster) -> ElasticTrace:
    """The workload with tuned GPU counts capped at the cluster's largest worker type, so that every
    policy sees the same jobs (a fixed job wider than every type could never start)."""
    widest = int(cluster.capacity().max())
    if int(etrace.gpus.max()) <= widest:
        return etrace
    log.info("tuned GPU counts above %d (the largest worker type) capped for %d job(s)", widest,
             int((etrace.gpus > widest).sum()))
    return cap_tuned_gpus(etrace, widest)


DRAWN_WORKLOADS: dict[str, Callable[..., ElasticTrace]] = {}
"""Generators `load_workload` knows beside pollux, by name: (jobs, hours, seed, profiles=) -> ElasticTrace,
None meaning the workload's own size. `sia_workloads` registers Sia's mixes (it builds on this module,
so this one cannot import it; the package imports both)."""


def load_workload(cluster: Cluster, trace: str | None = None, jobs: int | None = None, hours: float | None = None,
                  seed: int = 0, workload: str = "pollux", *, profiles: str = MODELED) -> ElasticTrace:
    """The workload `simulate --workload NAME` / `--trace FILE.csv` (and a sweep point) runs, fit to
    `cluster`: one place, so that both give the same jobs. `workload` is pollux or a name of
    `sia_workloads.SIA_WORKLOADS`; `jobs` and `hours` default to the workload's own; `profiles` is
    the profile set."""
    check_profiles(profiles, "--elastic-profiles")
    if trace is not None:
        return fit_to_cluster(read_pollux_csv(trace, profiles=profiles), cluster)
    if jobs is not None and jobs < 1:
        raise InputError("--jobs", jobs, "must be at least 1")
    if hours is not None and not hours > 0:
        raise InputError("--hours", hours, "must be positive")
    if workload != "pollux":
        if workload not in DRAWN_WORKLOADS:
            raise InputError("--workload", workload, f"unknown; known: pollux, {', '.join(DRAWN_WORKLOADS)}")
        return fit_to_cluster(DRAWN_WORKLOADS[workload](jobs, hours, seed, profiles=profiles), cluster)
    return fit_to_cluster(pollux_workload(num_jobs=POLLUX_JOBS if jobs is None else jobs,
                                          hours=POLLUX_HOURS if hours is None else hours, seed=seed,
                                          profiles=profiles), cluster)


# ----- the artifact's CSV format ---------------------------------------------------------
def read_pollux_csv(path: str | Path, worker_type: str = REFERENCE_WORKER,
                    gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                    network_gbps: float = POLLUX_NETWORK_GBPS, *, profiles: str = MODELED) -> ElasticTrace:
    """Read a Pollux workload CSV; jobs are ordered by arrival (stable), names kept; speeds from the
    profile set `profiles`."""
    check_profiles(profiles)
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError("--trace", str(path), f"cannot read file ({exc.strerror})") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows or not any(c.strip() for c in rows[0]):
        raise InputError(f"{path.name} line 1", "", f"expected the header {','.join(CSV_COLUMNS)}")
    header = [c.strip() for c in rows[0]]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path.name} line 1", ",".join(rows[0]),
                         f"missing column(s) {', '.join(missing)}; expected {','.join(CSV_COLUMNS)}")
    col = {c: header.index(c) for c in CSV_COLUMNS}
    names: list[str] = []
    times: list[float] = []
    apps: list[str] = []
    gpus: list[int] = []
    batches: list[int] = []
    seen: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(f"{path.name} line {line}", ",".join(row),
                             f"expected {len(header)} comma-separated columns, got {len(row)}")

        def cell(name: str, row: list[str] = row, line: int = line) -> tuple[str, str]:
            return row[col[name]].strip(), f"{path.name} line {line} column {name}"

        name, where = cell("name")
        if not name:
            raise InputError(where, name, "empty job name")
        if name in seen:
            raise InputError(where, name, f"duplicate job name (first on line {seen[name]})")
        seen[name] = line
        text_t, where = cell("time")
        t = _float(text_t, where)
        if not (math.isfinite(t) and t >= 0):
            raise InputError(where, text_t, "must be a finite number of seconds >= 0")
        app, where = cell("application")
        if app not in POLLUX_APPLICATIONS:
            raise InputError(where, app, f"unknown application; expected one of {', '.join(POLLUX_APPLICATIONS)}")
        fam = FAMILIES[app]
        text_n, where = cell("num_replicas")
        n = _int(text_n, where, 1)
        text_b, where = cell("batch_size")
        b = _int(text_b, where, 1)
        if b < n:
            raise InputError(where, text_b, f"smaller than num_replicas ({n}): less than one example per GPU")
        if b > fam.max_batch:
            raise InputError(where, text_b, f"above {app}'s maximum batch size {fam.max_batch}")
        names.append(name)
        times.append(t)
        apps.append(app)
        gpus.append(n)
        batches.append(b)
    if not names:
        raise InputError("--trace", str(path), "no jobs in workload")
    order = sorted(range(len(names)), key=lambda i: times[i])
    pick = [[seq[i] for i in order] for seq in (names, times, apps, gpus, batches)]
    return _build(*pick, worker_type=worker_type, gpus_per_server=gpus_per_server,  # type: ignore[arg-type]
                  network_gbps=network_gbps, profiles=profiles)


def write_pollux_csv(etrace: ElasticTrace, path: str | Path) -> None:
    """Write the artifact's format (what `read_pollux_csv` reads back)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(CSV_COLUMNS)
        for name, t, app, n, b in zip(etrace.names, etrace.trace.arrivals, etrace.applications,
                                      etrace.trace.scale_factors, etrace.batch_sizes):
            out.writerow([name, int(t) if float(t).is_integer() else repr(float(t)), app, int(n), int(b)])


def _float(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(where, text, "must be a number") from None


def _int(text: str, where: str, minimum: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise InputError(where, text, f"must be an integer >= {minimum}") from None
    if v < minimum:
        raise InputError(where, text, f"must be an integer >= {minimum}")
    return v


# ----- a throughput table for the fixed jobs ---------------------------------------------
def fixed_job_table(etrace: ElasticTrace, gpus: list[str] | None = None,
                    network_gbps: float = DEFAULT_NETWORK_GBPS, *, profiles: str | None = None) -> ThroughputTable:
    """Steps/s of the trace's fixed jobs on these GPU types, from the trace's profile set.

    ``modeled``: the built-in table plus (job type, scale factor) rows for the trace's other
    GPU counts, from the same performance model (consolidated and ``_unconsolidated``; no
    pair entries). A measured set: only the trace's own job types (module docstring),
    consolidated on one server and unconsolidated across servers; ``gpus`` defaults to the
    set's measured types, and ``network_gbps`` does not apply. ``profiles`` (default: the
    trace's) must be the set the trace was built with: its job types depend on it.
    """
    profiles = etrace.profiles if profiles is None else check_profiles(profiles)
    if profiles != etrace.profiles:
        raise InputError("profiles", profiles, f"the trace was built with the {etrace.profiles!r} profile set")
    keys = dict.fromkeys((t, int(sf)) for t, sf in zip(etrace.trace.job_types, etrace.trace.scale_factors))
    if profiles != MODELED:
        return _measured_table(etrace, keys, gpus, profiles)
    table = default_table(gpus, network_gbps=network_gbps)
    c = load_constants()
    profiles_by_type = load_workload_profiles()
    net = network_gbps * 1e9 / 8
    for worker in table.worker_types:
        spec = get_gpu(worker)
        for key in keys:
            if key in table.isolated[worker]:
                continue
            p = profiles_by_type[key[0]]
            table.isolated[worker][key] = throughput(p, spec, key[1], True, net, c)[0]
            table.isolated.setdefault(worker + UNCONSOLIDATED, {})[key] = throughput(p, spec, key[1], False, net, c)[0]
    return table


def _measured_table(etrace: ElasticTrace, keys: dict, gpus: list[str] | None, profiles: str) -> ThroughputTable:
    if gpus is None:
        gpus = sorted({gpu for _, gpu in measured_set(profiles).entries})
    what = {t: (app, int(b)) for t, app, b in zip(etrace.trace.job_types, etrace.applications, etrace.batch_sizes)}
    table = ThroughputTable()
    for worker in (str(g).lower() for g in gpus):
        here, spread = table.isolated.setdefault(worker, {}), table.isolated.setdefault(worker + UNCONSOLIDATED, {})
        for job_type, k in keys:
            app, batch = what[job_type]
            fam = FAMILIES[app]
            here[(job_type, k)] = _measured_rate(fam, k, batch, worker, 1, profiles)
            spread[(job_type, k)] = _measured_rate(fam, k, batch, worker, k, profiles)
    return table
