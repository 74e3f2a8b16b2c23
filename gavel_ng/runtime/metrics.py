"""Prometheus metrics of the scheduler, served at http://BIND:PORT/metrics (`--metrics-port`).

Most values are read from ClusterState when scraped (one short hold of its lock), so the
scheduler's code keeps no second set of books: jobs by state, GPUs, workers, and the
counters the state already keeps (launches, renewals, JobBook.tally, the store's refused
writes, GPU-seconds by type, the policy's own errors). Durations are observed as they happen: the
rounds' wall time, the policy's solve time, and the paper's metrics, each job's completion time
(JCT, when it is done) and queueing delay (submission to first start, when it first starts); the
jobs a restarted scheduler restores are observed again, so those two histograms cover every job the
state holds. Each service has its own CollectorRegistry, so several services in one process
(tests) do not clash.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..errors import InputError
from .jobs import FINISHED
from .state import ClusterState

log = logging.getLogger(__name__)
STATES = ("queued", "running", *FINISHED)
FAILURE_KINDS = ("crashed", "lost", "failed")   # attempts that crashed, attempts lost, jobs failed for good
_H = 3600.0
JCT_BUCKETS = (60, 300, 900, 1800, _H, 2 * _H, 4 * _H, 8 * _H, 16 * _H, 24 * _H, 48 * _H, 96 * _H, 168 * _H)
QUEUE_BUCKETS = (1, 5, 15, 60, 300, 900, 1800, _H, 4 * _H, 12 * _H, 24 * _H, 72 * _H)


class StateCollector:
    """What ClusterState knows, as metric families, read at scrape time."""

    def __init__(self, state: ClusterState, policy_errors: Callable[[], int] | None = None):
        self.state = state
        self.policy_errors = policy_errors   # the service's count of the policy's own errors

    def collect(self):
        st = self.state
        with st.lock:
            states = Counter(st.index.counts)
            busy = Counter()
            total = dict(zip(st.worker_types, st.registry.capacity()))
            alive = sum(w.alive for w in st.workers.values())
            stats, tally = dict(st.stats), Counter(st.book.tally)
            round_no = st.round_no
            now = time.time()
            held = Counter(st.book.gpu_seconds_total)
            for m in st.index.live:             # the live attempts only (runtime.live)
                att = st.jobs[m].live
                busy[att.worker_type] += len(att.placement)
                held[att.worker_type] += max(now - max(att.launched, att.counted), 0.0) * len(att.placement)
        store = st.store
        jobs = GaugeMetricFamily("gavel_jobs", "Jobs by state", labels=["state"])
        for s in sorted(set(STATES) | set(states)):
            jobs.add_metric([s], states.get(s, 0))
        yield jobs
        yield GaugeMetricFamily("gavel_queue_length", "Jobs waiting for GPUs (state queued)",
                                value=states.get("queued", 0))
        gpus_busy = GaugeMetricFamily("gavel_gpus_busy", "GPUs held by live attempts, by worker type",
                                      labels=["gpu_type"])
        gpus_total = GaugeMetricFamily("gavel_gpus_total", "GPUs of live workers, by worker type", labels=["gpu_type"])
        for w in st.worker_types:
            gpus_busy.add_metric([w], busy.get(w, 0))
            gpus_total.add_metric([w], float(total[w]))
        yield gpus_busy
        yield gpus_total
        hours = CounterMetricFamily("gavel_gpu_hours", "GPU-hours held by jobs' attempts, by worker type "
                                                       "(running ones so far included)", labels=["gpu_type"])
        for w in st.worker_types:
            hours.add_metric([w], held.get(w, 0.0) / 3600.0)
        yield hours
        yield GaugeMetricFamily("gavel_workers_alive", "Registered workers not declared dead", value=alive)
        yield GaugeMetricFamily("gavel_round", "The current round's number", value=round_no)
        yield CounterMetricFamily("gavel_launches", "Attempts launched", value=stats["launches"])
        yield CounterMetricFamily("gavel_lease_renewals", "Leases renewed (a job kept its GPUs into the next round)",
                                  value=stats["renewals"])
        yield CounterMetricFamily("gavel_preemptions", "Attempts that stopped short of their job's end: at their "
                                                       "lease end without a renewal, or killed",
                                  value=tally["preempted"])
        failures = CounterMetricFamily("gavel_failures", "Attempts crashed, attempts lost, jobs failed for good",
                                       labels=["kind"])
        for kind in FAILURE_KINDS:
            failures.add_metric([kind], tally[kind])
        yield failures
        yield CounterMetricFamily("gavel_attempts_reclaimed", "Lost attempts taken back: their worker, declared "
                                                              "dead, still ran them and nothing replaced them",
                                  value=tally["reclaimed"])
        stalls = st.stalls
        yield CounterMetricFamily("gavel_scheduler_stall_seconds", "Seconds the scheduler could not answer heartbeats "
                                  "(its process stopped or starved, calls waiting for a thread or the state): no "
                                  "worker is declared dead for them", value=stalls.total)
        yield CounterMetricFamily("gavel_scheduler_stalls", "Stalls of the scheduler (waits of a second or more)",
                                  value=stalls.count)
        yield CounterMetricFamily("gavel_store_write_failures", "Writes the state store refused (disk full, I/O)",
                                  value=store.write_failures)
        yield GaugeMetricFamily("gavel_store_failing", "1 while the state store cannot be written",
                                value=int(store.failing))
        if self.policy_errors is not None:
            yield CounterMetricFamily("gavel_policy_errors", "Solves or decisions at which the policy's own code or "
                                      "formulation failed (equal shares, or no round, then; gavel-ng status says it)",
                                      value=self.policy_errors())


class FrontCollector:
    """The heartbeat port's process (runtime.front.HeartbeatFront), read at scrape time."""

    def __init__(self, front):
        self.front = front

    def collect(self):
        f = self.front
        beats = CounterMetricFamily("gavel_heartbeat_port_heartbeats", "Heartbeats the heartbeat port's process "
                                    "answered, and those it left to the scheduler's own port", labels=["outcome"])
        beats.add_metric(["answered"], f.answered)
        beats.add_metric(["asked"], f.asked)
        yield beats
        yield CounterMetricFamily("gavel_heartbeat_port_status_pages", "Status pages the heartbeat port's process "
                                  "served (the scheduler's default page, as an admin sees it)", value=f.pages)
        yield CounterMetricFamily("gavel_heartbeat_port_restarts", "Times the heartbeat port's process was started "
                                  "again after it ended", value=f.restarts)
        yield GaugeMetricFamily("gavel_heartbeat_port_up", "1 while the heartbeat port's process runs",
                                value=int(f.alive))


class Metrics:
    """The registry of one scheduler service, and its HTTP server once `serve()` was called."""

    def __init__(self, state: ClusterState, policy_errors: Callable[[], int] | None = None):
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StateCollector(state, policy_errors))
        self.rounds = Histogram("gavel_round_duration_seconds", "Wall time of each round", registry=self.registry,
                                buckets=(1, 5, 15, 30, 60, 120, 240, 360, 600, 1200, 3600))
        self.launches = Histogram("gavel_launch_batch_seconds", "Seconds from picking a batch of launches to its "
                                  "last RunJob answered (the round's start: all of its launches)",
                                  registry=self.registry, buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
        self.solves = Histogram("gavel_solve_duration_seconds", "Seconds the policy took to solve an allocation",
                                registry=self.registry,
                                buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
        self.jct = Histogram("gavel_job_completion_seconds", "Job completion time of jobs done: submission to end",
                             registry=self.registry, buckets=JCT_BUCKETS)
        self.queueing = Histogram("gavel_queueing_delay_seconds", "Submission to first start, per job that started",
                                  registry=self.registry, buckets=QUEUE_BUCKETS)
        with state.lock:
            for job in state.jobs.values():      # a restarted scheduler: the jobs it holds count again
                self._started(job)
                if job.status == "done":
                    self._done(job)
            state.book.on_done, state.book.on_start = self._done, self._started
        self._server = None

    def watch_front(self, front) -> None:
        """Export the heartbeat port's figures (runtime.front)."""
        self.registry.register(FrontCollector(front))

    def _done(self, job) -> None:
        if job.finished is not None:
            self.jct.observe(max(job.finished - job.submitted, 0.0))

    def _started(self, job) -> None:
        if job.first_start is not None:
            self.queueing.observe(max(job.first_start - job.submitted, 0.0))

    def serve(self, bind: str, port: int) -> int:
        """Serve /metrics on bind:port; an InputError naming --metrics-port when it cannot listen."""
        try:
            self._server, _ = start_http_server(port, addr=bind, registry=self.registry)
        except OSError as exc:
            raise InputError("--metrics-port", port, f"cannot listen on {bind}:{port} ({exc.strerror or exc})") \
                from None
        port = self._server.server_address[1]
        log.info("metrics at http://%s:%d/metrics", bind, port)
        return port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
