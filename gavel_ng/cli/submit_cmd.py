"""`gavel-ng submit JOBFILE` and `gavel-ng cancel JOB_ID ...`: talk to a running scheduler."""

from __future__ import annotations

import json
import os
import sys

from ..errors import InputError


def add_connection_args(p) -> None:
    p.add_argument("--scheduler", default=os.environ.get("GAVEL_NG_SCHEDULER", "127.0.0.1:50060"),
                   metavar="HOST:PORT", help="scheduler address (default: $GAVEL_NG_SCHEDULER or 127.0.0.1:50060)")
    p.add_argument("--token-file", metavar="FILE",
                   help="file holding your credential (`gavel-ng user add`), or the cluster's admin token the "
                        "scheduler writes to STATE/token (default: $GAVEL_NG_TOKEN)")
    p.add_argument("--tls-ca", metavar="PEM", help="CA certificate when the scheduler uses TLS")


def client_from_args(args):
    from ..protocol.client import SchedulerClient
    from ..protocol.rpc import read_token

    token = read_token(args.token_file)
    if not token:
        raise InputError("--token-file", None, "no token: pass --token-file or set $GAVEL_NG_TOKEN")
    return SchedulerClient(args.scheduler, token=token, tls_ca=args.tls_ca)


def add_parser(sub) -> None:
    p = sub.add_parser("submit", help="submit training jobs to a running scheduler",
                       description="Submit the jobs of a JSON job file (one job object, a list, or "
                                   '{"jobs": [...]}); prints their ids. Fields: job_type, steps, scale_factor, '
                                   "weight, slo_s, name, command, working_dir, size, env (see docs/deploy.md).")
    p.add_argument("jobfile", metavar="JOBFILE", help="the job file (JSON, see above)")
    add_connection_args(p)
    p.add_argument("--wait", action="store_true", help="wait until every submitted job finished")
    p.add_argument("--json", action="store_true", help="print the ids as a JSON list")
    p.add_argument("--strict", action="store_true",
                   help="refuse the whole file (nothing submitted, exit 2) if a job no current worker can run; "
                        "default: submit it and warn")
    p.add_argument("--idempotency-key", metavar="KEY",
                   help="submit at most once under KEY: a rerun with the same KEY and JOBFILE prints the same ids "
                        "(default: a new key; either way an unanswered call is retried with its key)")
    p.set_defaults(run=run)

    c = sub.add_parser("cancel", help="cancel jobs",
                       description="Cancel jobs; running ones are stopped. Prints each id with its status "
                                   "(a finished job keeps its own); exits 2 if any id failed.")
    c.add_argument("job_ids", type=int, nargs="+", metavar="JOB_ID", help="ids of the jobs to cancel")
    add_connection_args(c)
    c.set_defaults(run=run_cancel)


def run(args) -> int:
    from ..protocol.client import SchedulerError
    from ..protocol.jobspec import load_job_file

    specs = load_job_file(args.jobfile)
    with client_from_args(args) as client:
        try:
            ids, warnings = client.submit_checked(specs, key=args.idempotency_key, strict=args.strict)
        except SchedulerError as exc:
            print(f"gavel-ng submit: error: {exc}", file=sys.stderr)
            return 2
        for line in warnings:
            print(f"gavel-ng submit: warning: {line} (it stays queued; --strict refuses such jobs)", file=sys.stderr)
        print(json.dumps(ids) if args.json else " ".join(str(i) for i in ids))
        sys.stdout.flush()
        if args.wait:
            bad = [j for j in client.wait(ids, timeout=1e9) if j.status != "done"]
            for j in bad:
                print(f"job {j.job_id}: {j.status}", file=sys.stderr)
            return 1 if bad else 0
    return 0


# the scheduler could not be asked at all: the ids left would fail the same way, each after a timeout
UNREACHABLE = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "UNAUTHENTICATED")


def run_cancel(args) -> int:
    from ..protocol.client import SchedulerError

    ids = list(dict.fromkeys(args.job_ids))
    failed = 0
    with client_from_args(args) as client:
        for i, job_id in enumerate(ids):
            try:
                status = client.cancel(job_id)
            except SchedulerError as exc:
                failed += 1
                print(f"gavel-ng cancel: job {job_id}: error: {exc}", file=sys.stderr)
                if exc.code in UNREACHABLE:
                    left = len(ids) - i - 1
                    if left:
                        print(f"gavel-ng cancel: {left} more job(s) not tried", file=sys.stderr)
                    break
                continue
            print(f"{job_id} {status}", flush=True)
    return 2 if failed else 0
