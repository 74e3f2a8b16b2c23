"""The adaptive-job model (Pollux, OSDI'21): what an adaptive job declares and how fast it
progresses, independent of any scheduler. The simulator (gavel_ng.simulator) and the round
policies (gavel_ng.policies: goodput, pollux, tiresias) use it; it imports neither.

* `efficiency`: what an adaptive job declares (`AdaptiveSpec`), Pollux's statistical
  efficiency ``E(M) = (phi + M0)/(phi + M)`` with a gradient noise scale that grows over
  training (`PhiCurve`), and progress counted in M0-equivalent examples.
* `families`: Pollux's six model families (Table 1) mapped onto gavel_ng's profiles,
  with every parameter's source.
* `goodput`: Pollux's throughput model (T_grad, T_sync, overlap, accumulation) read off
  the built-in performance model per (family, GPU type), memory limits included, and
  the exact vectorized best-batch search per configuration.
* `workload`: the ``pollux`` workload (Table 1 mix, 160 jobs in 8 hours), a reader and
  writer for the Pollux artifact's workload CSVs, and its fit to a cluster.
* `measured`, `profile_sets`: profile sets by name: ``modeled`` (the above) or ``sia``, Pollux's
  parameters and the noise scale fitted to the Sia artifact's measurements (package data).
* `sia_workloads`: job mixes in the style of Sia's evaluation (SOSP'23 §4.1): Philly-,
  Helios- and newTrace-like arrivals and size classes, each job at a tuned configuration.
* `bounds`: each job's contention-free JCT, a lower bound to judge a policy against.

See docs/elastic.md.
"""

from __future__ import annotations

from .bounds import contention_free_jct
from .efficiency import (
                         LR_SCALING_RULES,
                         PROFILE_SETS,
                         AdaptiveSpec,
                         PhiCurve,
                         PhiTable,
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
from .profile_sets import measured_set, phi_curve
from .sia_workloads import SIA_WORKLOADS, helios_like, newtrace_like, philly_like, sia_workload
from .workload import (
                         POLLUX_APPLICATIONS,
                         ElasticTrace,
                         cap_tuned_gpus,
                         fit_to_cluster,
                         fixed_job_table,
                         load_workload,
                         pollux_workload,
                         read_pollux_csv,
                         tuned_configurations,
                         write_pollux_csv,
)

__all__ = ["FAMILIES", "LR_SCALING_RULES", "POLLUX_APPLICATIONS", "PROFILE_SETS", "SIA_WORKLOADS", "SIZE_CLASSES",
           "AdaptiveSpec", "ConfigTable", "ElasticFamily", "ElasticTrace", "PhiCurve", "PhiTable", "ThroughputParams",
           "best_batch", "best_goodput",
           "best_goodput_many", "cap_tuned_gpus", "configuration_table", "contention_free_jct", "efficiency",
           "fit_to_cluster", "fixed_job_table", "load_workload",
           "get_family", "goodput", "helios_like", "measured_set", "newtrace_like", "phi_curve", "philly_like",
           "sia_workload",
           "pollux_workload", "progress_after", "progress_per_step", "read_pollux_csv", "seconds_to_progress",
           "speedup", "throughput_params", "tuned_configurations", "write_pollux_csv"]
