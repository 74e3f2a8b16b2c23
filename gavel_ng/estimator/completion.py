"""Low-rank completion of a job's feature row against the reference jobs.

Method: probabilistic-PCA style *fold-in*, i.e. alternating least squares with the
reference factors held fixed.

* The matrix is reference jobs (rows, ~25) x (worker type, side, partner) features
  (~150), in log normalized throughput: co-location slowdowns multiply, so logs make
  them additive, and relative errors become absolute ones that least squares treats
  alike for a 0.3 steps/s and a 100 steps/s model.
* The reference block is complete except for infeasible pairs. Its holes are filled
  by hard-impute (iterated rank-k SVD); its column means and top-k principal
  directions, scaled by their standard deviations, form the basis B.
* A new job, of which only the profiled cells are known, gets coefficients
  u = argmin ||P_obs(mean + B u - x)||^2 + lam ||u||^2: a k x k ridge solve. With
  B scaled this way, lam is the noise-to-signal ratio of a Gaussian prior on u, so
  with few observations the row shrinks toward the reference mean instead of
  over-fitting; with many it follows the data.
* Rank k and lam are chosen by leave-one-reference-out validation at the profiling
  fraction in use (`select_model`).

Why not joint soft-impute or ALS over reference + new rows: the reference rows
dominate the item factors anyway (one new row cannot move them much), while fold-in
is convex per job, deterministic, vectorized over jobs, and cheap enough (microseconds)
to redo every round as measurements arrive. The accuracy report compares it with
the Gavel-style "copy the nearest reference job" estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LowRankModel:
    """mean (F,) and scaled basis (F, k) learned from complete(d) reference rows."""

    mean: np.ndarray
    basis: np.ndarray
    ridge: float

    @property
    def rank(self) -> int:
        return self.basis.shape[1]

    def fold_in(self, values: np.ndarray, observed: np.ndarray) -> np.ndarray:
        """Complete rows: values/observed are (n, F) or (F,); observed entries are kept."""
        single = values.ndim == 1
        x = np.atleast_2d(values)
        m = np.atleast_2d(observed).astype(float)
        resid = np.where(m > 0, x - self.mean, 0.0)
        B = self.basis
        gram = np.einsum("fk,nf,fl->nkl", B, m, B) + self.ridge * np.eye(self.rank)
        rhs = resid @ B
        u = np.linalg.solve(gram, rhs[..., None])[..., 0] if self.rank else np.zeros((len(x), 0))
        out = self.mean + u @ B.T
        out = np.where(m > 0, x, out)
        return out[0] if single else out


IMPUTE_RANK = 4   # rank used to fill the reference block's (few, infeasible) holes


def hard_impute(X: np.ndarray, rank: int = IMPUTE_RANK, iters: int = 100, tol: float = 1e-4) -> np.ndarray:
    """Fill the NaNs of X (..., R, F) with a rank-`rank` SVD fit to its known entries.

    Stacked matrices are imputed together (one batched SVD per iteration).
    """
    holes = np.isnan(X)
    known = np.where(holes, 0.0, X)
    count = (~holes).sum(axis=-2, keepdims=True)
    col = known.sum(axis=-2, keepdims=True) / np.maximum(count, 1)
    filled = np.where(holes, col, X)
    if not holes.any() or rank == 0:
        return filled
    for _ in range(iters):
        mu = filled.mean(axis=-2, keepdims=True)
        U, s, Vt = np.linalg.svd(filled - mu, full_matrices=False)
        low = mu + (U[..., :rank] * s[..., None, :rank]) @ Vt[..., :rank, :]
        change = np.abs(low - filled)[holes].max()
        filled = np.where(holes, low, X)
        if change < tol:
            break
    return filled


def _basis(filled: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Column means and the top-`rank` principal directions scaled by their std (F, rank)."""
    mean = filled.mean(axis=0)
    _, s, Vt = np.linalg.svd(filled - mean, full_matrices=False)
    scale = s[:rank] / np.sqrt(max(filled.shape[0] - 1, 1))
    return mean, Vt[:rank].T * scale


def fit_low_rank(X: np.ndarray, rank: int, ridge: float) -> LowRankModel:
    """Learn the fold-in model from reference rows X (R, F), NaN = unknown."""
    rank = max(0, min(rank, X.shape[0] - 1, X.shape[1]))
    mean, basis = _basis(hard_impute(X), rank)
    return LowRankModel(mean, basis, float(ridge))


@dataclass(frozen=True)
class Selection:
    rank: int
    ridge: float
    error: float                   # mean |log error| on held-out cells
    grid: dict[tuple[int, float], float]


def select_model(X: np.ndarray, sample_mask: Callable[[np.random.Generator], np.ndarray],
                 ranks: Sequence[int] = (0, 1, 2, 3, 4, 6, 8, 12, 16),
                 ridges: Sequence[float] = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
                 repeats: int = 4, seed: int = 0, tolerance: float = 0.01) -> Selection:
    """Pick (rank, ridge) by leave-one-reference-out: fit on the others, fold in the
    held-out row from a sampled profile, score the cells it did not see. The smallest
    rank within `tolerance` (relative) of the best error wins: the error plateaus once
    the ridge prior does the regularizing, and a smaller basis is cheaper and steadier."""
    rng = np.random.default_rng(seed)
    R = X.shape[0]
    ranks = [k for k in ranks if k <= R - 2] or [0]
    masks = np.array([[sample_mask(rng) for _ in range(repeats)] for _ in range(R)])   # (R, rep, F)
    folds = hard_impute(np.stack([np.delete(X, i, axis=0) for i in range(R)]))         # (R, R-1, F)
    abs_err = {(k, lam): 0.0 for k in ranks for lam in ridges}
    scored = 0
    for i in range(R):
        mean, full = _basis(folds[i], max(ranks))
        truth = np.broadcast_to(X[i], masks[i].shape)
        obs = (masks[i] & ~np.isnan(truth)).astype(float)
        score = ~masks[i] & ~np.isnan(truth)
        scored += int(score.sum())
        resid = np.where(obs > 0, np.nan_to_num(truth) - mean, 0.0)
        for k in ranks:
            B = full[:, :k]
            gram = np.einsum("fk,nf,fl->nkl", B, obs, B)
            rhs = (resid @ B)[..., None]
            for lam in ridges:
                u = np.linalg.solve(gram + lam * np.eye(k), rhs)[..., 0] if k else np.zeros((len(obs), 0))
                pred = mean + u @ B.T
                abs_err[(k, lam)] += float(np.abs(pred - truth)[score].sum())
    grid = {key: v / max(scored, 1) for key, v in abs_err.items()}
    best = min(grid.values())
    (k, lam), err = min(((key, e) for key, e in grid.items() if e <= best * (1 + tolerance)),
                        key=lambda kv: (kv[0][0], kv[1]))
    return Selection(k, lam, err, grid)
