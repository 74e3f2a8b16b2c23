"""What the scheduler's state directory holds, and how to read it.

The SQLite schema, the rows and records it stores (jobs, attempts, workers, the mechanism's
ledger and the last allocation, or a round policy's history and last decision, how the
scheduler was configured), and the queries shared by the scheduler's `Store` (store.py, which
writes) and `StateReader`, which tools (`gavel-ng status --state`, `gavel-ng logs`, tests) use
to read a state directory read-only, also while a scheduler runs.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.jobspec import JobSpec

log = logging.getLogger(__name__)
DB_NAME = "gavel.sqlite"
LEDGER_KEY = "ledger"
ALLOCATION_KEY = "allocation"
CLUSTER_KEY = "cluster"
DECISION_KEY = "round_decision"
ROUND_HISTORY_KEY = "round_history"
CLASSES_KEY = "classes"
SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY, spec TEXT NOT NULL, status TEXT NOT NULL, steps_done INTEGER NOT NULL,
    submitted REAL NOT NULL, finished REAL, attempts INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0, renewals INTEGER NOT NULL DEFAULT 0, steps_live INTEGER, reason TEXT);
CREATE TABLE IF NOT EXISTS attempts (
    job_id INTEGER NOT NULL, attempt INTEGER NOT NULL, placement TEXT NOT NULL, worker_type TEXT NOT NULL,
    launched REAL NOT NULL, ended REAL, status TEXT NOT NULL, steps_start INTEGER, steps_end INTEGER,
    steps_run INTEGER, compute_seconds REAL, wall_seconds REAL, renewals INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (job_id, attempt));
CREATE TABLE IF NOT EXISTS workers (
    worker_id TEXT PRIMARY KEY, address TEXT NOT NULL, gpu_type TEXT NOT NULL, gpus INTEGER NOT NULL,
    registered REAL NOT NULL, last_seen REAL NOT NULL, alive INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS throughputs (
    job_type TEXT NOT NULL, scale_factor INTEGER NOT NULL, worker_type TEXT NOT NULL,
    consolidated INTEGER NOT NULL, steps_per_s REAL NOT NULL, samples INTEGER NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (job_type, scale_factor, worker_type, consolidated));
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, round INTEGER, kind TEXT NOT NULL,
    job_id INTEGER, worker_id TEXT, detail TEXT);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    key TEXT PRIMARY KEY, digest TEXT NOT NULL, job_ids TEXT NOT NULL, submitted REAL NOT NULL);
CREATE TABLE IF NOT EXISTS adaptive (
    job_id INTEGER PRIMARY KEY, report TEXT, resizes INTEGER NOT NULL DEFAULT 0, last_type TEXT, last_gpus INTEGER);
CREATE TABLE IF NOT EXISTS credentials (
    name TEXT PRIMARY KEY, role TEXT NOT NULL, token_hash TEXT NOT NULL, entities TEXT NOT NULL,
    manages TEXT NOT NULL, created REAL NOT NULL, revoked REAL);
CREATE TABLE IF NOT EXISTS rate_sources (
    job_type TEXT NOT NULL, scale_factor INTEGER NOT NULL, worker_type TEXT NOT NULL,
    consolidated INTEGER NOT NULL, source TEXT NOT NULL, steps_per_s REAL NOT NULL, samples INTEGER NOT NULL,
    updated REAL NOT NULL, PRIMARY KEY (job_type, scale_factor, worker_type, consolidated, source));
"""
# columns added to `jobs` since its first version (name, SQL type, value in a row written before it);
# a state directory written before gets them on open, and a reader of one reads the default
ADDED_JOB_COLUMNS = (("steps_live", "INTEGER", 0), ("reason", "TEXT", ""), ("first_start", "REAL", None),
                     ("preemptions", "INTEGER", 0), ("gpu_seconds", "TEXT", "{}"), ("error", "TEXT", ""),
                     ("actor", "TEXT", ""))
# columns added to `events`: who caused each (runtime.store.acting; "" in a state written before)
ADDED_EVENT_COLUMNS = (("actor", "TEXT", ""),)
STATE_ID_KEY = "state_id"


@dataclass
class JobRow:
    job_id: int
    spec: JobSpec
    status: str
    steps_done: int
    submitted: float
    finished: float | None
    attempts: int
    failures: int
    renewals: int
    steps_live: int = 0        # last step a running attempt reported (kept after a cancel)
    reason: str = ""           # why a queued job waits, as last decided (runtime.waiting)
    first_start: float | None = None   # when its first attempt was launched (None: never)
    preemptions: int = 0       # attempts that stopped short of its end without failing
    gpu_seconds: dict[str, float] = field(default_factory=dict)   # GPU-seconds of its ended attempts, by type
    error: str = ""            # why its last attempt failed ("" : none failed since it last ran well)
    actor: str = ""            # who submitted it (admin, user:NAME; "" in a state written before)

    @property
    def jct(self) -> float | None:
        """Job completion time: submission to end (None while unfinished)."""
        return None if self.finished is None else self.finished - self.submitted

    @property
    def queueing_delay(self) -> float | None:
        """Submission to first start (None while never started)."""
        return None if self.first_start is None else self.first_start - self.submitted


@dataclass
class AttemptRow:
    job_id: int
    attempt: int
    placement: list[tuple[str, int]]    # (worker id, local GPU index) per rank
    worker_type: str
    launched: float
    status: str


@dataclass
class WorkerRow:
    worker_id: str
    address: str
    gpu_type: str
    gpus: int
    registered: float
    last_seen: float       # time.time() of the last registration or liveness change
    alive: bool


@dataclass
class LedgerRecord:
    """The mechanism's ledger as saved: seconds received per allocation row and column."""

    round: int
    columns: list[str]                   # worker types, in the order of received's columns
    rows: list[tuple[int, ...]]
    received: list[list[float]]          # (rows, columns)
    totals: list[float] | None = None
    elapsed: float = 0.0                 # wall-clock seconds (decayed), for idle-aware priorities


@dataclass
class AllocationRecord:
    """The last allocation the policy computed: time shares per row and worker type."""

    round: int
    worker_types: list[str]
    rows: list[tuple[int, ...]]
    shares: list[list[float]]            # (rows, worker types)


@dataclass
class RoundDecisionRecord:
    """A round policy's decision for the round in force (what status shows in place of an allocation)."""

    round: int
    entries: list[tuple[int, str, int]]  # (job, worker type, GPUs) of each job the policy runs


@dataclass
class RoundHistoryRecord:
    """A round policy's memory of past rounds (RoundPlanner.history), so that a restarted scheduler
    resumes with it: per job its GPU-seconds and seconds run and when it last stopped; the policy's
    own state, if it keeps any (`history()` of its class); the position of the run's random stream."""

    round: int
    policy: str
    jobs: list[tuple[int, float, float, float | None]]   # (job, GPU-seconds, seconds, last stop or None)
    policy_state: dict | None = None
    rng: dict | None = None


@dataclass(frozen=True)
class Credential:
    """A credential an admin issued (runtime.credentials): only its token's SHA-256 is kept."""

    name: str
    role: str                           # user | worker | admin
    token_hash: str
    entities: tuple[str, ...] = ()      # may submit to (the first: a job's default entity)
    manages: tuple[str, ...] = ()       # sees in full and cancels the jobs of
    created: float = 0.0
    revoked: float | None = None

    @property
    def principal(self):
        from ..protocol.rpc import Principal

        return Principal(self.role, self.name)


@dataclass
class ClassRecord:
    """A job class's steps/s per worker type as the policy believed them, and each one's source."""

    job_type: str
    scale_factor: int
    rates: dict[str, float]
    sources: dict[str, str]           # worker type -> measured | table | declared | estimated


@dataclass
class ClusterInfo:
    """What a reader cannot know from the rest of the file: how the scheduler was configured."""

    policy: str
    round_seconds: float
    worker_types: list[str]
    checkpoint_root: str | None = None     # where job checkpoints and logs live (`gavel-ng logs`)
    round_policy: bool = False             # the policy decides per round (RoundDecisionRecord, no allocation)
    prices: dict[str, float] | None = None   # $ per GPU-hour of the configured types (`gavel-ng report`'s cost)
    state_id: str = ""                     # names job directories (records.job_dir); "": a state older than it


class StateQueries:
    """Queries shared by the scheduler's Store and the read-only StateReader (both give `_all`)."""

    def _all(self, sql: str, args: tuple = ()) -> list[tuple]:
        raise NotImplementedError

    def _dicts(self, sql: str, args: tuple) -> list[dict]:
        raise NotImplementedError

    def load_jobs(self, where: str = "", args: tuple = ()) -> list[JobRow]:
        """Every job by id, or those that `where` (SQL after WHERE, with ORDER BY/LIMIT if any) selects."""
        have = {r[1] for r in self._all("PRAGMA table_info(jobs)")}   # (a reader may open an older state)
        extra = "".join(f", {name}" if name in have else ", NULL" for name, _, _ in ADDED_JOB_COLUMNS)
        rows = self._all("SELECT job_id, spec, status, steps_done, submitted, finished, attempts, failures, renewals"
                         + extra + " FROM jobs " + (f"WHERE {where}" if where else "ORDER BY job_id"), args)
        n = 9
        out = []
        for r in rows:
            try:
                added = [default if v is None else v for v, (_, _, default) in zip(r[n:], ADDED_JOB_COLUMNS)]
                added[4] = json.loads(added[4]) if isinstance(added[4], str) else {}
                out.append(JobRow(r[0], JobSpec(**_spec_args(json.loads(r[1]))), *r[2:n], *added))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:   # JSON, a spec field, InputError
                raise StateDamaged(f"job {r[0]}'s stored row cannot be read ({type(exc).__name__}: "
                                   f"{str(exc)[:120]})") from None
        return out

    def finished_among(self, job_ids: list[int]) -> set[int]:
        """Those of `job_ids` that finished (one query, however many)."""
        rows = self._all("SELECT job_id FROM jobs WHERE status IN ('done', 'cancelled', 'failed') "
                         "AND job_id IN (SELECT value FROM json_each(?))", (json.dumps(job_ids),))
        return {r[0] for r in rows}

    def job_counts(self) -> dict[str, int]:
        return dict(self._all("SELECT status, COUNT(*) FROM jobs GROUP BY status"))

    def job_page(self, limit: int) -> list[JobRow]:
        """Up to `limit` jobs as status lists them: unfinished by id, then the latest finished (in id order)."""
        done = "status IN ('done', 'cancelled', 'failed')"
        page = self.load_jobs(f"NOT {done} ORDER BY job_id LIMIT ?", (limit,))
        page += self.load_jobs(f"{done} ORDER BY job_id DESC LIMIT ?", (limit - len(page),))
        return sorted(page, key=lambda r: r.job_id)

    def running_attempts(self) -> list[AttemptRow]:
        rows = self._all("SELECT job_id, attempt, placement, worker_type, launched, status FROM attempts "
                         "WHERE status = 'running'")
        return [AttemptRow(r[0], r[1], [tuple(p) for p in json.loads(r[2])], r[3], r[4], r[5]) for r in rows]

    def attempt_status(self, job_id: int, attempt: int) -> str | None:
        """An attempt's recorded status (None: no such attempt)."""
        rows = self._all("SELECT status FROM attempts WHERE job_id = ? AND attempt = ?", (job_id, attempt))
        return rows[0][0] if rows else None

    def attempts(self, job_id: int | None = None) -> list[dict]:
        sql = "SELECT * FROM attempts" + (" WHERE job_id = ?" if job_id is not None else "") + \
              " ORDER BY job_id, attempt"
        return self._dicts(sql, () if job_id is None else (job_id,))

    def load_workers(self) -> list[WorkerRow]:
        rows = self._all("SELECT worker_id, address, gpu_type, gpus, registered, last_seen, alive FROM workers "
                         "ORDER BY registered, worker_id")
        return [WorkerRow(*r[:6], bool(r[6])) for r in rows]

    def load_throughputs(self) -> list[tuple[str, int, str, bool, float, int]]:
        rows = self._all("SELECT job_type, scale_factor, worker_type, consolidated, steps_per_s, samples "
                         "FROM throughputs")
        return [(r[0], r[1], r[2], bool(r[3]), r[4], r[5]) for r in rows]

    def events(self, kind: str | None = None) -> list[dict]:
        sql = "SELECT * FROM events" + (" WHERE kind = ?" if kind else "") + " ORDER BY seq"
        out = self._dicts(sql, (kind,) if kind else ())
        for e in out:
            e["detail"] = json.loads(e["detail"]) if e["detail"] else {}
        return out

    def audit_events(self, kinds: tuple[str, ...], since: float | None, until: float | None) -> list[dict]:
        """Events of `kinds` in [since, until), oldest first, with their actor ("" before actors were kept)."""
        have = {r[1] for r in self._all("PRAGMA table_info(events)")}
        actor = "actor" if "actor" in have else "'' AS actor"
        rows = self._dicts(f"SELECT ts, kind, job_id, worker_id, detail, {actor} FROM events WHERE kind IN "
                           f"(SELECT value FROM json_each(?)) AND ts >= ? AND ts < ? ORDER BY seq",
                           (json.dumps(list(kinds)), -1e300 if since is None else since,
                            1e300 if until is None else until))
        for e in rows:
            try:
                e["detail"] = json.loads(e["detail"]) if e["detail"] else {}
            except ValueError:
                e["detail"] = {"unreadable": str(e["detail"])[:80]}
        return rows

    def load_credentials(self) -> list[Credential]:
        """The credentials an admin issued (runtime.credentials), revoked ones included."""
        try:
            rows = self._all("SELECT name, role, token_hash, entities, manages, created, revoked FROM credentials")
        except sqlite3.OperationalError:      # a state written before credentials existed
            return []
        try:
            return [Credential(r[0], r[1], r[2], tuple(json.loads(r[3])), tuple(json.loads(r[4])), r[5], r[6])
                    for r in rows]
        except (ValueError, TypeError) as exc:
            raise StateDamaged(f"a stored credential cannot be read ({exc})") from None

    def load_rate_sources(self) -> list[tuple[str, int, str, bool, str, float, int]]:
        """Measured rates by source (runtime.measured): (job type, sf, worker type, consolidated, source, rate, n)."""
        try:
            rows = self._all("SELECT job_type, scale_factor, worker_type, consolidated, source, steps_per_s, samples "
                             "FROM rate_sources")
        except sqlite3.OperationalError:
            return []
        return [(r[0], r[1], r[2], bool(r[3]), r[4], r[5], r[6]) for r in rows]

    def load_adaptive(self) -> list[tuple[int, dict | None, int, tuple[str, int] | None]]:
        """Adaptive jobs: (job id, last report as a dict, resizes, last (worker type, GPUs))."""
        try:
            rows = self._all("SELECT job_id, report, resizes, last_type, last_gpus FROM adaptive ORDER BY job_id")
        except sqlite3.OperationalError:      # a state directory written before adaptive jobs existed
            return []
        return [(r[0], json.loads(r[1]) if r[1] else None, r[2], (r[3], r[4]) if r[3] is not None else None)
                for r in rows]

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        rows = self._all("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else default

    def load_ledger(self) -> LedgerRecord | None:
        """None when none was saved or it does not parse (a warning: history starts over)."""
        data = self._meta_json(LEDGER_KEY)
        if data is None:
            return None
        try:
            rec = LedgerRecord(int(data["round"]), [str(c) for c in data["columns"]], _rows(data["rows"]),
                               _matrix(data["received"], len(data["rows"]), len(data["columns"])),
                               None if data.get("totals") is None else [float(v) for v in data["totals"]],
                               float(data.get("elapsed", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("meta %r in %s is malformed (%s): ignored", LEDGER_KEY, DB_NAME, exc)
            return None
        return rec

    def load_allocation(self) -> AllocationRecord | None:
        data = self._meta_json(ALLOCATION_KEY)
        if data is None:
            return None
        try:
            return AllocationRecord(int(data["round"]), [str(w) for w in data["worker_types"]], _rows(data["rows"]),
                                    _matrix(data["shares"], len(data["rows"]), len(data["worker_types"])))
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("meta %r in %s is malformed (%s): ignored", ALLOCATION_KEY, DB_NAME, exc)
            return None

    def load_cluster_info(self) -> ClusterInfo | None:
        data = self._meta_json(CLUSTER_KEY)
        if data is None:
            return None
        try:
            types = [str(w) for w in data["worker_types"]]
            root = data.get("checkpoint_root")
            prices = {str(w): float(v) for w, v in (data.get("prices") or {}).items()}
            return ClusterInfo(str(data["policy"]), float(data["round_seconds"]), types,
                               str(root) if root is not None else None, bool(data.get("round_policy", False)), prices,
                               str(data.get("state_id") or ""))
        except (KeyError, TypeError, ValueError):
            return None

    def load_round_decision(self) -> RoundDecisionRecord | None:
        data = self._meta_json(DECISION_KEY)
        if data is None:
            return None
        try:
            return RoundDecisionRecord(int(data["round"]), [(int(m), str(w), int(k)) for m, w, k in data["entries"]])
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("meta %r in %s is malformed (%s): ignored", DECISION_KEY, DB_NAME, exc)
            return None

    def load_round_history(self) -> RoundHistoryRecord | None:
        """None when none was saved or it does not parse (a warning: the round policy's history starts over)."""
        data = self._meta_json(ROUND_HISTORY_KEY)
        if data is None:
            return None
        try:
            jobs = [(int(m), float(a), float(e), None if t is None else float(t)) for m, a, e, t in data["jobs"]]
            state, rng = data.get("policy_state"), data.get("rng")
            if not (state is None or isinstance(state, dict)) or not (rng is None or isinstance(rng, dict)):
                raise TypeError("policy_state and rng must be objects")
            return RoundHistoryRecord(int(data["round"]), str(data["policy"]), jobs, state, rng)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("meta %r in %s is malformed (%s): ignored", ROUND_HISTORY_KEY, DB_NAME, exc)
            return None

    def load_classes(self, keys: list[tuple[str, int]]) -> list[ClassRecord]:
        """What the scheduler last believed of these classes (ClassRecord), those it saved."""
        data = self._meta_json(CLASSES_KEY)
        if data is None:
            return []
        try:
            types = [str(w) for w in data["worker_types"]]
            rows = {(str(t), int(sf)): (r, s) for t, sf, r, s in data["classes"]}
            return [ClassRecord(k[0], k[1], dict(zip(types, map(float, rows[k][0]))), dict(zip(types, rows[k][1])))
                    for k in keys if k in rows]
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("meta %r in %s is malformed (%s): ignored", CLASSES_KEY, DB_NAME, exc)
            return []

    def _meta_json(self, key: str) -> dict | None:
        text = self.get_meta(key)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            log.warning("meta %r in %s is not JSON: ignored", key, DB_NAME)
            return None
        return data if isinstance(data, dict) else None


def job_dir(root: str | Path, job_id: int, state_id: str = "") -> Path:
    """A job's checkpoint and log directory: `job-N-STATEID`, so that a job of a new state (after the old one
    was lost) never finds another job's checkpoints under the same number; `job-N` for states older than ids."""
    return Path(root) / (f"job-{job_id}-{state_id}" if state_id else f"job-{job_id}")


def _spec_args(d: dict) -> dict:
    from ..rules.model import JobRules, parse_job_rules

    d = dict(d)
    d["command"] = tuple(d.get("command", ()))
    d["rules"] = parse_job_rules(d, "spec")      # a job's rules are stored inline, as in its job file
    for key in JobRules.FIELDS:
        d.pop(key, None)
    if d.get("adaptive") is not None:
        from ..elastic.families import parse_adaptive

        d["adaptive"] = parse_adaptive(d["adaptive"], d["job_type"], "spec.adaptive")
    return d


def _rows(data) -> list[tuple[int, ...]]:
    return [tuple(int(m) for m in r) for r in data]


def _matrix(data, n: int, m: int) -> list[list[float]]:
    out = [[float(v) for v in row] for row in data]
    if len(out) != n or any(len(row) != m for row in out):
        raise ValueError(f"expected a {n}x{m} matrix")
    return out


def open_readonly(state_dir: str | Path, timeout: float = 30.0) -> sqlite3.Connection:
    """For tools and tests: read the state while a scheduler runs (never creates the file)."""
    return sqlite3.connect(f"file:{Path(state_dir) / DB_NAME}?mode=ro", uri=True, timeout=timeout,
                           isolation_level=None)


class NotAStateDir(Exception):
    """The directory holds no scheduler state (no database, or not ours)."""


class StateDamaged(Exception):
    """The state file is not what the scheduler wrote (pages lost, a row that does not parse): the
    text says what; the scheduler adds where the backup is (runtime.statedir)."""


class StateReader(StateQueries):
    """Read-only view of a scheduler's state directory, for tools. Opens no write transaction and
    creates nothing; `snapshot()` groups reads into one short read transaction so that they see
    one consistent state while a scheduler writes (WAL readers never block the writer)."""

    def __init__(self, state_dir: str | Path, timeout: float = 5.0):
        self.dir = Path(state_dir)
        self.path = self.dir / DB_NAME
        if not self.path.is_file():
            raise NotAStateDir(f"no {DB_NAME} in it")
        try:
            self._db = open_readonly(self.dir, timeout)
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise NotAStateDir(f"{DB_NAME} cannot be read ({exc})") from None
        missing = {"jobs", "attempts", "workers", "throughputs", "meta"} - tables
        if missing:
            self._db.close()
            raise NotAStateDir(f"{DB_NAME} is not a gavel_ng state (no {', '.join(sorted(missing))} table)")

    def __enter__(self) -> StateReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction around the reads inside it (released at once after them)."""
        self._db.execute("BEGIN")
        try:
            yield
        finally:
            self._db.execute("COMMIT")

    def _all(self, sql: str, args: tuple = ()) -> list[tuple]:
        return self._db.execute(sql, args).fetchall()

    def _dicts(self, sql: str, args: tuple) -> list[dict]:
        cur = self._db.execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
