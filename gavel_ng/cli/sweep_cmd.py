"""`gavel-ng sweep`: a grid of simulate runs in parallel, appended to one resumable table."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..errors import InputError
from ..policies import get_policy
from ..policies.plugins import add_flag as add_plugin_flag
from ..policies.plugins import load_plugins
from ..sweep.grid import FIELDS, SweepPoint, expand, field_type, parse_value, shown_fields
from .simulate_cmd import parse_policy_options

# simulate's flags that take several values here; the cluster mixes contain commas,
# so several are given with ';' or by repeating the flag; a JSON object only by repeating it
LIST_SEP = {"cluster": ";", "policy_options": None}


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a grid of simulations (policies x rates x seeds x ...) in parallel",
        description="Every simulate flag takes a comma-separated list (clusters: ';' or the flag repeated); the "
                    "grid is their product. Finished points are appended to RESULTS as they complete; running "
                    "the same command again skips them, so an interrupted sweep continues where it stopped.")
    p.add_argument("--results", required=True, metavar="FILE",
                   help="results table: a new one .csv, or .parquet with pyarrow; an existing one is read and "
                        "appended to as its content says")
    p.add_argument("--grid", metavar="FILE", help='JSON grid: {"axes": {"policy": ["las", ...], ...}, "base": {...}}')
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local process pool (default) or a Ray cluster")
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray instance)")
    p.add_argument("--workers", type=int, help="parallel processes (default: all cores)")
    p.add_argument("--dry-run", action="store_true",
                   help="list the points and whether each is done, stale or to do; run nothing")
    p.add_argument("--keep-stale", action="store_true",
                   help="count finished points as done even when they were computed by other code or input files "
                        "(by default those run again: a row records a digest of the gavel_ng package, the "
                        "plugins and the files its point names)")
    add_plugin_flag(p, "sweeping (each point's process loads them too)")
    p.add_argument("--policy-option", dest="policy_option", action="append", metavar="[POLICY.]KEY=VALUE",
                   help="an option of the policy, as `simulate --policy-option` (repeatable): KEY goes to the "
                        "points of every policy that takes it, POLICY.KEY (e.g. sia.p=-0.5) to that policy's only; "
                        "several option sets as an axis: --policy-options")
    p.add_argument("--json", action="store_true", help="print a JSON report instead of text")
    for name, f in FIELDS.items():
        flag = "--" + name.replace("_", "-")
        kind = field_type(name)
        if kind == "bool":
            p.add_argument(flag, dest=name, nargs="?", const="true", metavar="BOOLS",
                           help=f"bare flag: true; or a list such as true,false (default {f.default})")
        else:
            p.add_argument(flag, dest=name, action="append", metavar="JSON" if name == "policy_options" else "LIST",
                           help=_help(name, f.default))
    p.set_defaults(run=run)


def axes_from_args(args) -> tuple[dict[str, list], dict]:
    axes: dict[str, list] = {}
    base: dict = {}
    if args.grid:
        try:
            data = json.loads(Path(args.grid).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError("--grid", args.grid, f"cannot read JSON ({exc})") from None
        if not isinstance(data, dict):
            raise InputError("--grid", args.grid, "must be a JSON object")
        raw_axes = data.get("axes", {k: v for k, v in data.items() if k != "base"})
        axes = {k: v if isinstance(v, list) else [v] for k, v in raw_axes.items()}
        base = dict(data.get("base", {}))
    for name in FIELDS:
        raw = getattr(args, name)
        if raw is None:
            continue
        texts = raw if isinstance(raw, list) else [raw]
        sep = LIST_SEP.get(name, ",")
        values = [parse_value(name, t) for text in texts for t in (text.split(sep) if sep else [text])
                  if t.strip() or name != "cluster"]
        axes[name] = list(dict.fromkeys(values))
    if args.policy_option:
        if "policy_options" in axes or "policy_options" in base:
            raise InputError("--policy-option", args.policy_option[0],
                             "give options as --policy-option KEY=VALUE or as --policy-options JSON, not both")
        axes["policy_options"] = [json.dumps(parse_policy_options(args.policy_option))]
    if not any(k in axes or k in base for k in ("jobs_per_hour", "static", "trace", "workload")):
        raise InputError("sweep", "trace", "give --jobs-per-hour LIST, --static N, --trace FILE or --workload NAME")
    return axes, base


def _help(name: str, default) -> str:
    if name == "cluster":
        return f"default {default}; mixes: ';' or repeat"
    if name == "policy_options":
        return ('the policy\'s options as a JSON object, e.g. \'{"p": -1, "sia.lam": 1.2}\' (keys as for '
                '--policy-option); repeat the flag for several, an axis')
    if name == "round_seconds":
        return "default: each policy's declared interval"
    return f"default {default}"


def run(args) -> int:
    from ..sweep import ResultsStore, run_sweep
    from ..sweep.fingerprint import point_digests

    plugins = load_plugins(args.plugin)
    axes, base = axes_from_args(args)
    points = expand(axes, base)
    for name in dict.fromkeys(p.policy for p in points):
        get_policy(name)   # an unknown name (a forgotten --plugin?) fails before any point runs
    store = ResultsStore(args.results)
    if args.dry_run:
        done, stale = store.done_and_stale(point_digests(points, plugins))
        for p in points:
            state = "done" if p.point_id in done else "stale" if p.point_id in stale else "todo"
            print(f"{state:5s}  {p.point_id}  {p.describe()}")
        return 0
    bar = None if args.json else Progress(sys.stderr, shown_fields(points))
    try:
        report = run_sweep(points, store, backend=args.backend, workers=args.workers, address=args.address,
                           on_result=bar, plugins=plugins, keep_stale=args.keep_stale)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps(report.__dict__))
    else:
        kept = f" ({report.stale} of them stale, kept)" if report.stale and args.keep_stale else ""
        again = f", {report.stale} of them because their rows were stale" if report.stale and not args.keep_stale \
            else ""
        print(f"{report.total} points: {report.skipped} already done{kept}, {report.ran} run "
              f"({report.failed} failed{again}) in {report.seconds:.1f} s -> {args.results}")
        for e in report.errors[:10]:
            print(f"  failed {e}")
        if report.unfinished:
            print(f"  {report.unfinished} point(s) left measured jobs unfinished at the time cap (jobs_unfinished in "
                  "their rows): their averages leave those jobs out")
    return 1 if report.failed else 0


class Progress:
    """A progress bar on a terminal; one line per finished point otherwise, naming the point's `keys`
    (grid.shown_fields: its policy and every value the grid varies)."""

    def __init__(self, stream, keys: list[str] | None = None, width: int = 30):
        self.stream = stream
        self.keys = keys
        self.tty = stream.isatty()
        self.width = width
        self.start = time.monotonic()
        self.first: int | None = None
        self.shown = False

    def __call__(self, res, done: int, total: int) -> None:
        if self.first is None:
            self.first = done - 1
        elapsed = time.monotonic() - self.start
        ran = done - self.first
        eta = elapsed / ran * (total - done) if ran else 0.0
        point = SweepPoint(**{k: res.row[k] for k in FIELDS})
        left = res.row.get("jobs_unfinished")
        status = " FAILED" if not res.ok else \
            f"  ({left} of {res.row.get('jobs_in_window')} measured jobs unfinished)" if left else ""
        if self.tty:
            fill = int(self.width * done / max(total, 1))
            line = (f"\r[{'#' * fill}{'.' * (self.width - fill)}] {done}/{total} points  "
                    f"{_clock(elapsed)} elapsed, ~{_clock(eta)} left{status}   ")
            self.stream.write(line)
            self.shown = True
        else:
            self.stream.write(f"[{done}/{total}] {_clock(elapsed)} ~{_clock(eta)} left  {point.describe(self.keys)}"
                              f"{status}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
