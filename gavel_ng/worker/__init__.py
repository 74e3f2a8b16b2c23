"""Deployment runtime (Gavel §6): scheduler service, worker daemons, protocol, state store.

The scheduler runs gavel_ng.mechanism's SchedulerLoop, the loop the simulator runs, with
an executor that drives real workers over gRPC. See docs/deploy.md.
"""

from .client import ClusterStatus, JobStatus, SchedulerClient, SchedulerError, WorkerStatus
from .spec import ClusterConfig, JobSpec

__all__ = ["ClusterConfig", "ClusterStatus", "JobSpec", "JobStatus", "SchedulerClient", "SchedulerError",
           "WorkerStatus"]
