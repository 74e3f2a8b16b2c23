"""A training job as submitted and as launched: `JobSpec`, its checks and the job file.

Everything a user writes about a job (job files, RPC submissions) is checked here, and
every refusal names the field, so `gavel-ng submit` and the scheduler's INVALID_ARGUMENT
replies say exactly what to fix. The same spec travels to the worker that launches the
job (`RunJobRequest.spec`). What needs the cluster's throughput table to check lives
with the scheduler (gavel_ng.runtime.config.validate_submission).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..elastic.efficiency import AdaptiveSpec
from ..elastic.families import parse_adaptive
from ..errors import InputError, read_json, require
from ..rules.model import JobRules, parse_job_rules
from .protos import gavel_pb2 as pb
from .text import bad_character, unrunnable

SIZES = ("tiny", "full")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_ENV = ("CUDA_VISIBLE_DEVICES", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT")
MAX_STEPS = 10**12
# Size limits per job: a job's spec is kept in memory, in the store and in every status reply.
MAX_TEXT = 200                    # job_type, name: characters
MAX_PATH = 4096                   # working_dir: characters
MAX_ARGS, MAX_COMMAND_BYTES = 256, 16384       # command: argv entries, and bytes of them all (UTF-8)
MAX_ENV, MAX_ENV_BYTES = 64, 16384             # env: entries, and bytes of names and values (UTF-8)
MAX_RULES_BYTES, MAX_ADAPTIVE_BYTES = 16384, 4096   # rules, adaptive: bytes of their JSON
MAX_DECLARED = 64                 # throughputs: worker types a job may declare
MIN_RATE, MAX_RATE = 1e-4, 1e5    # a declared rate (steps/s), as the scheduler bounds a measured one


@dataclass(frozen=True)
class JobSpec:
    """A training job as submitted. `command` empty means the built-in runner for `job_type`."""

    job_type: str
    steps: int
    scale_factor: int = 1
    weight: float = 1.0
    slo_s: float | None = None
    name: str = ""
    command: tuple[str, ...] = ()
    working_dir: str = ""
    size: str = "full"
    env: dict[str, str] = field(default_factory=dict)
    rules: JobRules | None = None     # placement rules and owner (gavel_ng.rules), written inline in a job file
    adaptive: AdaptiveSpec | None = None   # adaptive mode (docs/elastic.md); None: a fixed job
    # declared steps/s per worker type, for a class the throughput table lacks (its rates until measured)
    throughputs: dict[str, float] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        """Its class as the throughputs know it: (job type, scale factor)."""
        return self.job_type, self.scale_factor

    @classmethod
    def from_dict(cls, data: object, where: str = "job") -> JobSpec:
        """Parse one job object of a job file, checking types (the scheduler checks the rest)."""
        require(isinstance(data, dict), where, data, "expected an object")
        known = ({f.name for f in fields(cls)} - {"rules"}) | set(JobRules.FIELDS)
        for key in data:
            require(key in known, f"{where}.{key}", data[key], f"unknown field; known: {', '.join(sorted(known))}")
        for key in ("job_type", "steps"):
            require(key in data, f"{where}.{key}", None, "required")
        command = data.get("command", ())
        if isinstance(command, str):      # a shell line would be split wrongly (quotes, spaces in paths)
            raise InputError(f"{where}.command", command, "must be a list of strings (argv), e.g. "
                                                          f"{json.dumps(command.split())}")
        require(isinstance(command, (list, tuple)) and all(isinstance(c, str) for c in command),
                f"{where}.command", command, "must be a list of strings (argv)")
        declared = data.get("throughputs", {})
        require(isinstance(declared, dict) and all(isinstance(k, str) for k in declared), f"{where}.throughputs",
                declared, 'must map worker types to steps/s, e.g. {"v100": 80.0, "k80": 21.5}')
        env = data.get("env", {})
        require(isinstance(env, dict) and all(isinstance(v, str) for v in env.values()),
                f"{where}.env", env, "must map names to strings")
        for key in ("job_type", "name", "working_dir", "size"):
            require(isinstance(data.get(key, ""), str), f"{where}.{key}", data.get(key), "must be a string")
        spec = cls(job_type=data["job_type"], steps=data["steps"], scale_factor=data.get("scale_factor", 1),
                   weight=data.get("weight", 1.0), slo_s=data.get("slo_s"), name=data.get("name", ""),
                   command=tuple(command), working_dir=data.get("working_dir", ""), size=data.get("size", "full"),
                   env=dict(env), rules=parse_job_rules(data, where),
                   adaptive=_adaptive(data.get("adaptive"), data["job_type"], f"{where}.adaptive"),
                   throughputs={k.lower(): v for k, v in declared.items()})
        spec.check(where)
        return spec

    def check(self, where: str = "job") -> None:
        """Type and range checks that need no throughput table."""
        require(self.job_type.strip() != "", f"{where}.job_type", self.job_type, "must name a job type")
        require(is_int(self.steps) and 1 <= self.steps <= MAX_STEPS, f"{where}.steps", self.steps,
                "must be an integer >= 1")
        require(is_int(self.scale_factor) and 1 <= self.scale_factor <= 1024, f"{where}.scale_factor",
                self.scale_factor, "must be an integer >= 1")
        require(is_number(self.weight) and self.weight > 0, f"{where}.weight", self.weight, "must be a positive number")
        if self.slo_s is not None:
            require(is_number(self.slo_s) and self.slo_s > 0, f"{where}.slo_s", self.slo_s, "must be positive seconds")
        self._check_sizes(where)
        self._check_characters(where)
        require(not self.working_dir or self.working_dir.startswith("/"), f"{where}.working_dir", self.working_dir,
                "must be an absolute path (on the workers): a relative one would resolve against each worker's "
                "own directory")
        self._check_declared(where)
        require(self.size in SIZES, f"{where}.size", self.size, f"must be one of {', '.join(SIZES)}")
        for key in self.env:
            require(bool(_ENV_NAME.match(key)), f"{where}.env", key, "not an environment variable name")
            require(key not in RESERVED_ENV and not key.startswith("GAVEL_NG_"), f"{where}.env", key,
                    "reserved: the worker sets it")

    def _check_characters(self, where: str) -> None:
        """Nothing that cannot run (a NUL byte) or that would reach a terminal (protocol.text)."""
        rules = self.rules.to_dict() if self.rules is not None else {}
        names = [("job_type", self.job_type), ("name", self.name), ("size", self.size),
                 *((f"throughputs.{w!r}", w) for w in self.throughputs),
                 *((k, v) for k, v in rules.items() if isinstance(v, str)),
                 *((k, x) for k, v in rules.items() if isinstance(v, list) for x in v)]
        for field_name, value in names:
            why = bad_character(value)
            require(not why, f"{where}.{field_name}", _clip(value), why)
        field_name, value, why = unrunnable(self.command, self.env, self.working_dir)
        require(not why, f"{where}.{field_name}", _clip(value), why)

    def _check_declared(self, where: str) -> None:
        """Declared rates: worker type -> steps/s, finite, in [MIN_RATE, MAX_RATE] or 0 (cannot run there)."""
        require(len(self.throughputs) <= MAX_DECLARED, f"{where}.throughputs", f"{len(self.throughputs)} types",
                f"at most {MAX_DECLARED} worker types")
        for w, v in self.throughputs.items():
            require(bool(w.strip()) and len(w) <= MAX_TEXT, f"{where}.throughputs", w, "not a worker type name")
            require(is_number(v) and (v == 0 or MIN_RATE <= v <= MAX_RATE), f"{where}.throughputs.{w}", v,
                    f"must be steps/s in [{MIN_RATE:g}, {MAX_RATE:g}], or 0 (cannot run there)")
        if self.throughputs:
            require(any(v > 0 for v in self.throughputs.values()), f"{where}.throughputs", self.throughputs,
                    "declares no worker type the job can run on")

    def _check_sizes(self, where: str) -> None:
        """Every field bounded, so that a queue of jobs fits in memory and its status in a reply."""
        for key, limit in (("job_type", MAX_TEXT), ("name", MAX_TEXT), ("working_dir", MAX_PATH)):
            value = getattr(self, key)
            require(len(value) <= limit, f"{where}.{key}", _clip(value), f"at most {limit} characters")
        require(len(self.command) <= MAX_ARGS, f"{where}.command", f"{len(self.command)} arguments",
                f"at most {MAX_ARGS} arguments")
        size = sum(len(c.encode()) for c in self.command)
        require(size <= MAX_COMMAND_BYTES, f"{where}.command", f"{size} bytes", f"at most {MAX_COMMAND_BYTES} bytes")
        require(len(self.env) <= MAX_ENV, f"{where}.env", f"{len(self.env)} variables", f"at most {MAX_ENV} variables")
        size = sum(len(k.encode()) + len(v.encode()) for k, v in self.env.items())
        require(size <= MAX_ENV_BYTES, f"{where}.env", f"{size} bytes", f"at most {MAX_ENV_BYTES} bytes")
        for key, value, limit in (("rules", self.rules, MAX_RULES_BYTES), ("adaptive", self.adaptive,
                                                                            MAX_ADAPTIVE_BYTES)):
            size = len(json.dumps(value.to_dict()).encode()) if value is not None else 0
            require(size <= limit, f"{where}.{key}", f"{size} bytes of JSON", f"at most {limit} bytes")

    def to_proto(self) -> pb.JobSpec:
        return pb.JobSpec(name=self.name, job_type=self.job_type, scale_factor=self.scale_factor, steps=self.steps,
                          weight=self.weight, slo_s=self.slo_s or 0.0, command=list(self.command),
                          working_dir=self.working_dir, size=self.size, env=self.env,
                          rules=json.dumps(self.rules.to_dict()) if self.rules is not None else "",
                          adaptive=json.dumps(self.adaptive.to_dict()) if self.adaptive is not None else "",
                throughputs=self.throughputs)

    @classmethod
    def from_proto(cls, m: pb.JobSpec) -> JobSpec:
        """Defaults for unset proto fields (0 weight = 1, empty size = full)."""
        return cls(job_type=m.job_type, steps=m.steps, scale_factor=m.scale_factor or 1, weight=m.weight or 1.0,
                   slo_s=m.slo_s or None, name=m.name, command=tuple(m.command), working_dir=m.working_dir,
                   size=m.size or "full", env=dict(m.env), rules=rules_from_json(m.rules, "jobs.rules"),
                   adaptive=adaptive_from_json(m.adaptive, m.job_type, "jobs.adaptive"),
                   throughputs=dict(m.throughputs))

    def to_dict(self) -> dict:
        return {"job_type": self.job_type, "steps": self.steps, "scale_factor": self.scale_factor,
                "weight": self.weight, "slo_s": self.slo_s, "name": self.name, "command": list(self.command),
                "working_dir": self.working_dir, "size": self.size, "env": dict(self.env),
                **(self.rules.to_dict() if self.rules is not None else {}),
                **({"adaptive": self.adaptive.to_dict()} if self.adaptive is not None else {}),
                **({"throughputs": dict(self.throughputs)} if self.throughputs else {})}


def _clip(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def load_job_file(path: str | Path) -> list[JobSpec]:
    """A JSON job file: one job object, a list of them, or {"jobs": [...]}."""
    path = Path(path)
    data = read_json(path, "JOBFILE")
    if isinstance(data, dict) and "jobs" in data:
        data = data["jobs"]
    items = data if isinstance(data, list) else [data]
    require(len(items) > 0, "jobs", data, "no jobs in the file")
    return [JobSpec.from_dict(item, f"jobs[{i}]") for i, item in enumerate(items)]


def _json(text: str, where: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(where, text[:80], f"not JSON ({exc.msg})") from None


def rules_from_json(text: str, where: str) -> JobRules | None:
    """A JobSpec's rules as they travel in the proto (a JSON object; empty: none)."""
    if not text:
        return None
    require(len(text) <= MAX_RULES_BYTES, where, f"{len(text)} bytes", f"at most {MAX_RULES_BYTES} bytes")
    data = _json(text, where)
    return parse_job_rules(data, where) if isinstance(data, dict) else JobRules.from_dict(data, where)


def adaptive_from_json(text: str, job_type: str, where: str) -> AdaptiveSpec | None:
    """A JobSpec's adaptive block as it travels in the proto and the store (a JSON object; empty: none)."""
    require(len(text) <= MAX_ADAPTIVE_BYTES, where, f"{len(text)} bytes", f"at most {MAX_ADAPTIVE_BYTES} bytes")
    return _adaptive(_json(text, where), job_type, where) if text else None


def _adaptive(data: object, job_type: object, where: str) -> AdaptiveSpec | None:
    return None if data is None else parse_adaptive(data, str(job_type), where)


def is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
