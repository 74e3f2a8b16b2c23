"""Who may use the cluster, and what each may do with jobs (Slurm's users and accounts, as credentials).

An admin issues a credential per user or worker (`gavel-ng user add`): a random token, shown
once and stored in the state only as its SHA-256 (tokens are 32 random bytes, so a plain hash
cannot be searched backwards). Revoking one takes effect at the next call; nothing restarts.

- A user submits jobs as themselves: a job file's `user` must be theirs (it is filled in when
  absent), and its `entity` one an admin granted them (the first granted is the default). So
  admission, quotas and the hierarchical policy's shares read only facts the scheduler
  established. A user sees every job but the details (command, environment, working
  directory, failure text) only of their own jobs and of the entities they manage, and
  cancels only those.
- A worker credential registers workers and reports for them; the workers it registered are
  its own, and no other credential may heartbeat or report for them.
- The admin (the cluster token) does anything; jobs it submits run as the worker's account.

`Access` answers those questions for the service; `Credentials` keeps the table.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from ..errors import require
from ..protocol.jobspec import JobSpec
from ..protocol.rpc import ACCOUNT_NAME, ADMIN, Principal, job_principal, same
from ..rules.model import JobRules
from .jobs import JobState
from .records import Credential

log = logging.getLogger(__name__)
ROLES = ("user", "worker", "admin")


class PermissionDenied(Exception):
    """The caller may not do this (the service answers PERMISSION_DENIED with the text)."""


class UnknownWorker(Exception):
    """A worker this scheduler has not registered (since it started): the worker registers again."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def principal_of(token: str, secret: str, credential: Callable[[str], Principal | None]) -> Principal | None:
    """Who holds `token`: the admin (the cluster token `secret`), a job attempt, or (`credential(token)`) a
    credential an admin issued."""
    if not token:
        return None
    if same(token, secret):
        return ADMIN
    if token.startswith("job:"):
        return job_principal(secret, token)
    return credential(token)


class Credentials:
    """The credentials of a state (store.CREDENTIALS table), indexed by token hash. Thread-safe."""

    def __init__(self, store, entities: dict):
        self.store = store
        self.entities = entities            # declared entities (cluster-config.entities)
        self._lock = threading.Lock()
        self.by_name: dict[str, Credential] = {c.name: c for c in store.load_credentials()}
        self._by_hash = {c.token_hash: c for c in self.by_name.values() if c.revoked is None}

    def authenticate(self, token: str) -> Principal | None:
        c = self._by_hash.get(token_hash(token)) if token else None
        return c.principal if c is not None else None

    def principals(self) -> dict[str, Principal]:
        """Token hash -> principal of every active credential (runtime.front authenticates with a copy)."""
        return {h: c.principal for h, c in list(self._by_hash.items())}

    def get(self, name: str) -> Credential | None:
        c = self.by_name.get(name)
        return c if c is not None and c.revoked is None else None

    def all(self) -> list[Credential]:
        return sorted(self.by_name.values(), key=lambda c: c.name)

    @property
    def any_active(self) -> bool:
        return bool(self._by_hash)

    def _check_entities(self, names, field: str) -> tuple[str, ...]:
        out = tuple(dict.fromkeys(str(n).strip() for n in names))
        for n in out:
            require(n in self.entities, field, n, f"not a declared entity (declared: "
                                                  f"{', '.join(self.entities) or 'none'}; cluster-config.entities)")
        return out

    def add(self, name: str, role: str = "user", entities=(), manages=()) -> tuple[Credential, str]:
        """A new credential (or a new token for a revoked name); returns it and its token."""
        require(bool(ACCOUNT_NAME.match(name or "")), "name", name,
                "must be an account name: lower-case letters, digits, '_', '.', '-', starting with a letter or '_', "
                "at most 32")
        require(role in ROLES, "role", role, f"must be one of {', '.join(ROLES)}")
        if role != "user":
            require(not entities and not manages, "entities", list(entities) + list(manages),
                    f"only users are granted entities (not a {role})")
        cred_entities = self._check_entities(entities, "entities")
        cred_manages = self._check_entities(manages, "manages")
        token = secrets.token_urlsafe(32)
        with self._lock:
            old = self.by_name.get(name)
            require(old is None or old.revoked is not None, "name", name,
                    "already has a credential: revoke it first to issue a new one")
            cred = Credential(name, role, token_hash(token), cred_entities, cred_manages, time.time())
            with self.store.transaction():
                self.store.save_credential(cred)
                self.store.event("user_add", name=name, role=role, entities=list(cred_entities),
                                 manages=list(cred_manages))
            self.by_name[name] = cred
            self._by_hash[cred.token_hash] = cred
        log.info("credential issued: %s (%s)", name, role)
        return cred, token

    def grant(self, name: str, entities=(), manages=()) -> Credential:
        """More entities to submit to, or to manage, for a user."""
        with self._lock:
            old = self.get(name)
            require(old is not None, "name", name, "no such credential (or revoked)")
            require(old.role == "user", "name", name, f"a {old.role}: only users are granted entities")
            new = replace(old, entities=tuple(dict.fromkeys(old.entities + self._check_entities(entities, "entities"))),
                          manages=tuple(dict.fromkeys(old.manages + self._check_entities(manages, "manages"))))
            with self.store.transaction():
                self.store.save_credential(new)
                self.store.event("user_grant", name=name, entities=list(entities), manages=list(manages))
            self.by_name[name] = new
            self._by_hash[new.token_hash] = new
        return new

    def revoke(self, name: str) -> Credential:
        """Refused from the next call on."""
        with self._lock:
            old = self.get(name)
            require(old is not None, "name", name, "no such credential (or revoked already)")
            new = replace(old, revoked=time.time())
            with self.store.transaction():
                self.store.save_credential(new)
                self.store.event("user_revoke", name=name, role=old.role)
            self.by_name[name] = new
            self._by_hash.pop(old.token_hash, None)
        log.info("credential revoked: %s (%s)", name, old.role)
        return new


class Access:
    """What a principal may do with jobs and workers (the service asks before it acts)."""

    def __init__(self, credentials: Credentials):
        self.credentials = credentials
        self.worker_owner: dict[str, str] = {}    # worker id -> the actor that registered it (in memory)

    # ----- jobs -----------------------------------------------------------------------------------
    def stamp(self, who: Principal, specs: list[JobSpec], first: int = 0) -> list[JobSpec]:
        """The jobs as `who` may submit them: a user's carry their name and a granted entity (errors name
        jobs[first + i])."""
        if who.is_admin:
            return specs
        cred = self.credentials.get(who.name)
        if cred is None:                                 # revoked between authentication and here
            raise PermissionDenied(f"{who.actor}: credential revoked")
        out = []
        for i, spec in enumerate(specs, start=first):
            rules = spec.rules or JobRules()
            if rules.user is not None and rules.user != who.name:
                raise PermissionDenied(f"jobs[{i}].user: {rules.user!r} is not you ({who.name}); a job runs as "
                                       "the user who submits it")
            entity = rules.entity if rules.entity is not None else (cred.entities[0] if cred.entities else None)
            if entity is not None and entity not in cred.entities:
                granted = ", ".join(cred.entities) or "none"
                raise PermissionDenied(f"jobs[{i}].entity: {entity!r} is not granted to {who.name} (granted: "
                                       f"{granted}; an admin grants entities with `gavel-ng user grant`)")
            out.append(replace(spec, rules=replace(rules, user=who.name, entity=entity)))
        return out

    def manages(self, who: Principal | None, job: JobState) -> bool:
        """Whether `who` may see the job's details and cancel it: an admin, its owner, or a manager of its entity."""
        if who is None or who.is_admin:
            return True
        rules = job.spec.rules
        if who.role != "user" or rules is None:
            return False
        if rules.user == who.name:
            return True
        cred = self.credentials.get(who.name)
        return cred is not None and rules.entity is not None and rules.entity in cred.manages

    def check_cancel(self, who: Principal | None, job: JobState) -> None:
        if not self.manages(who, job):
            owner = getattr(job.spec.rules, "user", None)
            whose = f"belongs to {owner}" if owner else "belongs to no user (an admin submitted it)"
            raise PermissionDenied(f"job {job.job_id} {whose}: {who.name} may cancel only their own jobs and those of "
                                   "the entities they manage")

    # ----- workers ---------------------------------------------------------------------------------
    def check_worker(self, who: Principal | None, worker_id: str, claim: bool = False) -> None:
        """A worker credential speaks only for the workers it registered (`claim`: registering one now). A
        worker not registered since this scheduler started is told so (it registers again, and claims it)."""
        if who is None or who.is_admin:
            return
        owner = self.worker_owner.get(worker_id)
        if owner is None:
            if not claim:
                raise UnknownWorker(f"unknown worker {worker_id!r}")
            self.worker_owner[worker_id] = who.actor
        elif owner != who.actor:
            raise PermissionDenied(f"worker {worker_id!r} was registered by {owner}: {who.actor} speaks only for "
                                   "its own workers")


def redact(info, keep: bool):
    """A JobInfo as a user who does not manage the job sees it: no command, environment, working
    directory or failure text (a log tail may hold secrets). `keep`: unchanged."""
    if keep:
        return info
    for name in ("command", "env", "working_dir"):
        info.spec.ClearField(name)
    info.error = ""
    return info


def check_user_request(req) -> None:
    require(req.action in ("add", "list", "grant", "revoke"), "action", req.action,
            "must be add, list, grant or revoke")
    if req.action != "list":
        require(bool(req.name), "name", req.name, "required")
