"""Trace-driven simulation: one simulator for every policy (allocation or round) on Gavel traces and
Pollux workloads (ElasticTrace), with fixed and adaptive jobs, on the scheduler loop the runtime shares."""

from .engine import SimConfig, SimResult, simulate
from .metrics import write_outputs
from .tables import default_table

__all__ = ["SimConfig", "SimResult", "default_table", "simulate", "write_outputs"]
