"""Placement constraints and admission control (ESCHER, Blox), the same in simulation and deployment.

model.py: what can be asked (JobRules per job, ClusterRules per cluster); compile.py: rules over
worker types into the policy's input; limits.py: quota rows of the LP; placement.py: rules over
servers; admission.py: who may queue how much.
"""

from .admission import AdmissionControl, Refusal
from .compile import RuleCompiler, Server, simulated_servers
from .limits import Limits
from .model import Admission, ClusterRules, JobRules, check_entity, entities_of, parse_job_rules
from .placement import ServerRules

__all__ = ["Admission", "AdmissionControl", "ClusterRules", "JobRules", "Limits", "Refusal", "RuleCompiler",
           "Server", "ServerRules", "check_entity", "entities_of", "parse_job_rules", "simulated_servers"]
