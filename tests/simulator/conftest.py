import math

import numpy as np
import pytest

from gavel_ng.throughputs import ThroughputTable
from gavel_ng.traces import Trace


@pytest.fixture
def tiny_table():
    """A (v100 2/s, k80 0/s), B (v100 0/s, k80 1/s), C (1/s on both); W: a 4-GPU job."""
    return ThroughputTable(isolated={
        "v100": {("A", 1): 2.0, ("B", 1): 0.0, ("C", 1): 1.0, ("W", 4): 4.0},
        "k80": {("A", 1): 0.0, ("B", 1): 1.0, ("C", 1): 1.0, ("W", 4): 1.0},
        "v100_unconsolidated": {("W", 4): 2.5},
    })


@pytest.fixture
def make_trace():
    return _make_trace


def _make_trace(rows):
    """rows: (type, scale factor, steps, arrival)."""
    return Trace([r[0] for r in rows], np.array([r[1] for r in rows]), np.ones(len(rows)),
                 np.array([float(r[2]) for r in rows]), np.full(len(rows), math.inf),
                 np.array([float(r[3]) for r in rows]))
