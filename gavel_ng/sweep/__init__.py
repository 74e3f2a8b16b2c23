"""Sweeps: grids of simulate runs, in parallel, appended to one resumable results table."""

from .grid import SweepPoint, expand
from .point import PointResult, run_point, simulate_point
from .runner import SweepReport, run_sweep
from .store import ResultsStore

__all__ = ["PointResult", "ResultsStore", "SweepPoint", "SweepReport", "expand", "run_point", "run_sweep",
           "simulate_point"]
