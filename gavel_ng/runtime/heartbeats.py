"""A worker's usual heartbeat, answered from its row: one decision for the scheduler and for its heartbeat
port (runtime.front).

A row is what a heartbeat needs of the state: whether the worker is alive, whether a fence waits
for it, the token its daemon registered with, and its live attempts with their lease ends. The
usual heartbeat (the worker runs exactly attempts live here, no fence) changes nothing but the
worker's `last_seen`, so a copy of the row answers it as the state would. Anything else (an
attempt the row does not know, a dead worker, a fence) is not answered here (None): the
scheduler's locked path decides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..protocol.protos import gavel_pb2 as pb
from .jobs import AttemptRef


@dataclass(frozen=True)
class HeartbeatAnswer:
    """What a worker learns from its heartbeat: attempts to stop, and its attempts' lease ends."""

    kills: list[AttemptRef]
    leases: list[tuple[AttemptRef, float]]    # (attempt, seconds left)


class WorkerRow(NamedTuple):
    """A tuple: 1,250 of them are made every publication (runtime.front), and compared and pickled."""

    alive: bool
    fenced: bool                                     # a fence waits for it: the answer needs the state's lock
    call_token: str                                  # its daemon's, from the registration ("": none given)
    attempts: tuple[tuple[int, int, float, bool], ...]   # (job id, attempt, lease end (unix s), reported here)


def quick_answer(row: WorkerRow, running: list[tuple[int, int]], now: float) -> HeartbeatAnswer | None:
    """The answer when the worker runs nothing but attempts the row holds live (job id, attempt), else None."""
    if not row.alive or row.fenced:
        return None
    held = {m: a for m, a, _, _ in row.attempts}
    for m, a in running:
        if held.get(m) != a:
            return None
    return HeartbeatAnswer([], [(AttemptRef(m, a), end - now) for m, a, end, reported in row.attempts if not reported])


def heartbeat_reply(answer: HeartbeatAnswer) -> pb.HeartbeatReply:
    reply = pb.HeartbeatReply(kill=[pb.AttemptRef(job_id=k.job_id, attempt=k.attempt) for k in answer.kills])
    for ref, seconds_left in answer.leases:
        reply.leases.add(job_id=ref.job_id, attempt=ref.attempt, seconds_left=seconds_left)
    return reply
