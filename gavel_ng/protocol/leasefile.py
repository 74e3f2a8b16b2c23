"""How a renewed lease reaches the worker when heartbeats do not: through the job.

The scheduler answers a job's InitJob/UpdateLease with `lease_end` and a MAC over
(job, attempt, lease_end) keyed by a key derived from the cluster token, which workers get
when they register. The job's iterator writes both to
the file its worker named (GAVEL_NG_LEASE_FILE); the worker's monitor reads it and moves
the attempt's kill deadline. The job never holds the key, so it cannot forge a later
end; replaying an older one of its own gains nothing, as deadlines only move forward.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path

ENV = "GAVEL_NG_LEASE_FILE"


def lease_mac(secret: str, job_id: int, attempt: int, lease_end: float) -> str:
    """The prefix keeps a lease MAC from ever matching a job token's (same key)."""
    msg = f"lease:{int(job_id)}:{int(attempt)}:{float(lease_end)!r}"
    return hmac.new(secret.encode(), msg.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class LeaseRecord:
    job_id: int
    attempt: int
    lease_end: float
    mac: str

    def valid(self, secret: str) -> bool:
        return hmac.compare_digest(self.mac.encode(), lease_mac(secret, self.job_id, self.attempt,
                                                                self.lease_end).encode())


def write(path: Path, rec: LeaseRecord) -> None:
    """Atomically, so the worker never reads half a record."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"job_id": rec.job_id, "attempt": rec.attempt, "lease_end": rec.lease_end,
                               "mac": rec.mac}))
    os.replace(tmp, path)


def parse(text: bytes | str | None) -> LeaseRecord | None:
    """None when missing or malformed (the job wrote it: trust nothing until the MAC checks). The worker
    reads the file itself, as a file of the job's (worker.isolation)."""
    try:
        d = json.loads(text)
        return LeaseRecord(int(d["job_id"]), int(d["attempt"]), float(d["lease_end"]), str(d["mac"]))
    except (ValueError, TypeError, KeyError, OverflowError):
        return None
