"""The throughput table a cluster schedules by, from its config: any GPU type, as long as someone has rates for it.

`cluster-config.throughputs` names one table or a list of them (a built-in name, a Gavel JSON, a
CSV as `gavel-ng profiles export` writes it); later ones add to and override earlier ones. A
worker type none of them covers comes from the built-in performance model where the model knows
the GPU (its datasheet, gavel_ng.profiles.gpus), so a table of a new type alone (`l4.csv`) is
enough beside modeled ones. A type the tables cover only in part (a few reference jobs measured
on an L4) gets the other jobs' rates from the estimator's similar-jobs model
(gavel_ng.estimator.fill_column). A type nobody has rates for stops the scheduler with one line
naming `cluster-config.worker_types` and what to provide. Nothing is written before this passes.
"""

from __future__ import annotations

import logging

from ..errors import InputError
from ..estimator import IsolatedReference, fill_column
from ..profiles import default_table
from ..profiles.gpus import GPUS
from ..profiles.table_io import resolve_table
from ..throughputs import ThroughputTable

log = logging.getLogger(__name__)


def cluster_table(worker_types: list[str], throughputs: str | tuple[str, ...] | None) -> ThroughputTable:
    """The base table for these worker types (module docstring); an InputError naming the field if none."""
    names = (throughputs,) if isinstance(throughputs, str) else tuple(throughputs or ())
    table = ThroughputTable()
    for name in names:
        _merge(table, resolve_table(name, "cluster-config.throughputs"))
    modeled = [w for w in worker_types if w not in table.worker_types and w in GPUS]
    if modeled:
        _merge(table, default_table(modeled), only_new=True)
    missing = [w for w in worker_types if w not in table.worker_types]
    if missing:
        have = f"; cluster-config.throughputs covers {', '.join(table.worker_types)}" if names else ""
        raise InputError("cluster-config.worker_types", missing[0],
                         f"no throughputs for this GPU type: the built-in model knows {', '.join(GPUS)}{have}. "
                         f"Give its rates in a table listed under cluster-config.throughputs (e.g. a CSV as "
                         f"`gavel-ng profiles export` writes, with rows for {missing[0]}: a few reference jobs "
                         "measured there are enough, the estimator fills in the others), or leave it out of "
                         "worker_types")
    _fill(table, worker_types)
    return table


def _merge(into: ThroughputTable, other: ThroughputTable, only_new: bool = False) -> None:
    """Add other's columns to `into` (entry by entry; `only_new`: only columns `into` lacks)."""
    for w, per in other.isolated.items():
        if only_new and w in into.isolated:
            continue
        into.isolated.setdefault(w, {}).update(per)
    for w, per in other.pairs.items():
        if only_new and w in into.pairs:
            continue
        dest = into.pairs.setdefault(w, {})
        for key, row in per.items():
            dest.setdefault(key, {}).update(row)


def _fill(table: ThroughputTable, worker_types: list[str]) -> None:
    """Every job of the table gets a rate on every worker type: the estimator fills a type's gaps."""
    ref = None
    for w in worker_types:
        if all(k in table.isolated[w] for k in table.job_keys):
            continue
        ref = ref or IsolatedReference.from_table(table)
        filled = fill_column(ref, w)
        table.isolated[w].update(filled)
        if filled:
            log.info("throughputs of %d jobs on %s estimated from the %d measured there", len(filled), w,
                     len(ref.keys) - len(filled))
