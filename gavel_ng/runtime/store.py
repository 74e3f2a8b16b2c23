"""The scheduler's durable state: one SQLite file under --state.

Jobs, attempts (one launch of a job), workers, measured throughputs, events and a few
counters, plus the mechanism's ledger and the last allocation, or a round policy's history
and its last decision (JSON under meta keys).
Every change is committed when it happens (WAL, autocommit; `transaction()` groups the
writes of one decision), so a scheduler killed at any moment restarts from what it last
decided. A write that fails (disk full, I/O error) raises `StoreError` with SQLite's own
reason, after rolling back what the failed transaction wrote: callers change their
in-memory state only after the write returned. Readers use records.StateReader.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..protocol.jobspec import JobSpec
from ..protocol.rpc import caller
from .records import (
    ADDED_EVENT_COLUMNS,
    ADDED_JOB_COLUMNS,
    ALLOCATION_KEY,
    CLASSES_KEY,
    CLUSTER_KEY,
    DB_NAME,
    DECISION_KEY,
    LEDGER_KEY,
    ROUND_HISTORY_KEY,
    SCHEMA,
    AllocationRecord,
    ClusterInfo,
    Credential,
    LedgerRecord,
    RoundDecisionRecord,
    RoundHistoryRecord,
    StateDamaged,
    StateQueries,
)

log = logging.getLogger(__name__)
SAY_AGAIN_AFTER = 60.0      # seconds: a store failing again within this is not said again
PRIVATE = 0o600             # the state holds every job's environment and the credentials' hashes


def private(path: Path) -> None:
    """Create `path` owner-only if it is missing, and make it so if it was not (a state written before)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE))
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            os.chmod(path, PRIVATE)


def acting() -> str:
    """Who the change being recorded is for: the caller of the RPC this thread serves (admin, user:NAME,
    worker:NAME, job:N.K), else the scheduler itself (its round loop)."""
    who = caller()
    return who.actor if who is not None else "scheduler"


class StoreError(RuntimeError):
    """A write the state store could not make (disk full, I/O error, read-only file system).
    Nothing of the failed transaction was kept; `full` says whether space ran out."""

    def __init__(self, path: Path, exc: BaseException):
        code = getattr(exc, "sqlite_errorcode", None)
        self.full = code == sqlite3.SQLITE_FULL or (isinstance(exc, OSError) and exc.errno == errno.ENOSPC)
        self.reason = str(exc.strerror if isinstance(exc, OSError) and exc.strerror else exc)
        super().__init__(f"state store {path}: {self.reason}")


class Store(StateQueries):
    """Thread-safe: one connection, one (re-entrant) lock; every method is a short transaction,
    or part of the caller's `transaction()`."""

    def __init__(self, state_dir: str | Path):
        self.dir = Path(state_dir)
        self.path = self.dir / DB_NAME
        self._lock = threading.RLock()
        self._depth = 0                       # nesting of transaction()
        self._failing: tuple[float, int, bool] | None = None   # (since, refused writes, said) while failing
        self._said = -math.inf                # when a failure was last said in the log
        self.write_failures = 0               # writes refused since start (metrics)
        self.on_failing: Callable[[bool], None] | None = None   # told when writes start or stop failing
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            # owner-only from its creation (SQLite gives its -wal and -shm files the same mode)
            private(self.path)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(self.path, exc) from None
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            for table, added in (("jobs", ADDED_JOB_COLUMNS), ("events", ADDED_EVENT_COLUMNS)):
                have = {r[1] for r in self._db.execute(f"PRAGMA table_info({table})")}
                for name, kind, _ in added:
                    if name not in have:
                        self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        except sqlite3.DatabaseError as exc:
            full = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)
            self._db.close()
            if full or isinstance(exc, sqlite3.OperationalError):   # disk full, read-only, locked: not damage
                raise StoreError(self.path, exc) from None
            raise StateDamaged(f"{exc}") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The writes inside happen all or not at all; a failure raises StoreError after the
        rollback (SQLite may already have rolled back by itself: then there is nothing to undo)."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._depth = 1
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield
                self._db.execute("COMMIT")
            except (sqlite3.Error, StoreError) as exc:
                self._rollback()
                raise self._failed(exc) from None
            except BaseException:
                self._rollback()
                raise
            finally:
                self._depth = 0
            self._succeeded()

    def _rollback(self) -> None:
        if not self._db.in_transaction:
            return
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.Error as exc:      # the real error is the one being raised
            log.warning("state store %s: rollback failed (%s)", self.path, exc)

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            try:
                cur = self._db.execute(sql, args)
            except sqlite3.Error as exc:
                raise (self._failed(exc) if not self._depth else StoreError(self.path, exc)) from None
            if not self._depth:
                self._succeeded()
            return cur

    def _failed(self, exc: BaseException) -> StoreError:
        """The error to raise; said in the log once per outage (lock held)."""
        err = exc if isinstance(exc, StoreError) else StoreError(self.path, exc)
        now = time.monotonic()
        self.write_failures += 1
        if self._failing is None:
            if self.on_failing is not None:
                self.on_failing(True)
            said = now - self._said > SAY_AGAIN_AFTER     # a store that flaps is not said every time
            if said:
                log.error("%s: scheduling decisions wait until it can be written again; status is still served",
                          err)
                self._said = now
            self._failing = (now, 0, said)
        since, n, said = self._failing
        self._failing = (since, n + 1, said)
        return err

    def _succeeded(self) -> None:
        if self._failing is not None:
            since, n, said = self._failing
            self._failing = None
            if self.on_failing is not None:
                self.on_failing(False)
            if said:
                log.warning("state store %s writable again after %.1fs (%d writes refused meanwhile)", self.path,
                            time.monotonic() - since, n)

    @property
    def failing(self) -> bool:
        """True while the last write failed (disk full, I/O error)."""
        return self._failing is not None

    def _all(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # ----- jobs ------------------------------------------------------------------------
    def add_jobs(self, specs: list[JobSpec], submitted: float, key: str = "", digest: str = "") -> list[int]:
        """Insert the jobs, their submit events and the submission's idempotency key (if any) in one
        transaction: a batch is all-or-nothing, and a retry after a crash finds either all of it or none."""
        ids = []
        with self.transaction():
            actor = acting()
            for spec in specs:
                cur = self._exec("INSERT INTO jobs (spec, status, steps_done, submitted, actor) "
                                 "VALUES (?, 'queued', 0, ?, ?)", (json.dumps(spec.to_dict()), submitted, actor))
                ids.append(int(cur.lastrowid))
            now = time.time()
            self._db.executemany(
                "INSERT INTO events (ts, kind, job_id, detail, actor) VALUES (?, 'submit', ?, ?, ?)",
                [(now, i, json.dumps({"job_type": s.job_type, "steps": s.steps, "scale_factor": s.scale_factor,
                                      **({"user": s.rules.user} if s.rules is not None and s.rules.user else {}),
                                      **({"entity": s.rules.entity} if s.rules is not None and s.rules.entity
                                         else {})}), actor)
                 for i, s in zip(ids, specs)])
            if key:
                self._exec("INSERT INTO submissions VALUES (?, ?, ?, ?)", (key, digest, json.dumps(ids), submitted))
        return ids

    def find_submission(self, key: str) -> tuple[str, list[int]] | None:
        """(request digest, job ids) of the submission made with idempotency `key`, if any."""
        rows = self._all("SELECT digest, job_ids FROM submissions WHERE key = ?", (key,))
        return (rows[0][0], json.loads(rows[0][1])) if rows else None

    def update_job(self, job_id: int, **cols) -> None:
        names = ", ".join(f"{k} = ?" for k in cols)
        self._exec(f"UPDATE jobs SET {names} WHERE job_id = ?", (*cols.values(), job_id))

    def save_reasons(self, reasons: dict[int, str]) -> None:
        """Why each of these queued jobs waits (only those that changed: one statement for all)."""
        with self.transaction():
            self._db.executemany("UPDATE jobs SET reason = ? WHERE job_id = ?",
                                 [(text, job_id) for job_id, text in reasons.items()])

    def save_adaptive(self, job_id: int, report: dict | None, resizes: int, last: tuple[str, int] | None) -> None:
        self._exec("INSERT OR REPLACE INTO adaptive VALUES (?, ?, ?, ?, ?)",
                   (job_id, json.dumps(report) if report is not None else None, resizes,
                    last[0] if last else None, last[1] if last else None))

    # ----- attempts --------------------------------------------------------------------
    def add_attempt(self, job_id: int, attempt: int, placement: list[tuple[str, int]], worker_type: str,
                    launched: float, steps_start: int) -> None:
        self._exec("INSERT OR REPLACE INTO attempts (job_id, attempt, placement, worker_type, launched, status, "
                   "steps_start) VALUES (?, ?, ?, ?, ?, 'running', ?)",
                   (job_id, attempt, json.dumps(placement), worker_type, launched, steps_start))

    def add_launches(self, rows: list[tuple], round_no: int, launches: int) -> None:
        """Launches in one transaction: each (job id, attempt, placement, worker type, launched, steps, partner)
        gets its attempt row, its job's attempt count, status and first start, and its launch event; the
        launch counter becomes `launches`. A job that finished meanwhile keeps its status (runtime.launcher
        writes the attempt off)."""
        now = time.time()
        with self.transaction():
            self._db.executemany(
                "INSERT OR REPLACE INTO attempts (job_id, attempt, placement, worker_type, launched, status, "
                "steps_start) VALUES (?, ?, ?, ?, ?, 'running', ?)",
                [(j, a, json.dumps(p), w, t, steps) for j, a, p, w, t, steps, _ in rows])
            self._db.executemany(
                "UPDATE jobs SET status = CASE WHEN status IN ('done', 'cancelled', 'failed') THEN status "
                "ELSE 'running' END, attempts = ?, first_start = COALESCE(first_start, ?) WHERE job_id = ?",
                [(a, t, j) for j, a, _, _, t, _, _ in rows])
            self._db.executemany(
                "INSERT INTO events (ts, round, kind, job_id, detail) VALUES (?, ?, 'launch', ?, ?)",
                [(now, round_no, j, json.dumps({"attempt": a, "worker_type": w, "placement": p, "steps": steps,
                                                "partner": partner}))
                 for j, a, p, w, _, steps, partner in rows])
            self.set_meta("launches", launches)

    def end_attempt(self, job_id: int, attempt: int, status: str, ended: float, steps_end: int | None = None,
                    steps_run: int | None = None, compute_seconds: float | None = None,
                    wall_seconds: float | None = None, renewals: int = 0) -> None:
        self._exec("UPDATE attempts SET status = ?, ended = ?, steps_end = ?, steps_run = ?, compute_seconds = ?, "
                   "wall_seconds = ?, renewals = ? WHERE job_id = ? AND attempt = ?",
                   (status, ended, steps_end, steps_run, compute_seconds, wall_seconds, renewals, job_id, attempt))

    def reopen_attempt(self, job_id: int, attempt: int) -> None:
        """A lost attempt its worker still runs is live again (JobBook.reclaim)."""
        self._exec("UPDATE attempts SET status = 'running', ended = NULL, steps_end = NULL WHERE job_id = ? AND "
                   "attempt = ?", (job_id, attempt))

    # ----- workers ---------------------------------------------------------------------
    def upsert_worker(self, worker_id: str, address: str, gpu_type: str, gpus: int, now: float,
                      alive: bool) -> None:
        self._exec("INSERT INTO workers VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(worker_id) DO UPDATE SET "
                   "address = excluded.address, gpu_type = excluded.gpu_type, gpus = excluded.gpus, "
                   "last_seen = excluded.last_seen, alive = excluded.alive",
                   (worker_id, address, gpu_type, gpus, now, now, int(alive)))

    def set_worker_alive(self, worker_id: str, alive: bool, now: float) -> None:
        self._exec("UPDATE workers SET alive = ?, last_seen = ? WHERE worker_id = ?", (int(alive), now, worker_id))

    # ----- throughputs -----------------------------------------------------------------
    def save_throughput(self, job_type: str, sf: int, worker_type: str, consolidated: bool, value: float,
                        samples: int) -> None:
        self._exec("INSERT OR REPLACE INTO throughputs VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (job_type, sf, worker_type, int(consolidated), value, samples, time.time()))

    def delete_throughputs(self, keys: list[tuple[str, int, str, bool]]) -> None:
        """Drop measured rows (the ones load found not sane)."""
        for job_type, sf, w, cons in keys:
            self._exec("DELETE FROM throughputs WHERE job_type = ? AND scale_factor = ? AND worker_type = ? AND "
                       "consolidated = ?", (job_type, sf, w, int(cons)))

    # ----- events and counters -----------------------------------------------------------
    def event(self, kind: str, job_id: int | None = None, worker_id: str | None = None,
              round_no: int | None = None, **detail) -> None:
        """One event, with its actor (`acting()`: who asked for it)."""
        self._exec("INSERT INTO events (ts, round, kind, job_id, worker_id, detail, actor) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (time.time(), round_no, kind, job_id, worker_id, json.dumps(detail) if detail else None, acting()))

    # ----- credentials and what they measured --------------------------------------------------
    def save_credential(self, c: Credential) -> None:
        self._exec("INSERT OR REPLACE INTO credentials VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (c.name, c.role, c.token_hash, json.dumps(list(c.entities)), json.dumps(list(c.manages)), c.created,
                    c.revoked))

    def save_rate_source(self, job_type: str, sf: int, worker_type: str, consolidated: bool, source: str,
                         value: float, samples: int) -> None:
        self._exec("INSERT OR REPLACE INTO rate_sources VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (job_type, sf, worker_type, int(consolidated), source, value, samples, time.time()))

    def delete_rate_sources(self, job_type: str, sf: int, worker_type: str, consolidated: bool,
                            sources: list[str]) -> None:
        """Drop the sources a class no longer keeps (runtime.measured keeps the most recent few)."""
        for source in sources:
            self._exec("DELETE FROM rate_sources WHERE job_type = ? AND scale_factor = ? AND worker_type = ? AND "
                       "consolidated = ? AND source = ?", (job_type, sf, worker_type, int(consolidated), source))

    # ----- damage and recovery -------------------------------------------------------------------
    def check(self) -> None:
        """StateDamaged unless SQLite's own quick check finds the file intact (pages, indexes)."""
        try:
            rows = self._all("PRAGMA quick_check(5)")
        except sqlite3.DatabaseError as exc:
            raise StateDamaged(str(exc)) from None
        if [r[0] for r in rows] != ["ok"]:
            raise StateDamaged("; ".join(str(r[0]) for r in rows)[:300])

    def backup(self, path: Path) -> None:
        """A consistent copy of the state (SQLite's online backup), owner-only, put in place atomically."""
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.unlink(missing_ok=True)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE))
        dst = sqlite3.connect(tmp)
        try:
            with self._lock:
                self._db.backup(dst)
        finally:
            dst.close()
        os.replace(tmp, path)

    def set_meta(self, key: str, value: object) -> None:
        self._exec("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, str(value)))

    def raise_meta(self, key: str, value: int) -> None:
        """A counter that only grows, written by callers that may commit out of order: kept at the largest."""
        self._exec("INSERT INTO meta VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value "
                   "WHERE CAST(excluded.value AS INTEGER) > CAST(meta.value AS INTEGER)", (key, str(value)))

    # ----- the mechanism's memory and what status shows --------------------------------------
    def save_ledger(self, rec: LedgerRecord) -> None:
        self.set_meta(LEDGER_KEY, _compact(rec))

    def save_allocation(self, rec: AllocationRecord) -> None:
        self.set_meta(ALLOCATION_KEY, _compact(rec))

    def save_round_decision(self, rec: RoundDecisionRecord) -> None:
        self.set_meta(DECISION_KEY, _compact(rec))

    def save_round_history(self, rec: RoundHistoryRecord) -> None:
        self.set_meta(ROUND_HISTORY_KEY, _compact(rec))

    def save_classes(self, worker_types: list[str], rows: list[tuple[tuple[str, int], list[float], list[str]]]) -> None:
        """What the policy believes of the active jobs' classes (records.ClassRecord), for `status --state`."""
        self.set_meta(CLASSES_KEY, json.dumps({"worker_types": worker_types,
                                               "classes": [[k[0], k[1], [round(v, 6) for v in r], s]
                                                           for k, r, s in rows]}, separators=(",", ":")))

    def save_cluster_info(self, info: ClusterInfo) -> None:
        self.set_meta(CLUSTER_KEY, json.dumps(vars(info)))

    def _dicts(self, sql: str, args: tuple) -> list[dict]:
        with self._lock:
            cur = self._db.execute(sql, args)
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row)) for row in cur.fetchall()]


def _compact(rec) -> str:
    """A flat record as compact JSON (vars, not asdict: asdict deep-copies a 20,000-row ledger first)."""
    return json.dumps(vars(rec), separators=(",", ":"))
