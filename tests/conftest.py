"""Shared fixtures. The reference table lives in ../shared beside the repository."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REFERENCE_TABLE = REPO.parent / "shared" / "reference" / "gavel" / "simulation_throughputs.json"


@pytest.fixture(scope="session")
def reference_table_path() -> Path:
    if not REFERENCE_TABLE.exists():
        pytest.fail(f"reference table missing at {REFERENCE_TABLE}: CI clones the repo with ../shared beside it")
    return REFERENCE_TABLE


@pytest.fixture(scope="session")
def reference_table(reference_table_path):
    from gavel_ng.throughputs import ThroughputTable

    return ThroughputTable.load(reference_table_path)
