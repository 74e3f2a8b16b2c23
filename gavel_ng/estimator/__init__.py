"""Throughput estimator: profiling against reference jobs, matrix completion, online measurements.

Gavel §3.3: a new job is profiled against a few pre-profiled reference jobs; low-rank
completion fills the rest of its row (its *fingerprint*), the nearest reference job
stands in for it, and measurements replace estimates as the job runs.
"""

from .completion import LowRankModel, Selection, fit_low_rank, select_model
from .fingerprint import Fingerprint, PairModel
from .isolated import IsolatedModel, fill_column
from .online import EstimatorConfig, Measurement, ThroughputEstimator
from .profiling import PairSample, Profile, ProfilePlan, plan_profile, profile_from_table
from .reference import IsolatedReference, ReferenceSet, family, true_row

__all__ = [
    "EstimatorConfig", "Fingerprint", "IsolatedModel", "IsolatedReference", "LowRankModel", "Measurement",
    "PairModel", "PairSample", "Profile", "ProfilePlan", "ReferenceSet", "Selection", "ThroughputEstimator",
    "family", "fill_column", "fit_low_rank", "plan_profile", "profile_from_table", "select_model", "true_row",
]
