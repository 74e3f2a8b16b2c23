"""Goodput of an adaptive job on a configuration: Pollux's model on gavel_ng's profiles.

A *configuration* is (worker type, GPU count K, servers spanned N); the job chooses its
per-GPU batch ``m`` and gradient-accumulation steps ``s``, so its total batch is
``M = K m (s+1)``. Pollux (OSDI'21, §3.2) models one optimizer step as

    T_grad(m)      = alpha_grad + beta_grad * m                      (forward + backward)
    T_sync(K, N)   = 0                                               if K = 1
                   = alpha_local + beta_local (K-2) + kappa_local (K-2)/K   if N = 1
                   = alpha_node  + beta_node  (K-2) + kappa_node  (K-2)/K   otherwise
    T_iter(m, s)   = s T_grad + (T_grad^gamma + T_sync^gamma)^(1/gamma)
    throughput     = M / T_iter            (examples/s)
    goodput        = throughput * E(M)     (M0-equivalent examples/s; E in efficiency.py)

Nothing here is a second performance model: every parameter is read off the built-in
one (``gavel_ng.profiles.model``) for the family's profile and the GPU type.

* ``alpha_grad``, ``beta_grad``: the model's single-GPU iteration time (GPU roofline
  time plus host time) at each profiled batch size of the profile family, fitted by a
  line with least relative squared error; ``beta_grad`` is per task example (profile
  slope x the family's ``work_scale``). ``fit_error`` is the largest relative error of
  the line at the profiled sizes.
* T_sync: the model's ring all-reduce, ``2 (K-1)/K V / bw + 2 (K-1) lat``, rewritten in
  Pollux's form: ``alpha = V/bw + 2 lat`` (its value at K = 2), ``beta = 2 lat`` (the
  per-GPU retrogression) and ``kappa = V/bw`` (the bandwidth term's approach to 2 V/bw,
  which Pollux's purely linear form lacks; ``kappa = 0`` gives Pollux's Eq. 9 exactly).
  ``V`` is the family's gradient bytes, ``bw = eta_comm x`` the GPU's intra-server link
  (N = 1) or the network (N > 1), ``lat`` the model's per-ring-step latency.
* ``gamma``: overlap of computation and communication, in [1, 10] as in Pollux. The
  built-in model does not overlap them, so it is 1 (``T_iter = T_grad + T_sync``); with
  gamma = 1 and s = 0 the throughput at a profiled batch equals the built-in table's
  (up to ``fit_error``).
* Memory: the profiles' estimated peak bytes per iteration, linear in the batch, must fit
  as the built-in model requires (``memory_scale * peak + context_bytes <= GPU
  memory``); the largest per-GPU batch that fits is ``max_local_batch``.

Profile sets (``profiles=``, or the job's ``AdaptiveSpec.profiles``): the above is the
``modeled`` set. A measured set (``sia``, :mod:`gavel_ng.elastic.profile_sets`) gives the
fitted parameters of (family, GPU type) directly (``kappa = 0``, its own gamma; ``network_gbps``
and ``gamma`` do not apply: the measured sync times already hold the cluster's network and
overlap; the largest measured per-GPU batch is ``max_local_batch``). A type the set did not
measure is bootstrapped as Sia does (throughput on N GPUs of A = throughput on N GPUs of B x
the single-GPU ratio A/B): from the measured type B nearest to A on the datasheet (least sum
of |log ratio| of FP32 and tensor FLOP/s and memory bandwidth; the family's modeled speeds
would be a poorer guide where the model is host-bound, as for ncf), every time parameter is
scaled by the modeled single-GPU ratio ``c =
T_grad,A(M0) / T_grad,B(M0)`` (T_iter is homogeneous in them, so every configuration's
time scales by c), and ``max_local_batch`` by the modeled memory ratio. A measured set's
``calibration`` (the Sia artifact's slowdown of every job, profile_sets) multiplies every time
parameter of the application, measured or bootstrapped: it is part of the speed the jobs truly run
at, so the simulator's progress, the fixed jobs' table and every policy see it (a policy that
normalizes a job's rates by the job's own, as `sia`, `goodput` and `pollux` do, is unaffected by
it; Gavel's raw-throughput objective sees it, as in the artifact).

Where a measured set has gradient statistics by batch size (`grad_stats`), a job's efficiency at
total batch M uses the noise scale measured at M; the best-batch search below then picks (m, s) with
the noise scale of the batch the job runs at now (the artifact's job optimizes its batch with the
statistics it last measured) and reports the goodput the pick makes at its own batch.

Best batch per configuration (Pollux Eq. 13): the largest goodput over per-GPU batches
``m`` in ``[min_local_batch, max_local_batch]`` and accumulation steps ``s`` such that
``M0 <= M <= max_batch`` and accumulation is used only beyond the memory limit (``s = 0``,
or ``m (s+1) > s * max_local_batch``: fewer steps could not hold the per-GPU batch). For a
fixed ``s``, ``1/goodput`` is convex in ``m`` (``T_iter`` and ``T_iter/m`` are convex), so
the best integer ``m`` is found exactly: for gamma = 1 by the closed form
``m* = sqrt(a phi / (b K (s+1)))`` with ``T_iter = a + b m``, rounded both ways; for
gamma > 1 by bisection on the sign of ``goodput(m+1) - goodput(m)``. All configurations
and all ``s`` are searched at once with numpy, over the feasible (configuration, s) cells
only; those cells and their sync times do not depend on the noise scale, so they are built
once per set of configurations and reused by the next search with a new progress.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from gavel_ng.errors import InputError
from gavel_ng.profiles import get_gpu, load_workload_profiles
from gavel_ng.profiles.model import iteration_time, load_constants

from .efficiency import AdaptiveSpec, efficiency
from .families import ElasticFamily, get_family
from .profile_sets import MODELED, batch_stats, calibration, check_profiles, measured_set, phi_curve

DEFAULT_NETWORK_GBPS = 10.0  # as the built-in table (gavel_ng.profiles.defaults)


@dataclass(frozen=True)
class ThroughputParams:
    """Pollux's throughput parameters of one family on one GPU type (module docstring)."""

    family: str
    worker_type: str
    alpha_grad: float
    beta_grad: float
    alpha_local: float
    beta_local: float
    kappa_local: float
    alpha_node: float
    beta_node: float
    kappa_node: float
    gamma: float
    max_local_batch: int
    mem_fixed_bytes: float
    mem_per_example_bytes: float
    mem_usable_bytes: float
    fit_error: float

    def t_grad(self, m: np.ndarray | float) -> np.ndarray:
        """Seconds of one forward/backward pass at per-GPU batch m."""
        return self.alpha_grad + self.beta_grad * np.asarray(m, float)

    def t_sync(self, gpus: np.ndarray | float, servers: np.ndarray | float) -> np.ndarray:
        """Seconds of one gradient synchronization over K GPUs on N servers (0 for K = 1)."""
        k = np.asarray(gpus, float)
        local = np.asarray(servers) <= 1
        alpha = np.where(local, self.alpha_local, self.alpha_node)
        beta = np.where(local, self.beta_local, self.beta_node)
        kappa = np.where(local, self.kappa_local, self.kappa_node)
        t = alpha + beta * (k - 2) + kappa * (k - 2) / np.maximum(k, 1.0)
        return np.where(k > 1, t, 0.0)

    def t_iter(self, m: np.ndarray | float, s: np.ndarray | float, gpus: np.ndarray | float,
               servers: np.ndarray | float) -> np.ndarray:
        """Seconds of one optimizer step: s accumulation passes, then one synchronized pass."""
        tg = self.t_grad(m)
        ts = self.t_sync(gpus, servers)
        return np.asarray(s, float) * tg + _overlap(tg, ts, self.gamma)

    def throughput(self, m: np.ndarray | float, s: np.ndarray | float, gpus: np.ndarray | float,
                   servers: np.ndarray | float) -> np.ndarray:
        """Examples/s (task examples) at per-GPU batch m, s accumulation steps, K GPUs, N servers."""
        batch = np.asarray(gpus, float) * np.asarray(m, float) * (np.asarray(s, float) + 1)
        return batch / self.t_iter(m, s, gpus, servers)


def make_params(theta: np.ndarray | list[float], max_local_batch: int, name: str = "job",
                worker_type: str = "", fit_error: float = 0.0) -> ThroughputParams:
    """ThroughputParams from Pollux's 7-tuple, as a job fits and reports it (kappa = 0, no memory
    model: the job's own bound); here so that the scheduler reads reports without the in-job fit."""
    ag, bg, al, bl, an, bn, gamma = (float(v) for v in theta)
    return ThroughputParams(name, worker_type, ag, bg, al, bl, 0.0, an, bn, 0.0, gamma, int(max_local_batch),
                            0.0, 0.0, 0.0, float(fit_error))


def _overlap(tg: np.ndarray, ts: np.ndarray, gamma: float) -> np.ndarray:
    if gamma == 1.0:
        return tg + ts
    return (tg ** gamma + ts ** gamma) ** (1.0 / gamma)


def throughput_params(family: str | ElasticFamily, worker_type: str,
                      network_gbps: float = DEFAULT_NETWORK_GBPS, gamma: float = 1.0,
                      profiles: str = MODELED) -> ThroughputParams:
    """The family's throughput parameters on worker_type from a profile set (cached): read off the
    built-in model (``modeled``) or a measured set's fit (module docstring)."""
    fam = family if isinstance(family, ElasticFamily) else get_family(family)
    check_profiles(profiles)
    if not (isinstance(network_gbps, (int, float)) and math.isfinite(network_gbps) and network_gbps > 0):
        raise InputError("network_gbps", network_gbps, "must be a finite number > 0")
    if not (isinstance(gamma, (int, float)) and 1.0 <= gamma <= 10.0):
        raise InputError("gamma", gamma, "must be in [1, 10] (Pollux's bounds)")
    if profiles != MODELED:
        return _measured(fam, str(worker_type).lower().removesuffix("_unconsolidated"), profiles)
    try:
        gpu = get_gpu(worker_type)
    except KeyError as exc:
        raise InputError("worker_type", worker_type, str(exc.args[0])) from None
    return _derive(fam, gpu.name, float(network_gbps), float(gamma))


@cache
def _measured(fam: ElasticFamily, worker: str, profiles: str) -> ThroughputParams:
    """A measured set's parameters, or the nearest measured type's scaled (module docstring)."""
    ms = measured_set(profiles)
    slow = calibration(profiles, fam.name)
    entry = ms.entries.get((fam.name, worker))
    if entry is not None:
        return make_params([v * slow for v in entry.theta[:6]] + [entry.theta[6]], entry.max_local_batch, fam.name,
                           worker, entry.max_error)
    try:
        gpu = get_gpu(worker)
    except KeyError as exc:
        raise InputError("worker_type", worker, str(exc.args[0])) from None
    options = []
    for other in ms.types_of(fam.name):
        try:
            spec = get_gpu(other)
        except KeyError:  # a measured type the performance model does not know: no modeled ratio
            continue
        distance = sum(abs(math.log(getattr(gpu, f) / getattr(spec, f)))
                       for f in ("fp32_flops", "tensor_flops", "mem_bytes_per_s"))
        options.append((distance, spec.name))
    if not options:
        raise InputError("worker_type", worker, f"profile set {profiles!r} measured {fam.name} on no GPU type "
                                                "the performance model knows")
    _, other = min(options)
    here = _derive(fam, gpu.name, DEFAULT_NETWORK_GBPS, 1.0)
    there = _derive(fam, other, DEFAULT_NETWORK_GBPS, 1.0)
    ratio = float(here.t_grad(fam.init_batch) / there.t_grad(fam.init_batch))
    src = ms.entries[(fam.name, other)]
    theta = [v * ratio * slow for v in src.theta[:6]] + [src.theta[6]]
    mem = here.max_local_batch / there.max_local_batch if there.max_local_batch > 0 else 0.0
    return make_params(theta, int(math.floor(src.max_local_batch * mem + 1e-9)), fam.name, worker, src.max_error)


@cache
def _derive(fam: ElasticFamily, gpu_name: str, network_gbps: float, gamma: float) -> ThroughputParams:
    gpu = get_gpu(gpu_name)
    c = load_constants()
    records = sorted((p for p in load_workload_profiles().values() if p.family == fam.profile_family),
                     key=lambda p: p.batch_size)
    if len(records) < 2:
        raise InputError("family", fam.name, f"profile family {fam.profile_family!r} needs >= 2 profiled batch sizes")
    b = np.array([p.batch_size for p in records], float)
    t = np.array([iteration_time(p, gpu, c).total_s for p in records])
    alpha, beta = _fit_line_relative(b, t)
    fit_error = float(np.max(np.abs(alpha + beta * b - t) / t))
    peak = np.array([p.peak_bytes for p in records], float)
    p1, p0 = np.polyfit(b, peak, 1)
    p0, p1 = max(float(p0), 0.0), max(float(p1), 1.0)
    usable = (gpu.mem_bytes - c.context_bytes) / c.memory_scale
    per_example = p1 * fam.work_scale
    max_local = int(math.floor((usable - p0) / per_example + 1e-9)) if usable > p0 else 0
    net = network_gbps * 1e9 / 8
    sync = []
    for link in (gpu.link_bytes_per_s, min(net, gpu.link_bytes_per_s)):
        volume_s = (fam.param_bytes or records[0].param_bytes) / (c.eta_comm * link)
        sync.append((volume_s + 2 * c.latency_s, 2 * c.latency_s, volume_s))
    (al, bl, kl), (an, bn, kn) = sync
    return ThroughputParams(fam.name, gpu.name, float(alpha), float(beta) * fam.work_scale,
                            al, bl, kl, an, bn, kn, gamma, max(max_local, 0), p0, per_example, usable,
                            fit_error)


def _fit_line_relative(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """alpha, beta >= 0 minimizing sum(((alpha + beta x) / y - 1)^2)."""
    a = np.stack([1.0 / y, x / y], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    if alpha < 0:  # through the origin
        alpha, beta = 0.0, float(np.sum(x / y) / np.sum((x / y) ** 2))
    elif beta < 0:  # flat
        alpha, beta = float(np.sum(1 / y) / np.sum(1 / y ** 2)), 0.0
    return float(alpha), float(beta)


# ----- the job side ----------------------------------------------------------------------
def _spec_of(job: str | AdaptiveSpec | ElasticFamily) -> tuple[AdaptiveSpec, ElasticFamily]:
    if isinstance(job, AdaptiveSpec):
        return job, get_family(job.family)
    fam = job if isinstance(job, ElasticFamily) else get_family(job)
    return fam.spec(), fam


def _phi(spec: AdaptiveSpec, progress: np.ndarray | float, batch: np.ndarray | float | None = None) -> np.ndarray:
    """The noise scale a job at total batch `batch` (None: M0) sees at `progress` (broadcast)."""
    stats = batch_stats(spec)
    if stats is not None:
        return stats.phi(spec.init_batch if batch is None else batch, progress)
    return np.asarray(phi_curve(spec)(progress), float)


def _local_cap(spec: AdaptiveSpec, params: ThroughputParams) -> int:
    cap = min(params.max_local_batch, spec.batch_limit)
    return min(cap, spec.max_local_batch) if spec.max_local_batch is not None else cap


def goodput(job: str | AdaptiveSpec | ElasticFamily, worker_type: str, gpus: np.ndarray | int,
            servers: np.ndarray | int, m: np.ndarray | int, s: np.ndarray | int,
            progress: np.ndarray | float = 0.0, network_gbps: float = DEFAULT_NETWORK_GBPS,
            gamma: float = 1.0) -> np.ndarray:
    """Goodput of explicit configurations (vectorized); 0 where (m, s) is not allowed.

    Allowed: ``min_local_batch <= m <= max_local_batch`` (memory and the job's bound),
    ``s = 0`` unless the job accumulates, ``M0 <= K m (s+1) <= max_batch``, and the GPU
    count within the job's range. (The accumulation-only-beyond-memory rule is the
    search's, not a validity condition.)
    """
    spec, fam = _spec_of(job)
    params = throughput_params(fam, worker_type, network_gbps, gamma, spec.profiles)
    k, n, mm, ss = (np.asarray(v) for v in (gpus, servers, m, s))
    batch = k * mm * (ss + 1)
    ok = ((mm >= spec.min_local_batch) & (mm <= _local_cap(spec, params)) & (ss >= 0)
          & ((ss == 0) | spec.accumulation) & (batch >= spec.init_batch) & (batch <= spec.batch_limit)
          & _gpus_ok(spec, k, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        g = params.throughput(np.maximum(mm, 1), ss, np.maximum(k, 1), n) * efficiency(
            batch, spec.init_batch, _phi(spec, progress, batch))
    return np.where(ok, g, 0.0)


def _gpus_ok(spec: AdaptiveSpec, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    ok = (k >= spec.min_gpus) & (n >= 1) & (n <= k)
    if spec.max_gpus is not None:
        ok &= k <= spec.max_gpus
    return ok


def best_goodput_many(job: str | AdaptiveSpec | ElasticFamily, worker_type: str,
                      gpus: np.ndarray | int, servers: np.ndarray | int,
                      progress: np.ndarray | float = 0.0, network_gbps: float = DEFAULT_NETWORK_GBPS,
                      gamma: float = 1.0, batch: np.ndarray | float | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best (goodput, m, s) of each configuration; inputs broadcast together.

    A configuration where no allowed (m, s) exists gets goodput 0 and m = s = 0. Where the job's
    noise scale depends on its batch (a measured set's `grad_stats`), (m, s) is what the job picks
    with the statistics of the total batch it runs at now (`batch`; None: M0), as the artifact's
    jobs pick theirs, and the goodput is what it then makes: its efficiency at its new total batch.
    """
    spec, fam = _spec_of(job)
    params = throughput_params(fam, worker_type, network_gbps, gamma, spec.profiles)
    k, n, prog = np.broadcast_arrays(np.asarray(gpus, np.int64), np.asarray(servers, np.int64),
                                     np.asarray(progress, float))
    shape = k.shape
    k, n, prog = k.ravel(), n.ravel(), prog.ravel()
    now = None if batch is None else np.broadcast_to(np.asarray(batch, float), shape).ravel()
    g, m, s = _search(params, spec, _phi(spec, prog, now), k, n)
    stats = batch_stats(spec)
    if stats is not None:   # what the pick makes: its efficiency at its own total batch
        found = np.flatnonzero(m > 0)
        kk, mm, ss = k[found], m[found], s[found]
        picked = kk * mm * (ss + 1)
        g = np.zeros(len(k))
        g[found] = params.throughput(mm, ss, kk, n[found]) * efficiency(picked, spec.init_batch,
                                                                        stats.phi(picked, prog[found]))
    return g.reshape(shape), m.reshape(shape), s.reshape(shape)


def best_goodput(job: str | AdaptiveSpec | ElasticFamily, worker_type: str, gpus: int, servers: int = 1,
                 progress: float = 0.0, network_gbps: float = DEFAULT_NETWORK_GBPS,
                 gamma: float = 1.0, batch: float | None = None) -> tuple[float, int, int]:
    """(goodput in M0-equivalent examples/s, per-GPU batch m, accumulation steps s) at the best batch
    (`batch`: the job's total batch now, where its noise scale depends on it; `best_goodput_many`)."""
    g, m, s = best_goodput_many(job, worker_type, gpus, servers, progress, network_gbps, gamma, batch)
    return float(g), int(m), int(s)


def speedup(job: str | AdaptiveSpec | ElasticFamily, worker_type: str, gpus: np.ndarray | int,
            servers: np.ndarray | int, progress: np.ndarray | float = 0.0, base_worker_type: str = "t4",
            base_gpus: int = 1, base_servers: int = 1, network_gbps: float = DEFAULT_NETWORK_GBPS,
            gamma: float = 1.0) -> np.ndarray:
    """Pollux's SPEEDUP (Eq. 15): best goodput here over best goodput on a baseline allocation.

    Pollux's baseline is the job's fair share; by default here it is one GPU of
    ``base_worker_type``, a fixed reference that makes speedups comparable across types.
    Both goodputs are taken at the same progress; the baseline's 0 gives inf.
    """
    g, _, _ = best_goodput_many(job, worker_type, gpus, servers, progress, network_gbps, gamma)
    g0, _, _ = best_goodput_many(job, base_worker_type, base_gpus, base_servers, progress, network_gbps, gamma)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(g0 > 0, g / np.where(g0 > 0, g0, 1.0), np.inf)
    return out


@dataclass(frozen=True)
class ConfigTable:
    """Best goodput of one job on every (worker type, GPU count) with consolidated placement."""

    worker_types: tuple[str, ...]
    gpus: np.ndarray  # (G,) GPU counts 1..max_gpus
    servers: np.ndarray  # (G,) servers spanned: ceil(K / gpus_per_server)
    goodput: np.ndarray  # (W, G)
    m: np.ndarray  # (W, G)
    s: np.ndarray  # (W, G)


def configuration_table(job: str | AdaptiveSpec | ElasticFamily, worker_types: list[str] | tuple[str, ...],
                        max_gpus: int, gpus_per_server: int = 4, progress: float = 0.0,
                        network_gbps: float = DEFAULT_NETWORK_GBPS, gamma: float = 1.0) -> ConfigTable:
    """Best (goodput, m, s) on 1..max_gpus GPUs of each type, packed onto as few servers as possible."""
    if not (isinstance(max_gpus, int) and max_gpus >= 1):
        raise InputError("max_gpus", max_gpus, "must be an integer >= 1")
    if not (isinstance(gpus_per_server, int) and gpus_per_server >= 1):
        raise InputError("gpus_per_server", gpus_per_server, "must be an integer >= 1")
    k = np.arange(1, max_gpus + 1)
    n = -(-k // gpus_per_server)
    out = [best_goodput_many(job, w, k, n, progress, network_gbps, gamma) for w in worker_types]
    return ConfigTable(tuple(worker_types), k, n, *(np.stack([o[i] for o in out]) for i in range(3)))


def best_batch(params: ThroughputParams, spec: AdaptiveSpec, phi: float, gpus: int,
               servers: int = 1) -> tuple[float, int, int]:
    """Best (goodput, m, s) for explicit parameters and noise scale (a job's own fitted ones).

    The same exact search as `best_goodput`, for a training job that measured its
    throughput parameters and gradient noise scale instead of reading them off a family.
    """
    g, m, s = _search(params, spec, np.array([float(phi)]), np.array([int(gpus)], np.int64),
                      np.array([int(servers)], np.int64))
    return float(g[0]), int(m[0]), int(s[0])


def best_batch_many(params: ThroughputParams, spec: AdaptiveSpec, phi: float | np.ndarray, gpus: np.ndarray,
                    servers: np.ndarray) -> np.ndarray:
    """Best goodput on each (gpus, servers) for explicit parameters and noise scale (vectorized `best_batch`;
    `phi` a number or one per configuration)."""
    k = np.asarray(gpus, np.int64).ravel()
    n = np.asarray(servers, np.int64).ravel()
    g, _, _ = _search(params, spec, np.broadcast_to(np.asarray(phi, float).ravel(), k.shape).astype(float), k, n)
    return g


# ----- the search ------------------------------------------------------------------------
@dataclass(frozen=True)
class _Grid:
    """The feasible (configuration, s) cells of one search and everything about them that does not
    depend on the noise scale: callers ask again and again with the same configurations and a new
    progress, so this is built once per (bounds, sync model, configurations) and reused."""

    rows: np.ndarray   # (P,) configuration of each feasible cell
    cols: np.ndarray   # (P,) its accumulation steps s
    per: np.ndarray    # (P,) examples per unit of m: K (s+1)
    lo: np.ndarray     # (P,) least allowed m
    hi: np.ndarray     # (P,) largest allowed m
    ts: np.ndarray     # (P,) T_sync of the cell's configuration
    ts_pow: np.ndarray  # (P,) T_sync ** gamma (gamma != 1)
    shape: tuple[int, int]


_GRIDS: dict = {}
_GRID_LIMIT = 4096


def _grid(params: ThroughputParams, spec: AdaptiveSpec, k: np.ndarray, n: np.ndarray) -> _Grid:
    m_hi = _local_cap(spec, params)
    key = (m_hi, spec.min_local_batch, spec.init_batch, spec.batch_limit, spec.accumulation, spec.min_gpus,
           spec.max_gpus, params.alpha_local, params.beta_local, params.kappa_local, params.alpha_node,
           params.beta_node, params.kappa_node, params.gamma, k.tobytes(), n.tobytes())
    grid = _GRIDS.get(key)
    if grid is None:
        if len(_GRIDS) >= _GRID_LIMIT:
            _GRIDS.clear()
        grid = _GRIDS[key] = _build_grid(params, spec, m_hi, k, n)
    return grid


def _build_grid(params: ThroughputParams, spec: AdaptiveSpec, m_hi: int, k: np.ndarray, n: np.ndarray) -> _Grid:
    c = k.size
    m0, mmax = spec.init_batch, spec.batch_limit
    valid = _gpus_ok(spec, k, n) & (m_hi >= spec.min_local_batch)
    kk = np.maximum(k, 1)
    if spec.accumulation and m_hi >= 1:
        s_max = np.maximum(0, -(-mmax // (kk * m_hi)) - 1)
    else:
        s_max = np.zeros(c, np.int64)
    s_top = int(s_max[valid].max()) if valid.any() else 0
    s = np.arange(s_top + 1)[None, :]  # (1, S)
    kk2 = kk[:, None]
    per = kk2 * (s + 1)
    lo = np.maximum(spec.min_local_batch, -(-m0 // per))
    lo = np.where(s > 0, np.maximum(lo, (s * m_hi) // (s + 1) + 1), lo)
    hi = np.minimum(m_hi, mmax // per)
    ok = valid[:, None] & (s <= s_max[:, None]) & (lo <= hi)
    rows, cols = np.nonzero(ok)
    ts = params.t_sync(kk, n)[rows]
    ts_pow = ts ** params.gamma if params.gamma != 1.0 else ts
    return _Grid(rows, cols.astype(np.int64), per[rows, cols], lo[rows, cols].astype(np.int64),
                 hi[rows, cols].astype(np.int64), ts, ts_pow, (c, s_top + 1))


def _search(params: ThroughputParams, spec: AdaptiveSpec, phi: np.ndarray, k: np.ndarray,
            n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact best (m, s) per configuration (see the module docstring). Only feasible (configuration,
    s) cells are evaluated; every cell's arithmetic is the same expression as `goodput`'s."""
    grid = _grid(params, spec, np.ascontiguousarray(k, np.int64), np.ascontiguousarray(n, np.int64))
    m0 = spec.init_batch
    s, per, ts = grid.cols, grid.per, grid.ts
    phi_c = phi[grid.rows]
    phi_m0 = phi_c + m0
    gamma, inv = params.gamma, 1.0 / params.gamma
    alpha, beta = params.alpha_grad, params.beta_grad

    def value(m: np.ndarray) -> np.ndarray:
        batch = per * m
        tg = alpha + beta * m
        if gamma == 1.0:
            t_iter = s * tg + (tg + ts)
        else:
            t_iter = s * tg + (tg ** gamma + grid.ts_pow) ** inv
        return batch / t_iter * phi_m0 / (phi_c + batch)

    if gamma == 1.0:
        if beta > 0:
            a = (s + 1) * alpha + ts
            m_star = np.sqrt(a * phi_c / ((s + 1) * beta * per))
            m_star = np.minimum(np.maximum(m_star, grid.lo), grid.hi)
        else:  # throughput grows without bound in m: the largest batch
            m_star = grid.hi.astype(float)
        both = np.stack([np.floor(m_star), np.ceil(m_star)]).astype(np.int64)  # both within [lo, hi]
        g12 = value(both)
        up = g12[1] > g12[0]
        best_m = np.where(up, both[1], both[0])
        best_g = np.where(up, g12[1], g12[0])
    else:
        best_m = _bisect(value, grid.lo, grid.hi)
        best_g = value(best_m)
    c, width = grid.shape
    full_g = np.full((c, width), -np.inf)
    full_g[grid.rows, grid.cols] = best_g
    full_m = np.zeros((c, width), np.int64)
    full_m[grid.rows, grid.cols] = best_m
    j = np.argmax(full_g, axis=1)
    rows = np.arange(c)
    g = full_g[rows, j]
    found = np.isfinite(g)
    return (np.where(found, g, 0.0), np.where(found, full_m[rows, j], 0).astype(np.int64),
            np.where(found, j, 0).astype(np.int64))


def _bisect(value, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The least m in [lo, hi] where ``value(m+1) > value(m)`` fails (hi if it never does): 1/value
    is convex in m, so the test holds below the best m and fails from it on."""
    left, right = lo.copy(), hi.copy()
    while True:
        open_ = left < right
        if not open_.any():
            return left
        mid = (left + right) // 2
        g = value(np.concatenate([mid, mid + 1]).reshape(2, -1))
        rising = g[1] > g[0]
        left = np.where(open_ & rising, mid + 1, left)
        right = np.where(open_ & ~rising, mid, right)
