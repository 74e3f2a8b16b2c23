"""The scheduler's configuration and what it checks before accepting a job.

`ClusterConfig` is the cluster config file (JSON); `validate_submission` checks a
submitted `JobSpec` against the cluster's throughput table and worker types. Every
refusal names the field, so `gavel-ng scheduler` and the INVALID_ARGUMENT replies say
exactly what to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from ..errors import InputError, read_json, require
from ..jobtypes import parse_job_type
from ..protocol.jobspec import JobSpec, is_int, is_number
from ..throughputs import BUILTIN_TABLES
from .measured import MeasuredTable


def validate_submission(spec: JobSpec, table: MeasuredTable, worker_types: list[str], where: str,
                        estimated: bool = False) -> None:
    """What the scheduler checks before accepting a job: it must be schedulable on this cluster.

    A job's `job_type` is its class: a row of the throughput table (one of the paper's jobs), or a
    name of the user's own. A class of its own needs a `command` (the built-in runner knows only the
    table's jobs); its rates are what it measures, else what its job file declares (`throughputs`),
    else an estimate from similar reference jobs (runtime.measured). With the full estimator
    (`estimated`, `"estimator": true`) an undeclared class needs reference jobs at its scale factor.
    """
    spec.check(where)
    key = (spec.job_type, spec.scale_factor)
    if not table.known(key):
        if spec.job_type in table.base.job_types and not spec.command:
            raise InputError(f"{where}.scale_factor", spec.scale_factor,
                             f"no throughput for {spec.job_type} at this scale factor")
        if not spec.command:
            raise InputError(f"{where}.command", [], f"required: {spec.job_type!r} is not one of the throughput "
                                                     "table's job types, so the built-in runner cannot run it; give "
                                                     "the argv that starts your script")
        _check_declared(spec, table, worker_types, where)
        if estimated and not spec.throughputs:
            scales = sorted({k[1] for w in worker_types for k in table.base.isolated.get(w, {})})
            if spec.scale_factor not in scales:
                raise InputError(f"{where}.scale_factor", spec.scale_factor,
                                 f"no reference jobs at this scale factor (have {scales}); declare its "
                                 "throughputs in the job file")
        return
    if spec.throughputs:
        raise InputError(f"{where}.throughputs", spec.throughputs,
                         f"{spec.job_type!r} is a job type of the throughput table, whose rates (corrected by "
                         "measurements) it runs by; declare rates only for a class of your own (another job_type)")
    if not any(table.base.get(key, w) > 0 for w in worker_types):
        raise InputError(f"{where}.scale_factor", spec.scale_factor,
                         f"no throughput for {spec.job_type} at this scale factor on {', '.join(worker_types)}")
    if not spec.command:
        try:
            parse_job_type(spec.job_type)
        except ValueError:
            raise InputError(f"{where}.command", [], "required: the built-in runner knows only the 26 "
                                                     "Gavel job types") from None


def _check_declared(spec: JobSpec, table: MeasuredTable, worker_types: list[str], where: str) -> None:
    """A new class's declared rates: for this cluster's worker types, and the class's first declaration."""
    for w in spec.throughputs:
        require(w in worker_types, f"{where}.throughputs", w,
                f"not a worker type of this cluster ({', '.join(worker_types)})")
    key = (spec.job_type, spec.scale_factor)
    before = table.declared.get(key)
    if spec.throughputs and before is not None and before != spec.throughputs:
        raise InputError(f"{where}.throughputs", spec.throughputs,
                         f"class {spec.job_type!r} x{spec.scale_factor} was declared with {before} by an earlier "
                         "job: declare the same rates, none (its measurements and that declaration are used), or "
                         "name another class")


@dataclass(frozen=True)
class ClusterConfig:
    """The scheduler's cluster config file (JSON); flags override policy and round length."""

    worker_types: tuple[str, ...] = ("v100", "p100", "k80")
    # gavel-osdi20, a .json or a .csv table, or a list of them (later ones add to earlier ones); types none of
    # them covers: the built-in model (runtime.tables)
    throughputs: str | tuple[str, ...] | None = None
    prices: dict[str, float] = field(default_factory=dict)
    policy: str = "las"
    policy_options: dict = field(default_factory=dict)   # the policy's options (keyword arguments of its function)
    plugins: tuple[str, ...] = ()            # policy plugins (FILE.py relative to the config, or MODULE)
    round_seconds: float | None = None       # None: the policy's declared interval (resolved())
    lease_renewals: bool = True
    checkpoint_every_rounds: int = 1         # with renewals a job still checkpoints this often: at most K rounds lost
    grace_seconds: float | None = None       # None: a quarter round, between 2 and 60 s
    heartbeat_seconds: float = 2.0
    worker_timeout_seconds: float | None = None   # None: 3 heartbeats + 1 s
    checkpoint_root: str | None = None       # None: STATE/checkpoints (must be shared by all workers)
    token_file: str | None = None
    measured_throughputs: bool = True
    space_sharing: bool = False              # the policy's NAME_packed variant: pairs share GPUs
    estimator: bool = False                  # the policy sees gavel_ng.estimator, fed by measurements
    max_failures: int = 3
    max_unfinished_jobs: int = 100_000       # unfinished jobs the scheduler holds; more are refused
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    rules: dict = field(default_factory=dict)      # quotas, one distributed job per server, admission (gavel_ng.rules)
    worker_labels: dict = field(default_factory=dict)   # worker id -> server labels, beside the workers' --label
    entities: dict = field(default_factory=dict)   # name -> {weight, policy}: the entities jobs belong to
    realloc_delay_seconds: float = 30.0      # round policies: what a resize costs a job (Pollux's restart factor)
    metrics_port: int = 0                    # Prometheus text at http://BIND:PORT/metrics; 0: off
    backfill: bool = True                    # GPUs a job frees mid-round run waiting jobs until the round ends
    # heartbeats answered by a process of their own on this port (runtime.front), which also serves a copy of the
    # default status page; 0: any free port; None: by the scheduler's own port and process
    heartbeat_port: int | None = None

    @classmethod
    def load(cls, path: str | Path) -> ClusterConfig:
        path = Path(path)
        data = read_json(path, "--cluster-config")
        require(isinstance(data, dict), "--cluster-config", str(path), "expected a JSON object")
        known = {f.name for f in fields(cls)}
        for key in data:
            require(key in known, f"cluster-config.{key}", data[key],
                    f"unknown field; known: {', '.join(sorted(known))}")
        if "worker_types" in data:
            wt = data["worker_types"]
            require(isinstance(wt, list) and wt and all(isinstance(w, str) and w.strip() for w in wt),
                    "cluster-config.worker_types", wt, "must be a non-empty list of names")
            names = [w.strip().lower() for w in wt]
            twice = next((w for i, w in enumerate(names) if w in names[:i]), None)
            require(twice is None, "cluster-config.worker_types", twice,
                    "listed twice: each worker type once (a worker's --gpu-type names one of them)")
            data = {**data, "worker_types": tuple(names)}
        base = path.parent
        if "plugins" in data:
            plugins = data["plugins"]
            require(isinstance(plugins, list) and all(isinstance(x, str) and x.strip() for x in plugins),
                    "cluster-config.plugins", plugins, "must be a list of FILE.py paths or module names")
            from ..policies.plugins import is_file_spec

            data["plugins"] = tuple(str(base / x) if is_file_spec(x) else x for x in plugins)
        if isinstance(data.get("throughputs"), list):
            tables = data["throughputs"]
            require(tables and all(isinstance(x, str) and x for x in tables), "cluster-config.throughputs", tables,
                    "must be a table (a built-in name or a path) or a non-empty list of them")
            data["throughputs"] = tuple(x if x in BUILTIN_TABLES else str(base / x) for x in tables)
        for key in ("throughputs", "checkpoint_root", "token_file", "tls_cert", "tls_key", "tls_ca"):
            if key == "throughputs" and isinstance(data.get(key), tuple):
                continue
            if data.get(key) is not None:
                require(isinstance(data[key], str), f"cluster-config.{key}", data[key], "must be a path")
                if not (key == "throughputs" and data[key] in BUILTIN_TABLES):  # a name, not a file
                    data[key] = str(base / data[key])
        config = cls(**data)
        config.check()
        return config

    def check(self) -> None:
        def positive(name: str, value: object) -> None:
            require(is_number(value) and value > 0, f"cluster-config.{name}", value, "must be a positive number")

        if self.round_seconds is not None:
            positive("round_seconds", self.round_seconds)
        positive("heartbeat_seconds", self.heartbeat_seconds)
        twice = next((w for i, w in enumerate(self.worker_types) if w in self.worker_types[:i]), None)
        require(twice is None, "cluster-config.worker_types", twice, "listed twice: each worker type once")
        for name in ("grace_seconds", "worker_timeout_seconds"):
            if getattr(self, name) is not None:
                positive(name, getattr(self, name))
        require(isinstance(self.plugins, (tuple, list)) and all(isinstance(x, str) for x in self.plugins),
                "cluster-config.plugins", self.plugins, "must be a list of FILE.py paths or module names")
        for name in ("lease_renewals", "measured_throughputs", "space_sharing", "estimator", "backfill"):
            require(isinstance(getattr(self, name), bool), f"cluster-config.{name}", getattr(self, name),
                    "must be true or false")
        require(is_int(self.max_failures) and self.max_failures >= 1, "cluster-config.max_failures",
                self.max_failures, "must be an integer >= 1")
        require(is_int(self.checkpoint_every_rounds) and self.checkpoint_every_rounds >= 1,
                "cluster-config.checkpoint_every_rounds", self.checkpoint_every_rounds, "must be an integer >= 1")
        require(is_int(self.max_unfinished_jobs) and self.max_unfinished_jobs >= 1,
                "cluster-config.max_unfinished_jobs", self.max_unfinished_jobs,
                "must be an integer >= 1")
        require(is_number(self.realloc_delay_seconds) and self.realloc_delay_seconds >= 0,
                "cluster-config.realloc_delay_seconds", self.realloc_delay_seconds, "must be a number of seconds >= 0")
        require(is_int(self.metrics_port) and 0 <= self.metrics_port < 65536, "cluster-config.metrics_port",
                self.metrics_port, "must be a port number (0: no metrics)")
        require(self.heartbeat_port is None or (is_int(self.heartbeat_port) and 0 <= self.heartbeat_port < 65536),
                "cluster-config.heartbeat_port", self.heartbeat_port,
                "must be a port number (0: any free port; null: heartbeats go to the scheduler's port)")
        require(isinstance(self.policy_options, dict) and all(isinstance(k, str) for k in self.policy_options),
                "cluster-config.policy_options", self.policy_options, "must be an object of option: value")
        self._check_known_policy()
        self.cluster_rules.check_types(list(self.worker_types), "cluster-config.rules")
        self.cluster_rules.check_entities(self.entity_specs, "cluster-config.rules", "cluster-config.entities")
        require(isinstance(self.worker_labels, dict) and all(
            isinstance(v, list) and all(isinstance(x, str) and x for x in v) for v in self.worker_labels.values()),
            "cluster-config.worker_labels", self.worker_labels, "must map worker id -> list of labels")
        for w, price in self.prices.items():
            require(w in self.worker_types, "cluster-config.prices", w, "unknown worker type")
            require(is_number(price) and price >= 0, f"cluster-config.prices.{w}", price, "must be >= 0")

    def _check_known_policy(self) -> None:
        """`check_policy` now when the policy is registered already (a plugin's is checked once loaded)."""
        from ..policies import get_policy

        try:
            spec = get_policy(self.policy)
        except InputError:     # a plugin's, or unknown: the scheduler says which once plugins are loaded
            return
        self.check_policy(spec)

    def check_policy(self, spec) -> None:
        """What the policy's declared kind allows: its options, and a round policy's whole GPUs.

        A round policy honours the rules through placement and admission, and the estimator
        through the throughputs it believes; it decides every round itself, so it gives jobs
        whole GPUs (no space sharing). Either kind takes the options its function declares."""
        from ..assembly import bind_options, check_settings

        check_settings(spec, {"cluster-config.space_sharing": self.space_sharing}, "it gives jobs whole GPUs")
        try:
            bind_options(spec, self.policy_options)
        except InputError as exc:
            raise InputError("cluster-config.policy_options", exc.value, exc.reason) from None
        except (TypeError, ValueError) as exc:    # the policy's own check of a value
            raise InputError("cluster-config.policy_options", self.policy_options, f"{spec.name}: {exc}") from None

    @property
    def cluster_rules(self):
        """The parsed `rules` (an InputError naming the field if bad)."""
        from ..rules import ClusterRules

        return ClusterRules.from_dict(self.rules, "cluster-config.rules")

    @property
    def entity_specs(self):
        """The parsed `entities` (policies.input.entities.Entity by name)."""
        from ..policies.input.entities import parse_entities

        return parse_entities(self.entities, "cluster-config.entities")

    def resolved(self) -> ClusterConfig:
        """This config with the policy's declared round length where none is given (360 s for allocation
        policies, 60 s for goodput, pollux, tiresias); its plugins are loaded first, so that a plugin
        policy's declaration counts."""
        if self.round_seconds is not None:
            return self
        from dataclasses import replace

        from ..policies import get_policy

        if self.plugins:
            from ..policies.plugins import load_plugins

            load_plugins(self.plugins, field="cluster-config.plugins")
        return replace(self, round_seconds=get_policy(self.policy).round_seconds)

    @property
    def grace(self) -> float:
        if self.grace_seconds is not None:
            return self.grace_seconds
        return min(60.0, max(2.0, self.resolved().round_seconds / 4))

    @property
    def worker_timeout(self) -> float:
        if self.worker_timeout_seconds is not None:
            return self.worker_timeout_seconds
        return 3 * self.heartbeat_seconds + 1.0
