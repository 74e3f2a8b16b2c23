"""`gavel-ng worker`: the worker daemon of one server."""

from __future__ import annotations

import logging
import os

from ..errors import InputError
from ..worker.gpus import TYPE_MAP_ENV
from .scheduler_cmd import _stop_on_signals, announce

log = logging.getLogger(__name__)


def add_parser(sub) -> None:
    p = sub.add_parser("worker", help="run a worker daemon that runs jobs on this server's GPUs",
                       description="Register with the scheduler, heartbeat, run each job as processes on its "
                                   "GPUs (CUDA_VISIBLE_DEVICES), report steps and time, enforce leases.")
    p.set_defaults(extra="worker")       # what a server that runs jobs installs (torch with the rest)
    p.add_argument("--scheduler", required=True, metavar="HOST:PORT", help="address of the scheduler service")
    p.add_argument("--gpu-type", default="auto", metavar="TYPE",
                   help="worker type of this server's GPUs, one of the cluster's worker_types (e.g. v100; "
                        "default auto: from the GPUs' product name, see docs/deploy.md)")
    p.add_argument("--gpus", default="auto", metavar="N",
                   help="number of GPUs to offer (default auto: the NVIDIA GPUs this process may use, "
                        "CUDA_VISIBLE_DEVICES or a Slurm allocation honoured)")
    p.add_argument("--gpu-type-map", metavar="FILE.json",
                   help='{"product name pattern": "type"} tried before the built-in product table '
                        f"(default: ${TYPE_MAP_ENV})")
    p.add_argument("--label", action="append", default=[], metavar="LABEL",
                   help="a label of this server (repeatable, e.g. --label nvlink): jobs that require it may run here")
    p.add_argument("--gpu-ids", metavar="LIST", help="physical GPU ids, comma-separated (default 0..GPUS-1)")
    p.add_argument("--port", type=int, default=0, help="port of the worker service (default: any free port)")
    p.add_argument("--bind", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    p.add_argument("--advertise", metavar="HOST", help="host the scheduler reaches this worker at "
                                                       "(default: the host name)")
    p.add_argument("--token-file", metavar="FILE",
                   help="this worker's credential (gavel-ng user add NAME --role worker), readable by the worker's "
                        "account only (default: $GAVEL_NG_TOKEN)")
    p.add_argument("--job-env", action="append", default=[], metavar="NAME",
                   help="a variable of the worker's environment jobs may inherit, besides the built-in allowlist "
                        "(repeatable; NAME* matches a prefix)")
    p.add_argument("--tls-cert", metavar="PEM", help="this worker's TLS certificate (with --tls-key)")
    p.add_argument("--tls-key", metavar="PEM", help="private key of --tls-cert")
    p.add_argument("--tls-ca", metavar="PEM", help="CA of the scheduler's certificate")
    p.add_argument("--threads-per-gpu", type=int, metavar="N",
                   help="CPU threads each job process may use (sets OMP_NUM_THREADS for jobs)")
    p.add_argument("--standby", type=int, metavar="N",
                   help="warm interpreters (torch imported) kept ready for Python jobs (default 1)")
    p.add_argument("--work-dir", metavar="DIR", help="scratch directory (default: a temporary one)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..protocol.rpc import Security, read_token
    from ..worker.daemon import WorkerDaemon, check_gpu_ids, machine_gpu_count
    from ..worker.gpus import choose, load_type_map

    gpu_ids = None
    if args.gpu_ids:
        try:
            gpu_ids = [int(g) for g in args.gpu_ids.split(",")]
        except ValueError:
            raise InputError("--gpu-ids", args.gpu_ids, "must be comma-separated integers") from None
    if args.gpus != "auto" and not (args.gpus.isdigit() and int(args.gpus) >= 1):
        raise InputError("--gpus", args.gpus, "must be an integer >= 1, or auto")
    choice = choose(args.gpus, args.gpu_type, gpu_ids, load_type_map(args.gpu_type_map))
    log.info("GPUs: %s", choice.note)
    gpu_ids = list(choice.gpu_ids)
    check_gpu_ids(gpu_ids, machine_gpu_count())   # flags first, then the token
    if args.threads_per_gpu is not None:
        if args.threads_per_gpu < 1:
            raise InputError("--threads-per-gpu", args.threads_per_gpu, "must be >= 1")
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.threads_per_gpu)
    security = Security(read_token(args.token_file), args.tls_cert, args.tls_key, args.tls_ca)
    daemon = WorkerDaemon(args.scheduler, choice.gpu_type, len(gpu_ids), security, bind=args.bind, port=args.port,
                          advertise=args.advertise, gpu_ids=gpu_ids, work_dir=args.work_dir,
                          standby=args.standby, labels=args.label,
                          token_source=args.token_file or "$GAVEL_NG_TOKEN", job_env=args.job_env)
    daemon.start()
    announce(f"worker {daemon.worker_id} listening on {args.bind}:{daemon.port}")
    seen = _stop_on_signals(daemon.stop_event)
    try:
        daemon.wait()
    finally:
        daemon.stop(why=seen.get("signal", ""))
    if daemon.refusal is not None:      # a permanent refusal (wrong token, unknown type): one line, exit 2
        raise daemon.refusal
    return 0
