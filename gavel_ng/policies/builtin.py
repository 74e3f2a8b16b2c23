"""Imports every built-in policy module so that each registers itself."""

from . import allox, cost, fairness, ftf, gandiva, hierarchical, makespan, order  # noqa: F401
