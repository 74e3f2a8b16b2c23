"""Imports every built-in policy module so that each registers itself (done by the package's __init__)."""

from . import allox, cost, fairness, ftf, gandiva, goodput, hierarchical, makespan, order, pollux, sia, tiresias  # noqa: F401
