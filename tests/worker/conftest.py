"""Fixtures of the loopback cluster tests (helpers live in loopback_cluster.py)."""

from loopback_cluster import cluster_factory  # noqa: F401
