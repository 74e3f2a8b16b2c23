"""`gavel-ng profiles`: the built-in throughput profiles, and tables measured by users.

list    job types (with scale factors) and GPU types (with datasheet figures)
show    isolated steps/s of every job type on chosen GPU types
export  the modeled table as Gavel JSON or CSV
import  validate a user's table (CSV or Gavel JSON), summarize it, optionally convert it
elastic the measured elastic profile set (fit errors per application and GPU type); --fit DIR refits it
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from ..errors import InputError
from ..profiles import GPUS, default_table, read_table, write_table
from ..profiles.defaults import DEFAULT_NETWORK_GBPS, parse_gpus
from ..profiles.model import job_keys
from ..profiles.table_io import FORMATS, format_for, resolve_table
from ..throughputs import UNCONSOLIDATED, JobKey, ThroughputTable


def add_parser(sub) -> None:
    p = sub.add_parser("profiles", help="built-in throughput profiles: list, show, export, import",
                       description="Inspect the modeled throughput table, export it, or check and convert "
                                   "a throughput table you measured yourself.")
    actions = p.add_subparsers(dest="action", metavar="ACTION")

    a = actions.add_parser("list", help="job types and GPU types the model knows",
                           description="List the job types with their scale factors and the GPU types with "
                                       "their datasheet figures.")
    a.set_defaults(run=run_list)

    a = actions.add_parser("show", help="isolated steps/s of every job type on some GPU types",
                           description="Print isolated throughputs (steps/s; '-' where a job does not fit) "
                                       "from the modeled table, or from --table.")
    _table_options(a)
    a.add_argument("--table", metavar="TABLE",
                   help="show this table (gavel-osdi20, a .csv or a .json file) instead of the model")
    a.add_argument("--job", metavar="TEXT", help="only job types containing TEXT (case-insensitive)")
    a.add_argument("--unconsolidated", action="store_true",
                   help="also show multi-GPU throughputs when a job is spread over servers")
    a.set_defaults(run=run_show)

    a = actions.add_parser("export", help="write the modeled table as Gavel JSON or CSV",
                           description="Write the modeled throughput table (isolated, unconsolidated and "
                                       "space-sharing pairs) to stdout or --out.")
    _table_options(a)
    a.add_argument("--format", help=f"{' or '.join(FORMATS)} (default: from --out's suffix, else gavel-json)")
    a.add_argument("--out", metavar="FILE", help="output file (default: stdout)")
    a.set_defaults(run=run_export)

    a = actions.add_parser("import", help="validate a measured table (CSV or Gavel JSON) and convert it",
                           description="Check a throughput table, print a summary, and with --out write it "
                                       "in the format of --out's suffix (.json: Gavel JSON, .csv).")
    a.add_argument("file", metavar="FILE", help="the table to check")
    a.add_argument("--format", help=f"{' or '.join(FORMATS)} (default: from the file's content: JSON is "
                                    "Gavel's format, anything else CSV)")
    a.add_argument("--out", metavar="FILE", help="write the table here (.json or .csv)")
    a.set_defaults(run=run_import)

    a = actions.add_parser("elastic", help="the measured elastic profile set: fit errors; --fit DIR refits it",
                           description="Print the fit of a measured elastic profile set (Pollux's throughput "
                                       "parameters per application and GPU type, docs/elastic.md) with its errors. "
                                       "--fit DIR fits them anew from the Sia artifact's profile directory "
                                       "(APP/placements-SUFFIX.csv, scalability-SUFFIX.csv, validation-M0.csv); "
                                       "--out writes the set as JSON (gavel_ng/elastic/data/sia.json is one).")
    a.add_argument("--fit", metavar="DIR", help="fit from this directory instead of showing the shipped set")
    a.add_argument("--name", default="sia", help="the set's name (default sia)")
    a.add_argument("--out", metavar="FILE", help="write the set as JSON here")
    a.set_defaults(run=run_elastic)
    p.set_defaults(run=run_list)  # plain `gavel-ng profiles` lists


def _table_options(a) -> None:
    a.add_argument("--gpu", metavar="TYPES", default="all",
                   help=f"comma-separated GPU types (default: all of {','.join(GPUS)})")
    a.add_argument("--heterogeneity", type=float, default=1.0, metavar="X",
                   help="raise each job's speedup over V100 to this power (0: no heterogeneity, default 1)")
    a.add_argument("--network-gbps", type=float, default=DEFAULT_NETWORK_GBPS, metavar="GBPS",
                   help=f"bandwidth between servers, Gbit/s (default {DEFAULT_NETWORK_GBPS:g})")


def _model_table(args) -> tuple[ThroughputTable, list[str]]:
    gpus = list(parse_gpus(args.gpu, "--gpu"))
    if not (math.isfinite(args.heterogeneity) and args.heterogeneity >= 0):
        raise InputError("--heterogeneity", args.heterogeneity, "must be a finite number >= 0")
    if not (math.isfinite(args.network_gbps) and args.network_gbps > 0):
        raise InputError("--network-gbps", args.network_gbps, "must be a finite number > 0")
    return default_table(gpus, args.heterogeneity, args.network_gbps), gpus


# ----- list -----------------------------------------------------------------------------
def run_list(args) -> int:
    by_type: dict[str, list[int]] = {}
    for name, sf in job_keys():
        by_type.setdefault(name, []).append(sf)
    width = max(len(n) for n in by_type)
    print(f"{len(by_type)} job types ({sum(map(len, by_type.values()))} with scale factors):")
    print(f"  {'job type':<{width}}  scale factors")
    for name, sfs in by_type.items():
        print(f"  {name:<{width}}  {','.join(map(str, sfs))}")
    print(f"\n{len(GPUS)} GPU types:")
    print(f"  {'gpu':<5} {'FP32 TFLOPS':>11} {'tensor TFLOPS':>13} {'memory GB':>9} {'DRAM GB/s':>9} "
          f"{'link GB/s':>9} {'$/hour':>6}")
    for g in GPUS.values():
        print(f"  {g.name:<5} {g.fp32_flops / 1e12:>11.1f} {g.tensor_flops / 1e12:>13.1f} {g.mem_bytes / 1e9:>9.0f} "
              f"{g.mem_bytes_per_s / 1e9:>9.0f} {g.link_bytes_per_s / 1e9:>9.1f} {g.dollars_per_hour:>6.2f}")
    return 0


# ----- show -----------------------------------------------------------------------------
def run_show(args) -> int:
    if args.table:
        if args.heterogeneity != 1.0 or args.network_gbps != DEFAULT_NETWORK_GBPS:
            raise InputError("--table", args.table, "--heterogeneity and --network-gbps apply to the model only")
        table = resolve_table(args.table, "--table")
        gpus = table.worker_types if args.gpu == "all" else _names(args.gpu)
        for g in gpus:
            if g not in table.isolated:
                raise InputError("--gpu", g, f"not in the table; it has {', '.join(table.isolated)}")
        title = f"{args.table}: isolated steps/s"
    else:
        table, gpus = _model_table(args)
        title = (f"modeled isolated steps/s (heterogeneity {args.heterogeneity:g}, "
                 f"network {args.network_gbps:g} Gbit/s)")
    columns = [c for g in gpus for c in (g, g + UNCONSOLIDATED)
               if c == g or (args.unconsolidated and c in table.isolated)]
    keys = [k for k in table.job_keys if not args.job or args.job.lower() in k[0].lower()]
    if not keys:
        raise InputError("--job", args.job, "matches no job type")
    print(title)
    print(_format(table, keys, columns))
    return 0


def _names(text: str) -> list[str]:
    names = list(dict.fromkeys(g.strip() for g in text.split(",") if g.strip()))
    if not names:
        raise InputError("--gpu", text, "name at least one worker type")
    return names


def _format(table: ThroughputTable, keys: list[JobKey], columns: list[str]) -> str:
    def cell(key: JobKey, worker: str) -> str:
        value = table.isolated.get(worker, {}).get(key)
        return "" if value is None else "-" if value == 0 else f"{value:.3f}"

    rows = [[k[0], str(k[1]), *(cell(k, c) for c in columns)] for k in keys]
    header = ["job type", "sf", *columns]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for r in [header, *rows]:
        parts = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(r))]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


# ----- export / import -----------------------------------------------------------------
def run_export(args) -> int:
    table, _ = _model_table(args)
    fmt = args.format or (format_for(args.out) if args.out else "gavel-json")
    fmt = _checked_format(fmt)
    if args.out:
        write_table(table, args.out, fmt)
        print(f"wrote {args.out} ({fmt}, {_counts(table)})")
        return 0
    try:
        write_table(table, sys.stdout, fmt)
        sys.stdout.flush()
    except BrokenPipeError:  # `gavel-ng profiles export | head`: the reader has seen enough
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail
    return 0


def _format_of(path: str) -> str:
    """The format `read_table` read the file in (by its content)."""
    from ..profiles.table_io import content_format

    return content_format(Path(path).read_text(encoding="utf-8-sig"))


def run_import(args) -> int:
    fmt = _checked_format(args.format) if args.format else None
    out_fmt = format_for(args.out) if args.out else None
    table = read_table(args.file, fmt)
    print(f"{args.file}: {fmt or _format_of(args.file)}, {_counts(table)}, "
          f"{len(table.job_types)} job types")
    width = max(len(w) for w in table.isolated)
    print(f"  {'worker type':<{width}}  {'jobs':>5}  {'pairs':>6}  {'min steps/s':>11}  {'max steps/s':>11}  "
          f"cannot run")
    for worker, per in table.isolated.items():
        values = list(per.values())
        n_pairs = sum(len(row) for row in table.pairs.get(worker, {}).values())
        print(f"  {worker:<{width}}  {len(per):>5}  {n_pairs:>6}  {min(values):>11.4g}  {max(values):>11.4g}  "
              f"{sum(v == 0 for v in values)}")
    for warning in _warnings(table):
        print(f"warning: {warning}")
    if args.out:
        write_table(table, args.out, out_fmt)
        print(f"wrote {args.out} ({out_fmt})")
    return 0


def _checked_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise InputError("--format", fmt, f"must be one of {', '.join(FORMATS)}")
    return fmt


def _counts(table: ThroughputTable) -> str:
    n_pairs = sum(len(row) for per in table.pairs.values() for row in per.values())
    return f"{len(table.isolated)} worker types, {len(table.job_keys)} job keys, {n_pairs} pair entries"


def _warnings(table: ThroughputTable) -> list[str]:
    """Things a scheduler can live with but a user probably did not mean."""
    out = []
    all_keys = set(table.job_keys)
    for worker, per in table.isolated.items():
        missing = len(all_keys - set(per))
        if missing:
            out.append(f"{worker}: no throughput for {missing} job keys (treated as cannot run)")
        if worker.endswith(UNCONSOLIDATED) and worker.removesuffix(UNCONSOLIDATED) not in table.isolated:
            out.append(f"{worker}: no consolidated {worker.removesuffix(UNCONSOLIDATED)} entry")
    unequal = sum(1 for per in table.pairs.values() for key, row in per.items() for other in row
                  if other[1] != key[1])
    if unequal:
        out.append(f"{unequal} pair entries between different scale factors (Gavel pairs only equal ones)")
    return out


# ----- elastic --------------------------------------------------------------------------
def run_elastic(args) -> int:
    import json

    from ..elastic.measured import error_table, fit_directory
    from ..elastic.profile_sets import DATA_FILES, parse_set, set_data

    if args.fit:
        data = fit_directory(args.fit, args.name)
        parse_set(data, "fitted set")  # what the package will load must check
    else:
        if args.name not in DATA_FILES:
            raise InputError("--name", args.name, f"no shipped measured set; known: {', '.join(DATA_FILES)}")
        data = set_data(args.name)
    print(f"profile set {data.get('name', args.name)}: {data.get('source', '')}")
    print(f"fitted {data.get('fitted', '?')}: {data.get('method', '')}")
    print("relative error of the predicted iteration time (the measured step time), median / max:")
    rows = error_table(data)
    gpus = list(dict.fromkeys(g for _, g, *_ in rows))
    cells = {(a, g): f"{100 * med:.1f} / {100 * mx:.1f} %" for a, g, _, med, mx in rows}
    apps = list(dict.fromkeys(a for a, *_ in rows))
    print(f"  {'application':<12}" + "".join(f"{g:>17}" for g in gpus))
    for a in apps:
        print(f"  {a:<12}" + "".join(f"{cells.get((a, g), '-'):>17}" for g in gpus))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {out}")
    return 0
