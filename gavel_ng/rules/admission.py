"""Admission control: who may queue how much, decided before the policy sees a job (Blox).

One `AdmissionControl` per scheduler keeps the active (queued or running) jobs of each user
and decides each arrival against the cluster's `Admission` limits: accept all (the
default), at most N active jobs per user, at most G GPUs (sum of scale factors) per user,
at most Q active jobs in the cluster. The simulator's SchedulerLoop asks it as jobs arrive
and reports refusals in its summary; the scheduler service asks it in Submit, where a
refusal is an error naming the limit (`gavel-ng submit` exits 2). Jobs without a user
count under one shared anonymous user.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Admission

ANONYMOUS = "(no user)"


@dataclass(frozen=True)
class Refusal:
    """Why a job was not admitted: the limit (`rule`, an Admission field) and a sentence."""

    rule: str
    limit: int
    reason: str


class AdmissionControl:
    def __init__(self, admission: Admission | None = None):
        self.admission = admission or Admission()
        self.active: dict[object, tuple[str, int]] = {}     # job -> (user, GPUs)
        self.jobs_of: dict[str, int] = {}
        self.gpus_of: dict[str, int] = {}
        self.refusals: dict[str, int] = {}                   # rule -> refused jobs

    def check(self, user: str | None, gpus: int) -> Refusal | None:
        """The refusal a job of `user` needing `gpus` GPUs would get now, or None."""
        a = self.admission
        u = user or ANONYMOUS
        if a.max_queue is not None and len(self.active) + 1 > a.max_queue:
            return Refusal("max_queue", a.max_queue, f"the cluster's queue is full ({len(self.active)} active jobs, "
                                                     f"max_queue {a.max_queue})")
        if a.max_jobs_per_user is not None and self.jobs_of.get(u, 0) + 1 > a.max_jobs_per_user:
            return Refusal("max_jobs_per_user", a.max_jobs_per_user,
                           f"user {u!r} has {self.jobs_of.get(u, 0)} active jobs (max_jobs_per_user "
                           f"{a.max_jobs_per_user})")
        if a.max_gpus_per_user is not None and self.gpus_of.get(u, 0) + gpus > a.max_gpus_per_user:
            return Refusal("max_gpus_per_user", a.max_gpus_per_user,
                           f"user {u!r} would hold {self.gpus_of.get(u, 0) + gpus} GPUs with this job "
                           f"(max_gpus_per_user {a.max_gpus_per_user})")
        return None

    def admit(self, job, user: str | None, gpus: int) -> Refusal | None:
        """Admit the job (remembered until `release`), or say why not."""
        if job in self.active:
            return None
        refusal = self.check(user, gpus)
        if refusal is not None:
            self.refusals[refusal.rule] = self.refusals.get(refusal.rule, 0) + 1
            return refusal
        self.add(job, user, gpus)
        return None

    def add(self, job, user: str | None, gpus: int) -> None:
        """Count an active job without asking (a restarted scheduler's jobs)."""
        u = user or ANONYMOUS
        self.active[job] = (u, int(gpus))
        self.jobs_of[u] = self.jobs_of.get(u, 0) + 1
        self.gpus_of[u] = self.gpus_of.get(u, 0) + int(gpus)

    def release(self, job) -> None:
        """The job finished or was cancelled: its user's share is free again."""
        got = self.active.pop(job, None)
        if got is None:
            return
        u, g = got
        self.jobs_of[u] -= 1
        self.gpus_of[u] -= g
