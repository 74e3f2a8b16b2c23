"""Shared fixtures. The reference table is Gavel's measured one, shipped with gavel_ng as
the built-in table "gavel-osdi20": tests need nothing beside the repository."""

from __future__ import annotations

import contextlib
import gzip
import sys
from importlib import resources
from pathlib import Path

import pytest

REFERENCE_NAME = "gavel-osdi20"


@pytest.fixture(scope="session")
def reference_table_path(tmp_path_factory) -> Path:
    """The packaged file, decompressed: Gavel's simulation_throughputs.json byte for byte."""
    from gavel_ng.throughputs import BUILTIN_TABLES

    packaged = resources.files("gavel_ng").joinpath(*BUILTIN_TABLES[REFERENCE_NAME].split("/"))
    path = tmp_path_factory.mktemp("reference") / "simulation_throughputs.json"
    path.write_bytes(gzip.decompress(packaged.read_bytes()))
    return path


@pytest.fixture(scope="session")
def reference_table():
    from gavel_ng.throughputs import ThroughputTable

    return ThroughputTable.builtin(REFERENCE_NAME)


def pytest_collection_modifyitems(config, items):
    """A test on a loopback cluster (real scheduler, worker and job processes) is slow by what it
    uses; others say so with @pytest.mark.slow. `make test-fast` (-m "not slow") skips them."""
    for item in items:
        if "cluster_factory" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
    # slow tests first: they mostly wait on real processes, so under `make test`'s two test processes
    # the quick, CPU-bound tests fill the gaps instead of leaving the long ones to run last
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@contextlib.contextmanager
def registry_kept():
    """The policies registered inside (a plugin, a decorator) leave at its end: the registry is global."""
    from gavel_ng.policies import REGISTRY

    with REGISTRY.kept():
        yield
    for name in [m for m in sys.modules if m.startswith(("gavel_ng_plugin_", "gng_test_"))]:
        del sys.modules[name]


@pytest.fixture
def clean_registry():
    """The policies a test registers (a plugin, a decorator) leave with it."""
    with registry_kept():
        yield


@pytest.fixture(scope="module")
def module_registry():
    """The policies a test module registers leave with it."""
    with registry_kept():
        yield
