"""Elastic, goodput-aware jobs (Pollux, OSDI'21), independent of the simulator.

* `efficiency`: what an adaptive job declares (`AdaptiveSpec`), Pollux's statistical
  efficiency ``E(M) = (phi + M0)/(phi + M)`` with a gradient noise scale that grows over
  training (`PhiCurve`), and progress counted in M0-equivalent examples.
* `families`: Pollux's six model families (Table 1) mapped onto gavel_ng's profiles,
  with every parameter's source.
* `goodput`: Pollux's throughput model (T_grad, T_sync, overlap, accumulation) read off
  the built-in performance model per (family, GPU type), memory limits included, and
  the exact vectorized best-batch search per configuration.
* `workload`: the ``pollux`` workload (Table 1 mix, 160 jobs in 8 hours), a reader
  and writer for the Pollux artifact's workload CSVs, and `load_workload`: either one fit
  to a cluster, as `simulate` and `sweep` run it.
* `registry`: the elastic simulator's policies and their declared properties;
  `policy` (goodput LP), `tiresias` and `pollux` (per-round planners on `rounds`);
  `simulate` runs them.

See docs/elastic.md.
"""

from __future__ import annotations

from .efficiency import (
                         LR_SCALING_RULES,
                         AdaptiveSpec,
                         PhiCurve,
                         efficiency,
                         progress_after,
                         progress_per_step,
                         seconds_to_progress,
)
from .families import FAMILIES, SIZE_CLASSES, ElasticFamily, get_family
from .goodput import (
                         ConfigTable,
                         ThroughputParams,
                         best_batch,
                         best_goodput,
                         best_goodput_many,
                         configuration_table,
                         goodput,
                         speedup,
                         throughput_params,
)
from .workload import (
                         POLLUX_APPLICATIONS,
                         ElasticTrace,
                         cap_tuned_gpus,
                         fixed_job_table,
                         pollux_workload,
                         read_pollux_csv,
                         tuned_configurations,
                         write_pollux_csv,
)

__all__ = ["FAMILIES", "LR_SCALING_RULES", "POLLUX_APPLICATIONS", "SIZE_CLASSES", "AdaptiveSpec", "ConfigTable",
           "ElasticFamily", "ElasticTrace", "PhiCurve", "ThroughputParams", "best_batch", "best_goodput",
           "best_goodput_many", "cap_tuned_gpus", "configuration_table", "efficiency", "fixed_job_table",
           "get_family", "goodput",
           "pollux_workload", "progress_after", "progress_per_step", "read_pollux_csv", "seconds_to_progress",
           "speedup", "throughput_params", "tuned_configurations", "write_pollux_csv"]
