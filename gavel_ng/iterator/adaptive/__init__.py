"""Adaptive mode of a training job (Pollux's agent): gradient noise scale, online throughput
fit, best batch for the job's GPUs, LR scaling. See docs/elastic.md, "Adaptive training scripts"."""

from .fit import Config, IterationTimes, fit_throughput, make_params
from .lr import lr_factor
from .noise import NoiseScale, differenced_estimate, two_batch_estimate
from .training import AdaptiveBatchSampler, AdaptiveTraining

__all__ = ["AdaptiveBatchSampler", "AdaptiveTraining", "Config", "IterationTimes", "NoiseScale",
           "differenced_estimate", "fit_throughput", "lr_factor", "make_params", "two_batch_estimate"]
