"""Workloads in the style of Sia's evaluation (SOSP'23 §4.1): ``sia-philly``, ``sia-helios``,
``sia-newtrace``.

Sia samples its jobs from three production traces that are not all public, then maps each
job by its total GPU time to a training task of its Table 2: Small (< 1 GPU-hour) ->
cifar10, Medium (1-10) -> bert or deepspeech2, Large (10-100) -> yolov3, Extra-large
(> 100) -> imagenet (no ncf). What the paper states, these generators keep:

* Philly and Helios: 160 jobs in 8 hours (the traces' 8 busiest hours, 20 jobs/h on
  average). Here: Poisson arrivals conditioned on the count, i.e. the 160 arrival times
  are uniform over the window (sorted, shifted so that the first job arrives at t = 0).
* newTrace: 960 jobs in 48 hours (20 jobs/h on average), diurnal, with bursts from
  job-submission scripts (hyper-parameter tuning); rates range from about 5 to 100 jobs/h.
* Helios jobs request more GPUs and run longer than Philly's, so its load is higher.

What the paper leaves open is assumed, as follows.

* Size-class shares. Philly: Pollux's Philly-derived shares (families.py: S 72 %, M 20 %,
  L 6 %, XL 2 %), with Pollux's two S tasks (cifar10, ncf) folded into cifar10 as Sia's
  Table 2 has no ncf. Helios: S 60 %, M 26 %, L 11 %, XL 3 %: every class above S gains
  30-80 % of its Philly share ("run longer"). The shift is kept moderate because Sia's
  Table 3 shows Helios only slightly heavier than Philly for Sia and Pollux (0.7 vs 0.6 h,
  1.0 vs 1.0 h); at seed 0 the tuned jobs (the wider Helios counts included) add up to
  1.6x Philly's T4 GPU-hours, an XL job being about 400 of them. newTrace: Philly's shares
  for the jobs outside bursts. The counts per class are the largest-remainder rounding of share x jobs (not a
  draw), so a seed changes which jobs arrive when, not how many of each class there are.
* Medium jobs are bert or deepspeech2 with equal probability (Pollux: 10 % each).
* GPU count and batch: each job gets a tuned configuration (Sia's TunedJobs, as Pollux's
  artifact: 50-80 % of linear scaling over one GPU at the best batch;
  `workload.tuned_configurations` on the reference 4-GPU T4 servers). Philly and newTrace
  draw one valid configuration uniformly (as `pollux_workload`). Helios favours the wide
  ones ("request more GPUs"): index ``floor(n x u^0.5)`` of the n valid counts in
  increasing order, u uniform, so the upper half is drawn 75 % of the time.
* newTrace's arrival process, hour by hour from midnight: 75 % of the jobs follow a
  diurnal rate ``1 + (2/3) cos(2 pi (h + 0.5 - 14) / 24)`` (peak at 14:00, trough at 02:00,
  5 to 25 jobs/h at 960 jobs in 48 h), drawn as a multinomial over hours, uniform within
  an hour. The other 25 % come in bursts, two a day (``round(hours / 12)``, at least one):
  each in a distinct daytime hour (drawn in proportion to the diurnal rate), its jobs
  uniform over 20 minutes, its size a multinomial share with weights uniform in
  [0.5, 1.5] (about 60 jobs). A burst is one tuning sweep: all its jobs are the same task
  (S or M, 72 : 20: sweeps are many short trials) at the same tuned configuration.

Every generator is deterministic in its seed. Jobs are numbered by arrival; names are
``TASK-i``. Tuned GPU counts above the cluster's largest worker type are capped by
`workload.fit_to_cluster` when the workload is loaded for a cluster (`load_workload`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import MappingProxyType

import numpy as np

from gavel_ng.errors import InputError

from .families import FAMILIES
from .profile_sets import MODELED
from .workload import (
    DRAWN_WORKLOADS,
    POLLUX_GPUS_PER_SERVER,
    POLLUX_HOURS,
    POLLUX_JOBS,
    POLLUX_NETWORK_GBPS,
    REFERENCE_WORKER,
    ElasticTrace,
    _build,
    tuned_configurations,
)

SIA_APPLICATIONS = ("cifar10", "bert", "deepspeech2", "yolov3", "imagenet")
"""Sia's Table 2 (the XXL GPT job is only used for hybrid parallelism)."""
CLASSES = ("S", "M", "L", "XL")
PHILLY_SHARES = MappingProxyType({"S": 0.72, "M": 0.20, "L": 0.06, "XL": 0.02})
HELIOS_SHARES = MappingProxyType({"S": 0.60, "M": 0.26, "L": 0.11, "XL": 0.03})
HELIOS_WIDE_EXPONENT = 0.5        # u^0.5: the upper half of the valid GPU counts 75 % of the time
BURST_FRACTION = 0.25             # newTrace: share of jobs submitted in bursts
BURST_SECONDS = 1200.0            # one burst spans 20 minutes
BURST_HOURS_APART = 12.0          # two bursts a day
DIURNAL_AMPLITUDE = 2.0 / 3.0     # trough/peak = 1/5 of the diurnal rate
DIURNAL_PEAK_HOUR = 14.0


def _class_counts(n: int, shares: Mapping[str, float]) -> np.ndarray:
    """Jobs per size class: largest-remainder rounding of n x share (sums to n)."""
    want = n * np.array([shares[c] for c in CLASSES]) / sum(shares.values())
    counts = np.floor(want).astype(np.int64)
    order = np.argsort(-(want - counts), kind="stable")
    counts[order[: n - int(counts.sum())]] += 1
    return counts


def _by_class() -> dict[str, tuple[str, ...]]:
    """Sia's tasks per size class, from each family's declared class."""
    return {c: tuple(a for a in SIA_APPLICATIONS if FAMILIES[a].size_class == c) for c in CLASSES}


def _applications(rng: np.random.Generator, counts: np.ndarray) -> list[str]:
    """`counts[c]` jobs of each class in random order, each a task of its class drawn uniformly."""
    tasks = _by_class()
    classes = rng.permutation(np.repeat(np.arange(len(CLASSES)), counts))
    return [tasks[CLASSES[c]][int(rng.integers(len(tasks[CLASSES[c]])))] for c in classes]


def _pick(configs: Sequence[tuple[int, int, float]], u: float, exponent: float) -> tuple[int, int]:
    n, b, _ = configs[min(int(len(configs) * u ** exponent), len(configs) - 1)]
    return n, b


def _uniform_arrivals(rng: np.random.Generator, n: int, hours: float) -> np.ndarray:
    """n Poisson arrivals conditioned on their count: uniform over the window, sorted."""
    return np.sort(rng.uniform(0.0, 3600.0 * hours, n))


def diurnal_rate(hours: float) -> np.ndarray:
    """Relative arrival rate of each (possibly partial last) hour from midnight, newTrace's base."""
    edges = np.minimum(np.arange(math.ceil(hours) + 1, dtype=float), hours)
    width = np.diff(edges)
    mid = edges[:-1] + width / 2
    return width * (1.0 + DIURNAL_AMPLITUDE * np.cos(2 * math.pi * (mid - DIURNAL_PEAK_HOUR) / 24.0))


def _check(num_jobs: int, hours: float) -> None:
    if not (isinstance(num_jobs, (int, np.integer)) and not isinstance(num_jobs, bool) and num_jobs >= 1):
        raise InputError("num_jobs", num_jobs, "must be an integer >= 1")
    if not (isinstance(hours, (int, float)) and math.isfinite(hours) and hours > 0):
        raise InputError("hours", hours, "must be a positive number")


def _finish(times: np.ndarray, apps: list[str], gpus: list[int], batches: list[int], worker_type: str,
            gpus_per_server: int, network_gbps: float, profiles: str) -> ElasticTrace:
    """Jobs ordered by arrival, the first at t = 0, built as `pollux_workload` builds its jobs."""
    order = np.argsort(times, kind="stable")
    t = np.round(times[order] - times[order[0]])
    apps = [apps[i] for i in order]
    return _build(names=[f"{a}-{i}" for i, a in enumerate(apps)], times=t, apps=apps,
                  gpus=[int(gpus[i]) for i in order], batches=[int(batches[i]) for i in order],
                  worker_type=worker_type, gpus_per_server=gpus_per_server, network_gbps=network_gbps,
                  profiles=profiles)


def _sampled_window(shares: Mapping[str, float], exponent: float, num_jobs: int, hours: float, seed: int,
                    worker_type: str, gpus_per_server: int, network_gbps: float, profiles: str) -> ElasticTrace:
    """Philly and Helios: a busy window at a steady rate, the class mix and GPU-count bias given."""
    _check(num_jobs, hours)
    rng = np.random.default_rng(seed)
    times = _uniform_arrivals(rng, num_jobs, hours)
    apps = _applications(rng, _class_counts(num_jobs, shares))
    picks = [_pick(tuned_configurations(a, worker_type=worker_type, gpus_per_server=gpus_per_server,
                                        network_gbps=network_gbps, profiles=profiles), float(u), exponent)
             for a, u in zip(apps, rng.random(num_jobs))]
    return _finish(times, apps, [p[0] for p in picks], [p[1] for p in picks], worker_type, gpus_per_server,
                   network_gbps, profiles)


def philly_like(num_jobs: int = 160, hours: float = 8.0, seed: int = 0, worker_type: str = REFERENCE_WORKER,
                gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                network_gbps: float = POLLUX_NETWORK_GBPS, *,
                profiles: str = MODELED) -> ElasticTrace:
    """Sia's Philly traces: 160 jobs over a busy 8 hours, Pollux's Philly-derived class mix."""
    return _sampled_window(PHILLY_SHARES, 1.0, num_jobs, hours, seed, worker_type, gpus_per_server, network_gbps,
                           profiles)


def helios_like(num_jobs: int = 160, hours: float = 8.0, seed: int = 0, worker_type: str = REFERENCE_WORKER,
                gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                network_gbps: float = POLLUX_NETWORK_GBPS, *,
                profiles: str = MODELED) -> ElasticTrace:
    """Sia's Helios traces: Philly's shape with longer jobs (more L/XL) that ask for more GPUs."""
    return _sampled_window(HELIOS_SHARES, HELIOS_WIDE_EXPONENT, num_jobs, hours, seed, worker_type,
                           gpus_per_server, network_gbps, profiles)


def newtrace_like(num_jobs: int = 960, hours: float = 48.0, seed: int = 0, worker_type: str = REFERENCE_WORKER,
                  gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                  network_gbps: float = POLLUX_NETWORK_GBPS, *,
                  profiles: str = MODELED) -> ElasticTrace:
    """Sia's newTrace: a diurnal base rate plus bursts of identical tuning jobs (module docstring)."""
    _check(num_jobs, hours)
    rng = np.random.default_rng(seed)

    def tune(app: str) -> list[tuple[int, int, float]]:
        return tuned_configurations(app, worker_type=worker_type, gpus_per_server=gpus_per_server,
                                    network_gbps=network_gbps, profiles=profiles)

    n_burst = int(round(BURST_FRACTION * num_jobs))
    n_base = num_jobs - n_burst
    rate = diurnal_rate(hours)
    hour = rng.choice(len(rate), size=n_base, p=rate / rate.sum())
    times = [np.minimum(hour + rng.random(n_base), hours) * 3600.0]
    apps = _applications(rng, _class_counts(n_base, PHILLY_SHARES))
    picks = [_pick(tune(a), float(u), 1.0) for a, u in zip(apps, rng.random(n_base))]
    bursts = min(n_burst, max(1, round(hours / BURST_HOURS_APART))) if n_burst else 0
    if bursts:
        width = np.diff(np.minimum(np.arange(len(rate) + 1, dtype=float), hours))
        day = np.flatnonzero(rate > width) if (rate > width).sum() >= bursts else np.arange(len(rate))
        when = rng.choice(day, size=bursts, replace=False, p=rate[day] / rate[day].sum())
        sizes = rng.multinomial(n_burst, (w := rng.uniform(0.5, 1.5, bursts)) / w.sum())
        tasks = _by_class()
        small = ("S", "M")
        mix = np.array([PHILLY_SHARES[c] for c in small])
        for h, size in zip(when.tolist(), sizes.tolist()):
            span = min(BURST_SECONDS, 3600.0 * (min(h + 1.0, hours) - h))
            start = 3600.0 * h + rng.uniform(0.0, max(0.0, 3600.0 * (min(h + 1.0, hours) - h) - span))
            times.append(start + rng.uniform(0.0, span, size))
            group = tasks[small[int(rng.choice(len(small), p=mix / mix.sum()))]]
            app = group[int(rng.integers(len(group)))]
            n, b = _pick(tune(app), float(rng.random()), 1.0)
            apps += [app] * size
            picks += [(n, b)] * size
    return _finish(np.concatenate(times), apps, [p[0] for p in picks], [p[1] for p in picks], worker_type,
                   gpus_per_server, network_gbps, profiles)


SIA_WORKLOADS: Mapping[str, tuple[Callable[..., ElasticTrace], int, float]] = MappingProxyType({
    "sia-philly": (philly_like, 160, 8.0),
    "sia-helios": (helios_like, 160, 8.0),
    "sia-newtrace": (newtrace_like, 960, 48.0),
})
"""name -> (generator, its jobs, its hours), for `simulate --workload` and a sweep's `workload`."""
WORKLOAD_NAMES = ("pollux", *SIA_WORKLOADS)


def workload_size(name: str) -> tuple[int, float]:
    """(jobs, hours) a drawn workload has unless told otherwise."""
    if name == "pollux":
        return POLLUX_JOBS, POLLUX_HOURS
    if name not in SIA_WORKLOADS:
        raise InputError("--workload", name, f"unknown; known: {', '.join(WORKLOAD_NAMES)}")
    return SIA_WORKLOADS[name][1], SIA_WORKLOADS[name][2]


def sia_workload(name: str, num_jobs: int | None = None, hours: float | None = None, seed: int = 0, *,
                 profiles: str = MODELED) -> ElasticTrace:
    """The named generator at its own job count and window unless given."""
    if name not in SIA_WORKLOADS:
        raise InputError("--workload", name, f"unknown; known: {', '.join(WORKLOAD_NAMES)}")
    make, jobs, window = SIA_WORKLOADS[name]
    return make(num_jobs=jobs if num_jobs is None else num_jobs, hours=window if hours is None else hours, seed=seed,
                profiles=profiles)


DRAWN_WORKLOADS.update({name: partial(sia_workload, name) for name in SIA_WORKLOADS})


# ----- what a workload looks like (tests, docs) -----------------------------------------------------
def hourly_arrivals(etrace: ElasticTrace) -> np.ndarray:
    """Jobs arriving in each hour [k h, (k+1) h) from t = 0."""
    t = np.asarray(etrace.trace.arrivals, float)
    return np.bincount((t // 3600.0).astype(np.int64), minlength=1) if len(t) else np.zeros(1, np.int64)


def class_shares(etrace: ElasticTrace) -> dict[str, float]:
    """Share of jobs per size class (by each job's task's declared class)."""
    classes = [FAMILIES[a].size_class for a in etrace.applications]
    return {c: classes.count(c) / len(classes) for c in CLASSES}
