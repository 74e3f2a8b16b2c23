"""Measured elastic profiles: read the Sia artifact's step-time and gradient-statistics files and
fit Pollux's throughput model to them, per (application, GPU type).

Inputs (one directory per application, e.g. ``cifar10/``):

* ``placements-SUFFIX.csv`` (``local_bsz, step_time, sync_time, placement``; the placement is
  written as GPUs per node, "22" = 2 nodes x 2 GPUs) and ``scalability-SUFFIX.csv`` (``local_bsz,
  step_time, sync_time, num_nodes, num_replicas``), columns in any order. One row is one
  configuration: GPU count K, nodes N, per-GPU batch m, the measured seconds of one optimizer step
  (``step_time``, the synchronization included) and of the synchronization within it
  (``sync_time``). The artifact's simulator times an iteration by ``step_time`` alone and fits its
  throughput model to it (facts read from its code: ../shared/profiles/sia-artifact/README.md);
  so does this fit. (Until issue 40 it read ``step_time + sync_time``, 3-63 % too slow on
  multi-GPU rows.)
* ``validation-BATCH.csv`` (``progress, iteration, metric, grad_sqr, grad_var``): one run per
  total batch size, per statistical epoch the gradient's squared norm and its variance normalized
  to the batch M0.

The cluster suffix names the GPU type (`SUFFIX_TYPES`); files without a suffix and ``dgx`` (the
short A100 profile that ``dgx-ext`` extends) are not read.

**Throughput fit.** Pollux's model (OSDI'21 §3.2, ``kappa = 0``): ``T_grad = alpha_grad +
beta_grad m``; ``T_sync = alpha + beta (K-2)`` with the local pair for N = 1 and the node pair for
N > 1 (0 for K = 1); ``T_iter = (T_grad^gamma + T_sync^gamma)^(1/gamma)``. All seven parameters
are fitted together by bounded least squares on the relative error of the predicted iteration
time against ``step_time`` over every row (rows that two files both hold are counted once), from
several starting overlaps (gamma in [1, 10]); the single-GPU rows' line gives the starting
``alpha_grad, beta_grad``. A type with no multi-node row gets its local pair for nodes too (the
JSON says ``node_measured: false``). The largest per-GPU batch measured on the type is its memory
bound ``max_local_batch``: the artifact profiled up to what fit.

**Gradient statistics** (`grad_stats`): every ``validation-B.csv`` of the application, cut to the
epochs all runs have; per run and epoch ``grad_sqr`` and ``grad_var``, and the epochs' ends at the
least of the runs' ``progress`` (M0-sized steps) as fractions of the family's work
(``progress x M0 / work``, clipped to 1).

**What the files do not hold** (facts of the artifact's code, kept here with their source): each
application's restart delay (`RESTART_SECONDS`) and the calibration slowdown its simulator applies
to every job's goodput (`CALIBRATION`). `fit_directory` writes both into the set.

`fit_directory` returns the JSON-ready profile set; ``gavel-ng profiles elastic --fit DIR --out FILE``
writes it.
"""

from __future__ import annotations

import csv
import datetime
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from gavel_ng.errors import InputError

from .families import FAMILIES

log = logging.getLogger(__name__)

SUFFIX_TYPES = {"aws": "t4", "azure": "v100", "dgx-ext": "a100", "quad": "rtx6000", "rtx": "rtx2080ti"}
"""Cluster suffix of the artifact's files -> gavel_ng GPU type (README of the artifact's traces)."""
RESTART_SECONDS = {"cifar10": 50.0, "deepspeech2": 25.0, "bert": 120.0, "yolov3": 80.0, "imagenet": 250.0,
                   "ncf": 15.0}
"""Seconds a start or change of placement costs (checkpoint, restore), during which the job holds its
GPUs: the Sia artifact's simulator, ``sia-simulator/applications.py`` lines 56-69 ("measured on real
physical cluster", Sia §4.2: model-specific checkpoint-restore delays)."""
CALIBRATION = {"cifar10": 1.8, "ncf": 1.5, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2}
"""Slowdown of every job's goodput in the Sia artifact's simulator, "fitted to real-world data"
(``sia-simulator/simulator_config.py`` lines 30-33, applied in ``job.py``): its profiles run faster
than its jobs did."""
RESTART_SOURCE = "Sia artifact, sia-simulator/applications.py:56-69 (per-application checkpoint-restore delay)"
CALIBRATION_SOURCE = "Sia artifact, sia-simulator/simulator_config.py:30-33 (SLOWDOWNS, applied in job.py:105,485)"
GAMMA_BOUNDS = (1.0, 10.0)
GAMMA_STARTS = (1.0, 2.0, 4.0, 8.0)
FIT_METHOD = ("scipy.optimize.least_squares (trust-region reflective), bounds alpha/beta >= 0 and gamma in "
              "[1, 10], residual = predicted / measured step_time - 1 over every distinct row of "
              "placements-SUFFIX.csv and scalability-SUFFIX.csv; best of starts gamma = 1, 2, 4, 8")


@dataclass(frozen=True)
class StepSamples:
    """Measured configurations: GPU count, nodes, per-GPU batch, step and sync seconds (aligned arrays)."""

    gpus: np.ndarray
    servers: np.ndarray
    local_batch: np.ndarray
    step_time: np.ndarray
    sync_time: np.ndarray

    def __len__(self) -> int:
        return len(self.gpus)

    @property
    def iteration(self) -> np.ndarray:
        """Seconds of one optimizer step: the step time, which holds the synchronization."""
        return self.step_time

    @staticmethod
    def concat(parts: list[StepSamples]) -> StepSamples:
        """All rows of `parts`, each distinct (K, N, m, step, sync) row once."""
        rows = np.concatenate([np.stack([p.gpus, p.servers, p.local_batch, p.step_time, p.sync_time], axis=1)
                               for p in parts]) if parts else np.zeros((0, 5))
        rows = np.unique(rows, axis=0)
        return StepSamples(rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2].astype(np.int64),
                           rows[:, 3], rows[:, 4])


@dataclass(frozen=True)
class ThroughputFit:
    """Pollux's seven parameters fitted to one (application, GPU type), with the fit's quality."""

    theta: tuple[float, ...]  # alpha_grad, beta_grad, alpha_local, beta_local, alpha_node, beta_node, gamma
    max_local_batch: int
    rows: int
    median_error: float  # relative error of the predicted iteration time
    max_error: float
    node_measured: bool

    def predict(self, gpus: np.ndarray, servers: np.ndarray, local_batch: np.ndarray) -> np.ndarray:
        return _predict(np.asarray(self.theta, float), gpus, servers, local_batch)


# ----- reading ---------------------------------------------------------------------------
def _rows(path: Path, required: tuple[str, ...]) -> tuple[list[tuple[int, list[str]]], dict[str, int], str]:
    """(line number, cells) of every non-empty data row, column indexes, and the name errors use."""
    where = f"{path.parent.name}/{path.name}"
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(where, str(path), f"cannot read file ({exc.strerror})") from None
    lines = list(csv.reader(text.splitlines()))
    header = [c.strip() for c in lines[0]] if lines else []
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(f"{where} line 1", ",".join(header), f"missing column(s) {', '.join(missing)}")
    out = []
    for n, row in enumerate(lines[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(f"{where} line {n}", ",".join(row), f"expected {len(header)} columns, got {len(row)}")
        out.append((n, row))
    return out, {c: header.index(c) for c in header}, where


def _number(row: list[str], col: dict[str, int], name: str, where: str, line: int, minimum: float,
            strict: bool = False, integer: bool = False) -> float:
    text = row[col[name]].strip()
    field = f"{where} line {line} column {name}"
    try:
        v = float(text)
    except ValueError:
        raise InputError(field, text, "must be a number") from None
    if not math.isfinite(v) or v < minimum or (strict and v <= minimum) or (integer and not v.is_integer()):
        kind = "an integer" if integer else "a finite number"
        raise InputError(field, text, f"must be {kind} {'>' if strict else '>='} {minimum:g}")
    return v


def read_step_csv(path: str | Path) -> StepSamples:
    """A placements or scalability file (which one: by its columns). Bad rows: InputError naming file,
    line, column and value."""
    path = Path(path)
    base = ("local_bsz", "step_time", "sync_time")
    rows, col, where = _rows(path, base)
    by_placement = "placement" in col
    if not by_placement and not {"num_nodes", "num_replicas"} <= set(col):
        raise InputError(f"{where} line 1", ",".join(col), "needs a placement column or num_nodes and num_replicas")
    k, n, m, step, sync = [], [], [], [], []
    for line, row in rows:
        if by_placement:
            text = row[col["placement"]].strip()
            if not (text.isdigit() and "0" not in text):
                raise InputError(f"{where} line {line} column placement", text,
                                 "must be GPUs per node as digits 1-9 (e.g. 22: two nodes of 2)")
            k.append(sum(int(c) for c in text))
            n.append(len(text))
        else:
            nodes = _number(row, col, "num_nodes", where, line, 1, integer=True)
            replicas = _number(row, col, "num_replicas", where, line, nodes, integer=True)
            k.append(int(replicas))
            n.append(int(nodes))
        m.append(int(_number(row, col, "local_bsz", where, line, 1, integer=True)))
        step.append(_number(row, col, "step_time", where, line, 0.0, strict=True))
        sync.append(_number(row, col, "sync_time", where, line, 0.0))
    if not k:
        raise InputError(where, str(path), "no data rows")
    return StepSamples(np.array(k, np.int64), np.array(n, np.int64), np.array(m, np.int64), np.array(step),
                       np.array(sync))


def read_validation_stats(path: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(progress in M0-sized steps, grad_sqr, grad_var) of every row of a validation file; progress must
    increase. Bad rows: InputError naming file, line, column and value."""
    path = Path(path)
    rows, col, where = _rows(path, ("progress", "grad_sqr", "grad_var"))
    progress, sqr, var = [], [], []
    last = -math.inf
    for line, row in rows:
        p = _number(row, col, "progress", where, line, 0.0)
        if p <= last:
            raise InputError(f"{where} line {line} column progress", row[col["progress"]].strip(),
                             f"must increase (previous row: {last:g})")
        last = p
        progress.append(p)
        sqr.append(_number(row, col, "grad_sqr", where, line, 0.0))
        var.append(_number(row, col, "grad_var", where, line, 0.0))
    if not progress:
        raise InputError(where, str(path), "no data rows")
    return np.array(progress), np.array(sqr), np.array(var)


def read_validation_csv(path: str | Path, init_batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(progress in M0-sized steps, phi = M0 grad_var / grad_sqr) of each row where phi is defined and > 0."""
    progress, sqr, var = read_validation_stats(path)
    keep = (sqr > 0) & (var > 0)
    if not keep.any():
        raise InputError(f"{Path(path).parent.name}/{Path(path).name}", str(path),
                         "no row with grad_sqr > 0 and grad_var > 0")
    return progress[keep], init_batch * var[keep] / sqr[keep]


# ----- fitting ---------------------------------------------------------------------------
def _predict(theta: np.ndarray, k: np.ndarray, n: np.ndarray, m: np.ndarray) -> np.ndarray:
    ag, bg, al, bl, an, bn, gamma = theta
    tg = ag + bg * np.asarray(m, float)
    kk = np.asarray(k, float)
    local = np.asarray(n) <= 1
    ts = np.where(kk > 1, np.where(local, al + bl * (kk - 2), an + bn * (kk - 2)), 0.0)
    # (tg^g + ts^g)^(1/g) written as tg (1 + (ts/tg)^g)^(1/g): no overflow at large gamma
    return tg * (1.0 + (ts / tg) ** gamma) ** (1.0 / gamma)


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """alpha, beta >= 0 of the line with least relative squared error."""
    a = np.stack([1.0 / y, x / y], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    if alpha < 0:
        return 0.0, float(np.sum(x / y) / np.sum((x / y) ** 2))
    if beta < 0:
        return float(np.sum(1 / y) / np.sum(1 / y ** 2)), 0.0
    return float(alpha), float(beta)


def fit_throughput(samples: StepSamples) -> ThroughputFit:
    """Pollux's parameters for one (application, GPU type) (module docstring)."""
    k, n, m, t = samples.gpus, samples.servers, samples.local_batch, samples.iteration
    single = k == 1
    if len(np.unique(m[single])) >= 2:
        ag, bg = _line(m[single].astype(float), samples.step_time[single])
    else:  # no single-GPU line: start from the fastest rows
        ag, bg = _line(m.astype(float), samples.step_time)
    multi_local = (k > 1) & (n <= 1)
    multi_node = n > 1
    sync_local = float(np.median(samples.sync_time[multi_local])) if multi_local.any() else 0.0
    sync_node = float(np.median(samples.sync_time[multi_node])) if multi_node.any() else sync_local
    best = None
    for g0 in GAMMA_STARTS:
        x0 = np.array([ag, bg, sync_local, sync_local / 10, sync_node, sync_node / 10, g0])
        lo = np.array([0, 0, 0, 0, 0, 0, GAMMA_BOUNDS[0]])
        hi = np.array([np.inf] * 6 + [GAMMA_BOUNDS[1]])
        x0 = np.clip(x0, lo, hi)
        res = least_squares(lambda th: _predict(th, k, n, m) / t - 1.0, x0, bounds=(lo, hi),
                            x_scale=np.maximum(np.abs(x0), 1e-6), method="trf")
        if best is None or res.cost < best.cost:
            best = res
    theta = np.asarray(best.x, float)
    if not multi_node.any():
        theta[4], theta[5] = theta[2], theta[3]
    if not (k > 1).any():
        theta[6] = 1.0
    err = np.abs(_predict(theta, k, n, m) / t - 1.0)
    return ThroughputFit(tuple(float(v) for v in theta), int(m.max()), len(samples), float(np.median(err)),
                         float(err.max()), bool(multi_node.any()))


def stats_table(folder: Path, app: str) -> tuple[dict, list[str]] | None:
    """The application's gradient statistics by batch size (module docstring) as JSON, and the files read;
    None without validation files."""
    fam = FAMILIES[app]
    runs = {}
    for path in folder.glob("validation-*.csv"):
        batch = path.stem.split("-", 1)[1]
        if not batch.isdigit() or int(batch) < 1:
            raise InputError(f"{folder.name}/{path.name}", batch, "the file name's batch size must be an integer >= 1")
        runs[int(batch)] = read_validation_stats(path)
    if not runs:
        return None
    batches = sorted(runs)
    epochs = min(len(r[0]) for r in runs.values())
    ends = np.min([runs[b][0][:epochs] for b in batches], axis=0) * fam.init_batch / fam.work
    ends = np.minimum(ends, 1.0)
    keep = np.concatenate([[True], np.diff(ends) > 0]) & (ends > 0)   # a repeated end would be an empty epoch
    table = {"batches": batches, "ends": [round(float(v), 6) for v in ends[keep]],
             "grad_sqr": [[float(f"{v:.6g}") for v in runs[b][1][:epochs][keep]] for b in batches],
             "grad_var": [[float(f"{v:.6g}") for v in runs[b][2][:epochs][keep]] for b in batches]}
    return table, [f"{app}/validation-{b}.csv" for b in batches]


def fit_directory(root: str | Path, name: str = "sia") -> dict:
    """The JSON-ready profile set fitted from an artifact directory (module docstring)."""
    root = Path(root)
    if not root.is_dir():
        raise InputError("directory", str(root), "not a directory")
    fits: dict[str, dict[str, dict]] = {}
    stats: dict[str, dict] = {}
    files: list[str] = []
    for app in FAMILIES:
        folder = root / app
        if not folder.is_dir():
            log.info("%s: no directory %s, skipped", app, folder)
            continue
        for suffix, gpu in SUFFIX_TYPES.items():
            paths = [folder / f"{kind}-{suffix}.csv" for kind in ("placements", "scalability")]
            present = [p for p in paths if p.is_file()]
            if not present:
                continue
            fit = fit_throughput(StepSamples.concat([read_step_csv(p) for p in present]))
            files += [f"{app}/{p.name}" for p in present]
            fits.setdefault(app, {})[gpu] = {
                "theta": [float(f"{v:.6g}") for v in fit.theta], "max_local_batch": fit.max_local_batch,
                "rows": fit.rows, "median_error": round(fit.median_error, 4), "max_error": round(fit.max_error, 4),
                "node_measured": fit.node_measured}
            log.info("%s on %s: %d rows, median error %.1f %%, max %.1f %%", app, gpu, fit.rows,
                     100 * fit.median_error, 100 * fit.max_error)
        got = stats_table(folder, app)
        if got is not None:
            stats[app], read = got
            files += read
    if not fits:
        raise InputError("directory", str(root), f"no application directory with profiles ({', '.join(FAMILIES)})")
    return {
        "name": name,
        "source": "Sia (SOSP'23) artifact, sia-simulator/traces/ (extends the Pollux OSDI'21 artifact's profiles)",
        "notice": "Parameters fitted by gavel_ng from the measured profiles of the Sia artifact; the measurements "
                  "are the artifact authors'.",
        "fitted": datetime.date.today().isoformat(),
        "directory": root.name,
        "files": sorted(files),
        "gpu_types": {suffix: gpu for suffix, gpu in SUFFIX_TYPES.items()},
        "method": FIT_METHOD,
        "theta_order": ["alpha_grad", "beta_grad", "alpha_local", "beta_local", "alpha_node", "beta_node", "gamma"],
        "stats_method": "grad_sqr and grad_var per epoch of every validation-B.csv (cut to the epochs all runs "
                        "have); epoch ends at the least of the runs' progress, as fractions progress x M0 / "
                        "(epochs x examples per epoch); a job at total batch M in epoch e has phi = M0 var / sqr, "
                        "sqr and var interpolated linearly in M between the runs around it (the artifact's "
                        "applications.py get_grad_stats)",
        "restart_seconds": {app: RESTART_SECONDS[app] for app in fits if app in RESTART_SECONDS},
        "restart_source": RESTART_SOURCE,
        "calibration": {app: CALIBRATION[app] for app in fits if app in CALIBRATION},
        "calibration_source": CALIBRATION_SOURCE,
        "fits": fits,
        "stats": stats,
    }


def error_table(data: dict) -> list[tuple[str, str, int, float, float]]:
    """(application, GPU type, rows, median, max relative error) of every fit in a profile set."""
    return [(app, gpu, int(f["rows"]), float(f["median_error"]), float(f["max_error"]))
            for app, per in data["fits"].items() for gpu, f in per.items()]
