"""An adaptive job's report on the wire (AdaptiveReport): one place for its encoding.

Proto3 has no "unset" for doubles, so a noise scale or goodput the job does not know yet
travels as -1, and "no fit yet" as no parameters. The job's iterator encodes, the scheduler
and the client decode, all here.
"""

from __future__ import annotations

from .protos import gavel_pb2 as pb

FIELDS = ("gpus", "servers", "batch", "local_batch", "accumulation", "phi", "goodput", "params", "fit_error",
          "max_local_batch", "worker_type", "reported")


def encode_report(r: dict) -> pb.AdaptiveReport:
    """A report as a dict (AdaptiveTraining.report(), or the scheduler's record) -> the message."""
    return pb.AdaptiveReport(gpus=r["gpus"], servers=r["servers"], batch=r["batch"], local_batch=r["local_batch"],
                             accumulation=r["accumulation"], phi=-1.0 if r["phi"] is None else r["phi"],
                             goodput=-1.0 if r["goodput"] is None else r["goodput"], params=r["params"] or [],
                             fit_error=r["fit_error"] or 0.0, max_local_batch=r["max_local_batch"],
                             worker_type=r.get("worker_type") or "", reported=r.get("reported") or 0.0)


def decode_report(m: pb.AdaptiveReport) -> dict:
    """The message -> a dict of FIELDS (None where unknown, params a tuple or None)."""
    d = {name: getattr(m, name) for name in FIELDS}
    d["phi"] = m.phi if m.phi >= 0 else None
    d["goodput"] = m.goodput if m.goodput >= 0 else None
    d["params"] = tuple(m.params) or None
    return d
