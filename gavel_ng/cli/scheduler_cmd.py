"""`gavel-ng scheduler`: run the scheduler service until SIGTERM or Ctrl-C."""

from __future__ import annotations

import dataclasses
import logging
import signal
import sys

from ..errors import InputError
from ..logs import WarningLedger, collapse_repeats, format_warnings
from ..policies.plugins import add_flag as add_plugin_flag

REPEAT_EVERY_S = 3600.0   # a repeating warning is logged again at most this often, with its count
SWITCH_INTERVAL_S = 0.001  # the scheduler process's GIL switch interval (sys.setswitchinterval; default 0.005)
PORT_SWITCH_INTERVAL_S = 0.005   # ... when its heartbeats are answered by the heartbeat port (runtime.front)


def add_parser(sub) -> None:
    p = sub.add_parser("scheduler", help="run the scheduler service for a real cluster",
                       description="Accept jobs, run rounds with the simulator's mechanism, drive worker daemons "
                                   "over gRPC, keep state in SQLite under --state (and resume from it).")
    p.add_argument("--cluster-config", required=True, metavar="FILE",
                   help='JSON: {"worker_types": ["v100", "p100", "k80"], ...} (see docs/deploy.md)')
    p.add_argument("--state", required=True, metavar="DIR", help="state directory (SQLite, token, checkpoints)")
    p.add_argument("--port", type=int, default=50060, help="port to listen on (0: any free port; default 50060)")
    p.add_argument("--bind", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve Prometheus metrics at http://BIND:PORT/metrics (default: the config's metrics_port; "
                        "0: off)")
    p.add_argument("--heartbeat-port", type=int, metavar="PORT",
                   help="answer workers' heartbeats in a process of their own on PORT (0: any free port; default: "
                        "the config's heartbeat_port, else the scheduler's own port), which also serves a copy "
                        "of the default status page to admin tokens; for thousands of workers (docs/deploy.md, "
                        "Scale)")
    p.add_argument("--round-seconds", type=float,
                   help="round length in seconds (default: the config's, else the policy's declared interval: "
                        "360 for allocation policies, 60 for goodput, pollux, tiresias)")
    p.add_argument("--policy", help="scheduling policy (default: the config's, else las)")
    add_plugin_flag(p, "scheduling (in addition to the config's \"plugins\")")
    p.add_argument("--space-sharing", action="store_true",
                   help="let pairs of jobs share GPUs (the policy's NAME_packed variant)")
    p.add_argument("--estimator", action="store_true",
                   help="the policy sees the throughput estimator fed by measurements; accepts job types "
                        "the throughput table does not know (with a command)")
    p.add_argument("--no-lease-renewals", action="store_true",
                   help="preempt every job at every round end (to measure what renewals save)")
    p.add_argument("--token-file", metavar="FILE", help="shared token (default: the config's, else STATE/token)")
    p.add_argument("--tls-cert", metavar="PEM", help="the scheduler's TLS certificate (with --tls-key)")
    p.add_argument("--tls-key", metavar="PEM", help="private key of --tls-cert")
    p.add_argument("--tls-ca", metavar="PEM", help="CA of the workers' certificates")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..policies import get_policy
    from ..policies.plugins import load_plugins
    from ..runtime.config import ClusterConfig
    from ..runtime.service import SchedulerService
    from ..runtime.store import StoreError

    show_events()
    config = ClusterConfig.load(args.cluster_config)
    changes = {}
    if args.round_seconds is not None:
        changes["round_seconds"] = args.round_seconds
    if args.policy is not None:
        changes["policy"] = args.policy
    if args.plugin:
        changes["plugins"] = (*config.plugins, *args.plugin)
    if args.metrics_port is not None:
        if not 0 <= args.metrics_port < 65536:
            raise InputError("--metrics-port", args.metrics_port, "must be a port number (0: no metrics)")
        changes["metrics_port"] = args.metrics_port
    if args.heartbeat_port is not None:
        if not 0 <= args.heartbeat_port < 65536:
            raise InputError("--heartbeat-port", args.heartbeat_port, "must be a port number (0: any free port)")
        changes["heartbeat_port"] = args.heartbeat_port
    if args.no_lease_renewals:
        changes["lease_renewals"] = False
    for flag in ("space_sharing", "estimator"):
        if getattr(args, flag):
            changes[flag] = True
    for name in ("token_file", "tls_cert", "tls_key", "tls_ca"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    config = dataclasses.replace(config, **changes)
    config.check()
    load_plugins(config.plugins[:len(config.plugins) - len(args.plugin)], field="cluster-config.plugins")
    load_plugins(args.plugin)
    try:
        get_policy(config.policy)
    except (KeyError, ValueError) as exc:
        field = "--policy" if args.policy is not None else "cluster-config.policy"
        raise InputError(field, config.policy, getattr(exc, "reason", str(exc))) from None
    if not 0 <= args.port < 65536:
        raise InputError("--port", args.port, "must be a port number")
    # the state's lock is held across SQLite calls and log writes, each of which lets go of the GIL: with the
    # default 5 ms switch interval, getting it back behind 625 heartbeats a second made each such call cost up
    # to 5 ms under the lock at 10,000 GPUs. With the heartbeats in a process of their own, CPython's 5 ms
    # gave `status` a shorter tail (max 95-151 ms against 104-273 ms in a paired trial) at the same CPU
    # (issue 42; experiments/README.md, "Fifth pass")
    sys.setswitchinterval(SWITCH_INTERVAL_S if config.heartbeat_port is None else PORT_SWITCH_INTERVAL_S)
    try:
        service = SchedulerService(config, args.state, port=args.port, bind=args.bind, pace_gc=True)
    except (StoreError, OSError) as exc:      # e.g. a full disk at start: one line, exit 2
        reason = exc.reason if isinstance(exc, StoreError) else f"{exc.strerror or exc} ({exc.filename or ''})"
        raise InputError("--state", args.state, f"cannot write the state directory: {reason}") from None
    port = service.start()
    announce(f"scheduler listening on {args.bind}:{port}")
    seen = _stop_on_signals(service.stop_event)
    ledger = WarningLedger(reemit_after=REPEAT_EVERY_S)   # a warning that recurs every round: once an hour
    try:
        with collapse_repeats(ledger):
            service.wait()
    finally:
        service.stop(why=seen.get("signal", "stopped"))
        repeated = [w for w in ledger.summary() if w["count"] > 1]
        if repeated:
            print("warnings that repeated while the scheduler ran:", *format_warnings(repeated), sep="\n",
                  file=sys.stderr)
    return 0


def show_events() -> None:
    """The runtime's INFO lines (a worker registered or declared dead, a job launched, preempted, ended)
    show without -v: one line per event, which is what a person watching a scheduler wants to see. The
    rest of gavel_ng (the policies' and the mechanism's per-round chatter) keeps the chosen level."""
    runtime = logging.getLogger("gavel_ng.runtime")
    if runtime.getEffectiveLevel() > logging.INFO:
        runtime.setLevel(logging.INFO)


def announce(line: str) -> None:
    """The line that tells a supervisor (scripts, the tests' loopback cluster) our port, written in
    one call: print() writes the text and its newline separately, and with unbuffered output (as
    those supervisors run us) a log line from another thread could land between them."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _stop_on_signals(event) -> dict[str, str]:
    """Set `event` on SIGTERM, SIGINT or SIGHUP; the returned dict gets the signal's name under "signal"
    (logged by the caller once its wait returns: a signal handler should not log)."""
    seen: dict[str, str] = {}

    def handler(signum, frame):
        seen.setdefault("signal", signal.Signals(signum).name)
        event.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    if sys.platform != "win32":
        signal.signal(signal.SIGHUP, handler)
    return seen
