"""Trace-driven simulation of the round-based scheduler (same loop as the runtime)."""

from .engine import SimConfig, SimResult, simulate
from .metrics import write_outputs
from .tables import default_table

__all__ = ["SimConfig", "SimResult", "default_table", "simulate", "write_outputs"]
