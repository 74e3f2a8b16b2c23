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

What the paper leaves open is read off the workload files of Sia's artifact
(``sia-simulator/workloads/``; facts, counted by hand: the files are not shipped), or assumed:

* Size-class shares (`CLASS_COUNTS`). Philly: the jobs per class in ``philly/workload-1..3.csv``
  (3 of its 8 files: 376 S, 73 M, 24 L, 7 XL of 480). Helios: the job counts the artifact's README
  prints for its 10 ``saturn`` (Helios) files (1314 cifar10, 170 M, 70 yolov3, 46 imagenet of 1600).
  newTrace: the first 403 jobs of ``newtrace/workload-1.csv`` (231 S, 158 M, 11 L, 3 XL). The counts
  per class are the largest-remainder rounding of share x jobs (not a draw), so a seed changes which
  jobs arrive when, not how many of each class there are. (Until issue 40 these were assumptions:
  Philly 72/20/6/2 %, Helios 60/26/11/3 % with wider GPU counts; the files show Helios no heavier
  than Philly in either.)
* Medium jobs are deepspeech2 or bert in the files' proportions (`M_TASKS`: Philly 44 : 29,
  Helios 100 : 70, newTrace 73 : 85).
* GPU count and batch: each job gets a tuned configuration (Sia's TunedJobs, as Pollux's
  artifact: 50-80 % of linear scaling over one GPU at the best batch;
  `workload.tuned_configurations` on the reference 4-GPU T4 servers), one valid configuration
  drawn uniformly (as `pollux_workload`). Under the measured profiles they are the files' own
  configurations for cifar10 (6 / 8 GPUs at batch 2048, 12 / 16 at 4096), deepspeech2, bert
  (12 / 16 at 384) and yolov3 (4 at 64); ImageNet's are wider (24 GPUs against the files' 10-14).
* newTrace's arrival process, hour by hour from midnight: 75 % of the jobs follow a
  diurnal rate ``1 + (2/3) cos(2 pi (h + 0.5 - 14) / 24)`` (peak at 14:00, trough at 02:00,
  5 to 25 jobs/h at 960 jobs in 48 h), drawn as a multinomial over hours, uniform within
  an hour. The other 25 % come in bursts, two a day (``round(hours / 12)``, at least one):
  each in a distinct daytime hour (drawn in proportion to the diurnal rate), its jobs
  uniform over 20 minutes, its size a multinomial share with weights uniform in
  [0.5, 1.5] (about 60 jobs). A burst is one tuning sweep: all its jobs are the same task
  (S or M in the base mix's ratio) at the same tuned configuration.

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
CLASS_COUNTS = MappingProxyType({    # jobs per class S, M, L, XL in the artifact's files (module docstring)
    "philly": (376, 73, 24, 7), "helios": (1314, 170, 70, 46), "newtrace": (231, 158, 11, 3)})
M_TASKS = MappingProxyType({         # deepspeech2 : bert among the medium jobs of the same files
    "philly": (44, 29), "helios": (100, 70), "newtrace": (73, 85)})


def _shares(counts: tuple[int, ...]) -> MappingProxyType:
    return MappingProxyType({c: n / sum(counts) for c, n in zip(CLASSES, counts)})


PHILLY_SHARES = _shares(CLASS_COUNTS["philly"])
HELIOS_SHARES = _shares(CLASS_COUNTS["helios"])
NEWTRACE_SHARES = _shares(CLASS_COUNTS["newtrace"])
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


def _task(rng: np.random.Generator, size_class: str, medium: tuple[int, int]) -> str:
    """A task of the class: the medium class's two in the proportions `medium` (deepspeech2 : bert)."""
    tasks = _by_class()[size_class]
    if set(tasks) == {"deepspeech2", "bert"}:
        return "deepspeech2" if rng.random() < medium[0] / sum(medium) else "bert"
    return tasks[int(rng.integers(len(tasks)))]


def _applications(rng: np.random.Generator, counts: np.ndarray, medium: tuple[int, int]) -> list[str]:
    """`counts[c]` jobs of each class in random order, each a task of its class (`_task`)."""
    classes = rng.permutation(np.repeat(np.arange(len(CLASSES)), counts))
    return [_task(rng, CLASSES[c], medium) for c in classes]


def _pick(configs: Sequence[tuple[int, int, float]], u: float) -> tuple[int, int]:
    """One of the valid tuned configurations, drawn uniformly by u in [0, 1)."""
    n, b, _ = configs[min(int(len(configs) * u), len(configs) - 1)]
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


def _sampled_window(trace: str, num_jobs: int, hours: float, seed: int, worker_type: str, gpus_per_server: int,
                    network_gbps: float, profiles: str) -> ElasticTrace:
    """Philly and Helios: a busy window at a steady rate, the trace's class mix."""
    _check(num_jobs, hours)
    rng = np.random.default_rng(seed)
    times = _uniform_arrivals(rng, num_jobs, hours)
    apps = _applications(rng, _class_counts(num_jobs, _shares(CLASS_COUNTS[trace])), M_TASKS[trace])
    picks = [_pick(tuned_configurations(a, worker_type=worker_type, gpus_per_server=gpus_per_server,
                                        network_gbps=network_gbps, profiles=profiles), float(u))
             for a, u in zip(apps, rng.random(num_jobs))]
    return _finish(times, apps, [p[0] for p in picks], [p[1] for p in picks], worker_type, gpus_per_server,
                   network_gbps, profiles)


def philly_like(num_jobs: int = 160, hours: float = 8.0, seed: int = 0, worker_type: str = REFERENCE_WORKER,
                gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                network_gbps: float = POLLUX_NETWORK_GBPS, *,
                profiles: str = MODELED) -> ElasticTrace:
    """Sia's Philly traces: 160 jobs over a busy 8 hours, the class mix of the artifact's Philly files."""
    return _sampled_window("philly", num_jobs, hours, seed, worker_type, gpus_per_server, network_gbps, profiles)


def helios_like(num_jobs: int = 160, hours: float = 8.0, seed: int = 0, worker_type: str = REFERENCE_WORKER,
                gpus_per_server: int = POLLUX_GPUS_PER_SERVER,
                network_gbps: float = POLLUX_NETWORK_GBPS, *,
                profiles: str = MODELED) -> ElasticTrace:
    """Sia's Helios traces: Philly's shape with the class mix of the artifact's Helios (saturn) files."""
    return _sampled_window("helios", num_jobs, hours, seed, worker_type, gpus_per_server, network_gbps, profiles)


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
    apps = _applications(rng, _class_counts(n_base, NEWTRACE_SHARES), M_TASKS["newtrace"])
    picks = [_pick(tune(a), float(u)) for a, u in zip(apps, rng.random(n_base))]
    bursts = min(n_burst, max(1, round(hours / BURST_HOURS_APART))) if n_burst else 0
    if bursts:
        width = np.diff(np.minimum(np.arange(len(rate) + 1, dtype=float), hours))
        day = np.flatnonzero(rate > width) if (rate > width).sum() >= bursts else np.arange(len(rate))
        when = rng.choice(day, size=bursts, replace=False, p=rate[day] / rate[day].sum())
        sizes = rng.multinomial(n_burst, (w := rng.uniform(0.5, 1.5, bursts)) / w.sum())
        small = ("S", "M")
        mix = np.array([NEWTRACE_SHARES[c] for c in small])
        for h, size in zip(when.tolist(), sizes.tolist()):
            span = min(BURST_SECONDS, 3600.0 * (min(h + 1.0, hours) - h))
            start = 3600.0 * h + rng.uniform(0.0, max(0.0, 3600.0 * (min(h + 1.0, hours) - h) - span))
            times.append(start + rng.uniform(0.0, span, size))
            app = _task(rng, small[int(rng.choice(len(small), p=mix / mix.sum()))], M_TASKS["newtrace"])
            n, b = _pick(tune(app), float(rng.random()))
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
