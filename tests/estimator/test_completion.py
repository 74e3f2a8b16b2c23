"""Completion on synthetic low-rank data, and the reference-set layout on the real table."""

from __future__ import annotations

import numpy as np

from gavel_ng.estimator import ReferenceSet, fit_low_rank, select_model, true_row
from gavel_ng.estimator.completion import hard_impute
from gavel_ng.estimator.reference import MINE, THEIRS, family


def _low_rank(n: int, f: int, k: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, k)) @ rng.normal(size=(k, f)) + rng.normal(size=f)


def test_fold_in_recovers_a_low_rank_row_from_a_few_entries():
    X = _low_rank(30, 60, 3)
    model = fit_low_rank(X[:-1], rank=3, ridge=1e-6)
    observed = np.zeros(60, bool)
    observed[np.random.default_rng(1).choice(60, 10, replace=False)] = True
    row = model.fold_in(np.where(observed, X[-1], 0.0), observed)
    assert np.allclose(row, X[-1], atol=1e-4)
    assert np.array_equal(row[observed], X[-1][observed])        # measured entries kept


def test_fold_in_without_observations_is_the_mean_and_vectorizes():
    X = _low_rank(20, 40, 2)
    model = fit_low_rank(X, rank=2, ridge=0.1)
    rows = model.fold_in(np.zeros((3, 40)), np.zeros((3, 40), bool))
    assert np.allclose(rows, model.mean)


def test_hard_impute_fills_holes_of_a_low_rank_matrix():
    X = _low_rank(25, 50, 2, seed=3)
    holes = np.random.default_rng(2).random(X.shape) < 0.1
    filled = hard_impute(np.where(holes, np.nan, X), rank=2, tol=1e-9, iters=2000)
    assert np.abs(filled - X)[holes].max() < 1e-3


def test_select_model_finds_the_rank_of_noiseless_data():
    X = _low_rank(25, 60, 3, seed=4)
    sel = select_model(X, lambda rng: rng.random(60) < 0.4, ranks=(1, 2, 3, 4, 6), ridges=(1e-4, 1e-2))
    assert sel.rank == 3 and sel.error < 1e-2


def test_reference_features_layout(reference_table):
    ref = ReferenceSet.from_table(reference_table, 1)
    X = ref.features()
    assert X.shape == (26, 2 * 3 * 26) and ref.worker_types == ("k80", "p100", "v100")
    a, r, w = 3, 17, 2
    assert X[a, ref.column(w, MINE, r)] == ref.log_norm[w, a, r]
    assert X[a, ref.column(w, THEIRS, r)] == ref.log_norm[w, r, a]
    assert np.isnan(X[~np.isfinite(X)]).all() and (X[np.isfinite(X)] <= 0).all()
    # a reference job's true row against the set is its feature row
    row, feas = true_row(reference_table, ref.keys[a], ref)
    assert np.allclose(np.nan_to_num(row, nan=9.0), np.nan_to_num(X[a], nan=9.0))
    assert np.array_equal(feas, ref.feasible_rows()[a])
    # multi-GPU jobs never share a GPU in the reference table
    assert not ReferenceSet.from_table(reference_table, 4).feasible.any()


def test_family():
    assert family("ResNet-50 (batch size 64)") == "ResNet-50"
    assert family("A3C") == "A3C"
