"""`gavel-ng user add|list|grant|revoke`: credentials for users and workers (the admin's cluster token needed).

A credential's token is printed once, by `add` (the scheduler keeps only its hash); give it to its
user as a file only they can read, passed with `--token-file` (or $GAVEL_NG_TOKEN). Revocation takes
effect at the scheduler's next call; nothing restarts.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime

from ..errors import InputError
from .submit_cmd import add_connection_args, client_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("user", help="issue, list, grant and revoke credentials of users and workers (admin)",
                       description="Credentials for a cluster many users share (docs/deploy.md, Security). Needs the "
                                   "cluster (admin) token: --token-file STATE/token.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="issue a credential and print its token (once)",
                             description="Issue a credential. A user's NAME is their Unix account on the workers: "
                                         "where workers run as root, the user's jobs run as it.")
    add.add_argument("name", metavar="NAME", help="the user's account name (or a name for the worker credential)")
    add.add_argument("--role", choices=("user", "worker", "admin"), default="user",
                     help="user (default): submits, lists and cancels own jobs; worker: registers workers and "
                          "reports, nothing else; admin: everything")
    _grants(add)
    add.add_argument("--token-out", metavar="FILE",
                     help="write the token to FILE (created owner-only) instead of printing it")
    add_connection_args(add)
    grant = actions.add_parser("grant", help="let a user submit to more entities, or manage their jobs")
    grant.add_argument("name", metavar="NAME", help="the user")
    _grants(grant)
    add_connection_args(grant)
    revoke = actions.add_parser("revoke", help="refuse a credential from now on")
    revoke.add_argument("name", metavar="NAME", help="the credential to revoke")
    add_connection_args(revoke)
    lst = actions.add_parser("list", help="every credential (revoked ones too), never a token")
    lst.add_argument("--json", action="store_true", help="print one JSON list")
    add_connection_args(lst)
    p.set_defaults(run=run)


def _grants(p) -> None:
    p.add_argument("--entity", action="append", default=[], metavar="ENTITY",
                   help="an entity the user may submit to (repeatable; the first is their jobs' default)")
    p.add_argument("--manage", action="append", default=[], metavar="ENTITY",
                   help="an entity whose jobs the user may see in full (command, env) and cancel (repeatable)")


def run(args) -> int:
    from ..protocol.client import SchedulerError

    with client_from_args(args) as client:
        try:
            if args.action == "add":
                info, token = client.add_user(args.name, args.role, args.entity, args.manage)
                _give(token, args.token_out, info)
            elif args.action == "grant":
                info = client.grant(args.name, args.entity, args.manage)
                print(_line(info))
            elif args.action == "revoke":
                info = client.revoke(args.name)
                print(_line(info))
            else:
                users = client.users()
                if args.json:
                    print(json.dumps([u.__dict__ for u in users], indent=1))
                else:
                    print("\n".join(_line(u) for u in users) or "no credentials (every client holds the cluster token)")
        except SchedulerError as exc:
            print(f"gavel-ng user {args.action}: error: {exc}", file=sys.stderr)
            return 2
    return 0


def _give(token: str, path: str | None, info) -> None:
    if path:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise InputError("--token-out", path, f"cannot create ({exc.strerror}); the credential was issued: "
                                                  f"revoke {info.name} and add it again") from None
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        print(f"{_line(info)}; token written to {path}", file=sys.stderr)
        return
    print(f"{_line(info)}; its token follows (shown once: keep it where only {info.name} can read it)",
          file=sys.stderr)
    print(token, flush=True)


def _line(u) -> str:
    when = datetime.fromtimestamp(u.created).astimezone().isoformat(timespec="seconds")
    grants = "".join([f", submits to {','.join(u.entities)}" if u.entities else "",
                      f", manages {','.join(u.manages)}" if u.manages else ""])
    state = f"revoked {datetime.fromtimestamp(u.revoked).astimezone().isoformat(timespec='seconds')}" if u.revoked \
        else "valid"
    return f"{u.name} ({u.role}{grants}): {state}, issued {when}"
