"""The results table: one row per point, appended as points finish, read with pandas.

CSV is appended one line per point and flushed, so an interrupted sweep keeps every point
that finished. Parquet (needs pyarrow) is rewritten atomically on each append. A new table's
name says which (`.csv` or `.parquet`, any case; another suffix is refused); an existing
table is read, and appended to, as what its content is (`table_format`), whatever its name.
Per-job records of each point's window go to `<table stem>.jobs/<point_id>.csv`, written
before the row, so a row implies its jobs.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import InputError
from .grid import SweepPoint
from .point import BOOKKEEPING, JOB_COLUMNS, METRICS, PointResult

log = logging.getLogger(__name__)
COLUMNS = tuple(f.name for f in fields(SweepPoint)) + BOOKKEEPING + METRICS
TEXT_COLUMNS = {"point_id": str, "digest": str}
SUFFIXES = {".csv": "csv", ".parquet": "parquet"}
PARQUET_MAGIC = b"PAR1"      # a Parquet file begins and ends with it


def table_format(path: Path, field: str = "--results") -> str:
    """'csv' or 'parquet': an existing table's by its content, a new (or empty) one's by its suffix.
    InputError naming `field` for a suffix that is neither, or content that is neither."""
    if path.is_file() and path.stat().st_size > 0:
        with path.open("rb") as f:
            head = f.read(4)
            f.seek(max(path.stat().st_size - 4, 0))
            tail = f.read(4)
            f.seek(0)
            first = f.readline(65536)
        if head == PARQUET_MAGIC and tail == PARQUET_MAGIC:
            return "parquet"
        try:
            first.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(field, str(path), "is neither a CSV nor a Parquet table") from None
        return "csv"
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        suffix = repr(path.suffix) if path.suffix else "(no suffix)"
        raise InputError(field, str(path), f"unknown table format {suffix}: name a new table .csv or .parquet")
    return kind


class ResultsStore:
    """Appends rows and tells which points are done (status 'ok'); errors are retried. `field`: what
    errors name the table by (the flag or argument it came from)."""

    def __init__(self, path: str | Path, field: str = "--results"):
        self.path = Path(path)
        self.field = field
        kind = table_format(self.path, field)
        named = SUFFIXES.get(self.path.suffix.lower())
        if named is not None and named != kind:
            log.warning("%s holds a %s table although its name says %s: read and appended as %s", self.path,
                        kind, named, kind)
        self.parquet = kind == "parquet"
        if self.parquet:
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise InputError(field, str(self.path), "Parquet needs pyarrow (pip install pyarrow); "
                                 "or use a .csv table") from None
        self.jobs_dir = self.path.with_name(self.path.stem + ".jobs")

    def load(self) -> pd.DataFrame:
        """All rows, the last row per point kept (a retried error is replaced by its success)."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return pd.DataFrame(columns=list(COLUMNS))
        if self.parquet:
            df = pd.read_parquet(self.path)
        else:
            # hex ids and digests stay text (one of only digits would otherwise read as a number)
            df = pd.read_csv(self.path, on_bad_lines="skip", low_memory=False, dtype=TEXT_COLUMNS)
        if "point_id" not in df.columns:
            raise InputError(self.field, str(self.path), "is not a sweep results table (no point_id column)")
        df = df.dropna(subset=["point_id"])
        ok = df["status"] == "ok"
        df = pd.concat([df[~ok], df[ok]]).drop_duplicates("point_id", keep="last")
        return df.sort_values("finished_at", kind="stable").reset_index(drop=True)

    def done_ids(self) -> set[str]:
        df = self.load()
        return set(df.loc[df["status"] == "ok", "point_id"].astype(str))

    def done_and_stale(self, digests: dict[str, str]) -> tuple[set[str], set[str]]:
        """Of these points (id -> the digest they would be computed with now, fingerprint.py), the
        ids with an ok row of that digest, and those whose ok row has another digest or none."""
        df = self.load()
        df = df[(df["status"] == "ok") & df["point_id"].astype(str).isin(digests)]
        done, stale = set(), set()
        recorded = df["digest"] if "digest" in df.columns else [None] * len(df)   # none: an older table
        for pid, digest in zip(df["point_id"].astype(str), recorded):
            (done if isinstance(digest, str) and digest == digests[pid] else stale).add(pid)
        return done, stale

    def append(self, result: PointResult) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if result.jobs:
            self._write_jobs(result.row["point_id"], result.jobs)
        row = {c: result.row.get(c) for c in COLUMNS}
        if self.parquet:
            df = pd.concat([self.load(), pd.DataFrame([row])], ignore_index=True)
            _atomic(self.path, lambda f: df.to_parquet(f, index=False), binary=True)
            return
        self._check_header()
        new = not self.path.exists() or self.path.stat().st_size == 0
        text = io.StringIO()
        w = csv.DictWriter(text, fieldnames=list(COLUMNS), lineterminator="\n")
        if new:
            w.writeheader()
        w.writerow({k: _cell(v) for k, v in row.items()})
        with self.path.open("a+", newline="") as f:
            if not new and _missing_newline(f):
                f.write("\n")        # a line cut short by a kill: end it, pandas skips it
            f.write(text.getvalue())
            f.flush()
            os.fsync(f.fileno())

    def jobs(self, point_id: str) -> pd.DataFrame:
        path = self.jobs_dir / f"{point_id}.csv"
        return pd.read_csv(path) if path.exists() else pd.DataFrame(columns=list(JOB_COLUMNS))

    def _write_jobs(self, point_id: str, jobs: list[dict[str, Any]]) -> None:
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        _atomic(self.jobs_dir / f"{point_id}.csv",
                lambda f: pd.DataFrame(jobs, columns=list(JOB_COLUMNS)).to_csv(f, index=False))

    def _check_header(self) -> None:
        """A table written by an older version with other columns is rewritten once."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open() as f:
            header = f.readline().rstrip("\n").split(",")
        if header != list(COLUMNS):
            log.info("rewriting %s with the current columns", self.path)
            df = pd.read_csv(self.path, on_bad_lines="skip", low_memory=False).reindex(columns=list(COLUMNS))
            _atomic(self.path, lambda f: df.to_csv(f, index=False))


def _cell(v: Any) -> Any:
    return "" if v is None else v


def _missing_newline(f) -> bool:
    f.seek(0, os.SEEK_END)
    if f.tell() == 0:
        return False
    f.seek(f.tell() - 1)
    last = f.read(1)
    f.seek(0, os.SEEK_END)
    return last != "\n"


def _atomic(path: Path, write, binary: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb" if binary else "w", newline=None if binary else "") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
