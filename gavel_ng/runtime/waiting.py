"""Why a queued job waits: one sentence per job, decided where the round is planned.

The executor calls `Waiting.update(planned)` each time it plans a round, with the jobs
that plan runs; every queued job then gets the first reason that holds, from the most
lasting (nothing could ever run it) to the most passing (its turn has not come). The
sentences are stored only when they change (one statement for those), so a state
directory read offline says the same, and 20,000 queued jobs that keep waiting for the
same reason cost no writes. A fence or a failed attempt is said at once (`current`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable

import numpy as np

from ..protocol.jobspec import JobSpec
from .jobs import JobState
from .state import ClusterState
from .store import StoreError

NEW = "waiting for the next round: submitted after this round was planned"
CHUNK = 500              # queued jobs given their reason per hold of the state's lock


def _gpus(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def _list(names) -> str:
    return ", ".join(names) or "none"


class Waiting:
    """`quotas`: the operator's GPU quotas per entity and worker type (rules.ClusterRules.quotas)."""

    def __init__(self, state: ClusterState, quotas: dict[str, dict[str, float]], policy: str):
        self.state = state
        self.quotas = quotas
        self.policy = policy
        self.held: dict[int, str] = {}       # job -> why admission holds it
        self._shares: tuple[object, dict[int, np.ndarray]] = (None, {})

    # ----- what no round can change while the workers stay -------------------------------------
    def never(self, spec: JobSpec, rate: Callable[[str], float]) -> str | None:
        """Why no live worker can run a job of `spec` (`rate(type)`: its steps/s there), or None.
        A job may span the workers of one type (placement splits it when no one server has room),
        so what counts is a type's GPUs on live workers carrying the labels the job needs."""
        st = self.state
        rules = spec.rules
        allowed = [w for w in st.worker_types if rules is None or rules.allowed_types is None
                   or w in {t.lower() for t in rules.allowed_types}]
        runnable = [w for w in allowed if rate(w) > 0]
        if not runnable:
            zero = [w for w in allowed if w not in runnable]
            limit = f"its rules allow {_list(allowed)}; " if rules is not None and rules.allowed_types else ""
            return f"no worker type can run it: {limit}its throughput is 0 steps/s on {_list(zero)}"
        labels = set(rules.labels) if rules is not None else set()
        live: dict[str, list[int]] = {w: [] for w in runnable}
        for w in st.workers.values():
            if w.alive and w.gpu_type in live and labels <= set(w.labels):
                live[w.gpu_type].append(w.gpus)
        need = f" with labels {_list(sorted(labels))}" if labels else ""
        if not any(live.values()):
            return f"no live worker{need} of a type it may run on ({_list(runnable)})"
        best = max(runnable, key=lambda w: sum(live[w]))
        have = sum(live[best])
        if have < spec.scale_factor:
            per = Counter(live[best])
            shape = " + ".join(f"{n} x {_gpus(g)}" for g, n in sorted(per.items(), reverse=True))
            return (f"needs {_gpus(spec.scale_factor)} of one type; the largest worker type it may run on has "
                    f"{have} ({best}{need}: {shape})")
        quota = self.quotas.get(getattr(rules, "entity", None))
        if quota is not None and all(quota.get(w, math.inf) < spec.scale_factor for w in runnable):
            caps = ", ".join(f"{w} {quota.get(w, math.inf):g}" for w in runnable)
            return f"needs {_gpus(spec.scale_factor)} of one type; its entity {rules.entity!r} has a quota of {caps}"
        return None

    # ----- each round ----------------------------------------------------------------------------
    def update(self, planned: dict[int, str]) -> None:
        """`planned`: job -> where the round being planned runs it. Takes the lock itself, CHUNK jobs at a
        time (20,000 queued jobs hold no heartbeat up); stores the changed reasons without it."""
        st = self.state
        now = time.time()
        with st.lock:                   # a copy of the jobs: they are read outside the lock, checked again inside
            jobs = list(st.jobs.values())
            used, cap = self._entity_use(), st.registry.capacity()
        shares = self._allocated()      # the allocation is replaced whole, never changed in place
        queued = [j.job_id for j in jobs if j.status == "queued" and j.live is None]
        col = {w: k for k, w in enumerate(st.worker_types)}
        nevers: dict[tuple, str | None] = {}      # one answer per (job type, scale factor, rules)
        changed: dict[int, str] = {}
        for i in range(0, len(queued), CHUNK):
            with st.lock:
                for m in queued[i:i + CHUNK]:
                    job = st.jobs.get(m)
                    if job is None or job.status != "queued" or job.live is not None:
                        continue
                    kind = (job.key, job.spec.rules)
                    if kind not in nevers:
                        row = st.believed_isolated([job.job_id])[0]
                        nevers[kind] = self.never(job.spec, lambda w, row=row: float(row[col[w]]))
                    text, per_round = self._why(job, now, nevers[kind], used, shares, planned, cap)
                    job.waits_for_round = per_round
                    if text != job.reason:
                        changed[job.job_id] = text
        if not changed:
            return
        try:
            st.store.save_reasons(changed)
        except StoreError:          # said by the store; tried again next round
            return
        with st.lock:
            for m, text in changed.items():
                if m in st.jobs:
                    st.jobs[m].reason = text

    def current(self, job: JobState) -> str:
        """What status shows for a queued job (lock held): a fence or a failed attempt at once, else the
        round's decision; "" for a job that is not queued."""
        if job.status != "queued" or job.live is not None:
            return ""
        return self._event(job, time.time()) or job.reason or NEW

    def _why(self, job, now, never, used, shares, planned, cap) -> tuple[str, bool]:
        """(reason, whether a later round may end it): the first that holds, most lasting first."""
        event = self._event(job, now)
        if event:
            return event, False
        if job.job_id in self.held:
            return f"held by admission: {self.held[job.job_id]}", False
        if never:
            return never, False
        full = self._over_quota(job, used, cap)
        if full:
            return full, True
        if job.job_id in planned:
            return f"placed for the next round on {planned[job.job_id]}; launched when it starts", True
        share = shares.get(job.job_id)
        if share is None:
            return NEW, True
        if float(share.sum()) <= 1e-6:
            n = len(shares)
            return (f"not allocated by the policy ({self.policy}) this round: it gives the job 0 of every worker "
                    f"type ({n} jobs share {_gpus(int(cap.sum()))})"), True
        got = ", ".join(f"{share[k]:.2f} of {w}" for k, w in enumerate(self.state.worker_types) if share[k] > 1e-6)
        return (f"allocated {got} but not placed this round: other jobs' turn on those GPUs "
                f"(time-sharing by priority)"), True

    def _event(self, job: JobState, now: float) -> str:
        """A relaunch held back by the job's own last attempt (lock held)."""
        st = self.state
        if job.fenced(now):
            f = job.fence
            until = time.strftime("%H:%M:%S", time.localtime(f.until))
            return (f"relaunch fenced: attempt {f.attempt} was lost and may still run; waits until "
                    f"{_list(sorted(f.workers))} confirm it ended, or its lease and grace end at {until}")
        if job.failures and ((job.blocked_round >= 0 and job.blocked_round == st.round_no) or now < job.retry_at):
            wait = f", nor before {time.strftime('%H:%M:%S', time.localtime(job.retry_at))} (backoff)" \
                if now < job.retry_at else ""
            error = job.error.split(": ", 1)[-1]
            return (f"attempt {job.attempts} failed ({job.failures} of {st.config.max_failures} failures "
                    f"allowed; {error}): relaunched no sooner than the next round{wait}")
        return ""

    def _entity_use(self) -> dict[tuple[str, str], int]:
        """GPUs of each type the running jobs of each quota'd entity hold."""
        out: dict[tuple[str, str], int] = {}
        if not self.quotas:
            return out
        st = self.state
        for m in st.index.live:                # the running jobs only (runtime.live)
            j = st.jobs[m]
            ent = getattr(j.spec.rules, "entity", None)
            if ent in self.quotas:
                key = (ent, j.live.worker_type)
                out[key] = out.get(key, 0) + len(j.live.placement)
        return out

    def _over_quota(self, job: JobState, used, cap: np.ndarray) -> str:
        """Its entity's quota leaves no room on any type whose live workers could hold the job now."""
        ent = getattr(job.spec.rules, "entity", None)
        quota = self.quotas.get(ent)
        if quota is None:
            return ""
        sf = job.spec.scale_factor
        types = [w for k, w in enumerate(self.state.worker_types) if cap[k] >= sf]
        if not types or any(used.get((ent, w), 0) + sf <= quota.get(w, math.inf) for w in types):
            return ""
        held = ", ".join(f"{used.get((ent, w), 0)} of its {quota[w]:g} {w} GPUs" for w in types)
        return f"over its entity's quota: entity {ent!r} holds {held}; it needs {_gpus(sf)} more"

    def _allocated(self) -> dict[int, np.ndarray]:
        """Each allocated job's time share per worker type (summed over its rows), rebuilt per allocation."""
        rows, X = self.state.allocation
        if self._shares[0] is rows:
            return self._shares[1]
        out: dict[int, np.ndarray] = {}
        for r, row in enumerate(rows):
            for m in row:
                out[m] = out[m] + X[r] if m in out else np.array(X[r], dtype=float)
        self._shares = (rows, out)
        return out
