"""Placement constraints and admission control (ESCHER, Blox), the same in simulation and deployment.

model.py: what can be asked (JobRules per job, ClusterRules per cluster); compile.py: rules over
worker types into the policy's input; limits.py: quota rows of the LP; placement.py: rules over
servers; admission.py: who may queue how much.
"""

from __future__ import annotations

import importlib

# name -> submodule, loaded on first use: what only reads a job's rules (protocol.jobspec, and through it a
# worker daemon or the heartbeat port's process) does not load compile.py's scipy
_EXPORTS = {"AdmissionControl": "admission", "Refusal": "admission", "RuleCompiler": "compile", "Server": "compile",
            "simulated_servers": "compile", "Limits": "limits", "Admission": "model", "ClusterRules": "model",
            "JobRules": "model", "check_entity": "model", "entities_of": "model", "parse_job_rules": "model",
            "ServerRules": "placement"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
