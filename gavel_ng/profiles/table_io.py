"""Read and write throughput tables as Gavel JSON or as a flat CSV.

The CSV is for people who measured their own jobs: one row per isolated throughput,
plus one row per space-sharing pair. Columns (the first four are required)::

    job_type, scale_factor, worker_type, throughput,
    partner, partner_scale_factor, throughput_with_partner, partner_throughput_with_partner

A pair row names the partner's key (``partner`` + ``partner_scale_factor``, which
defaults to ``scale_factor``) and both jobs' steps/s while sharing a GPU, so that the
table's ``(mine, partner's)`` entry round-trips. ``partner_throughput_with_partner`` may
be left blank when the mirror row (the partner paired with this job) gives it. On a
pair row ``throughput`` may be blank; if given it must equal the job's isolated row.
Every job in a pair row needs an isolated row on the same worker type, which catches
misspelled job types and keeps the conversion to Gavel JSON lossless.

Floats are written with ``repr`` so that reading a written table gives it back exactly.

``resolve_table`` is what every option that takes a table calls: a built-in table's name
(``gavel-osdi20``), a Gavel-format JSON file, or a CSV.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gavel_ng.errors import InputError
from gavel_ng.throughputs import BUILTIN_TABLES, JobKey, ThroughputTable, format_job_key

log = logging.getLogger(__name__)

FORMATS = ("csv", "gavel-json")
SUFFIXES = {".csv": "csv", ".json": "gavel-json"}
REQUIRED = ("job_type", "scale_factor", "worker_type", "throughput")
PAIR_COLUMNS = ("partner", "partner_scale_factor", "throughput_with_partner", "partner_throughput_with_partner")
COLUMNS = REQUIRED + PAIR_COLUMNS


def format_for(path: str | Path, format: str | None = None) -> str:
    """The format to WRITE `path` in: the explicit one if given, else the one its suffix names (a file
    being read is judged by its content: `content_format`)."""
    if format is not None:
        if format not in FORMATS:
            raise InputError("format", format, f"must be one of {', '.join(FORMATS)}")
        return format
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError("format", suffix or str(path),
                         "cannot tell the format from the file name (.csv or .json); give it explicitly")
    return SUFFIXES[suffix]


def content_format(text: str) -> str:
    """A table's format from its text, never its name: whatever parses as JSON is Gavel JSON (a
    malformed one is then named as such), anything else CSV."""
    head = text.lstrip()[:1]
    if head == "{":
        return "gavel-json"
    if head in ("[", '"') or head.isdigit():
        try:
            json.loads(text)
        except ValueError:
            return "csv"
        return "gavel-json"
    return "csv"


def read_table(path: str | Path, format: str | None = None) -> ThroughputTable:
    """Load and validate a table (its format from its content unless given); errors name the file,
    line (CSV) or entry (JSON) and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise InputError("file", str(path), f"cannot read ({reason})") from None
    fmt = format_for(path, format) if format is not None else content_format(text)
    return parse_csv(text, path.name) if fmt == "csv" else parse_gavel_json(text, path.name)


def resolve_table(value: str | Path, flag: str = "--throughputs") -> ThroughputTable:
    """The table a command-line value names: a built-in table (see BUILTIN_TABLES), a Gavel-format
    JSON file, or a CSV as `gavel-ng profiles export` writes it. Every error is an InputError
    naming `flag` and the value."""
    text = str(value)
    if text in BUILTIN_TABLES:
        return ThroughputTable.builtin(text)
    known = ", ".join(BUILTIN_TABLES)
    path = Path(text)
    if not path.is_file():
        what = "no such file" if path.suffix.lower() in SUFFIXES else "neither a file nor a built-in table"
        raise InputError(flag, text, f"{what} (built-in tables: {known}; files: Gavel JSON or CSV)")
    try:  # Gavel JSON or CSV, by content
        return read_table(path)
    except InputError as exc:
        raise InputError(flag, text, str(exc)) from None


def write_table(table: ThroughputTable, path_or_stream: str | Path | IO[str], format: str | None = None) -> None:
    """Write a table to a file or text stream (the format defaults to the file suffix)."""
    if isinstance(path_or_stream, (str, Path)):
        fmt = format_for(path_or_stream, format)
    elif format is None:
        raise InputError("format", None, "required when writing to a stream")
    else:
        fmt = format_for("", format)
    with _open_out(path_or_stream) as out:
        if fmt == "csv":
            _write_csv(table, out)
        else:
            json.dump(table.to_gavel_dict(), out, indent=1)
            out.write("\n")


@contextmanager
def _open_out(target: str | Path | IO[str]) -> Iterator[IO[str]]:
    if not isinstance(target, (str, Path)):
        yield target
        return
    try:
        f = open(target, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise InputError("output", str(target), f"cannot write ({exc.strerror})") from None
    with f:
        yield f
    log.info("wrote %s", target)


# ----- Gavel JSON -----------------------------------------------------------------------
def parse_gavel_json(text: str, source: str = "table.json") -> ThroughputTable:
    """Parse Gavel JSON and check that every pair's partner has an isolated entry."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        line = text.splitlines()[exc.lineno - 1].strip() if text.strip() else ""
        raise InputError(f"{source} line {exc.lineno}", line[:60], f"not valid JSON ({exc.msg})") from None
    table = ThroughputTable.from_gavel_dict(data, source=source)
    for worker, per in table.pairs.items():
        for key, row in per.items():
            for partner in row:
                if partner not in table.isolated[worker]:
                    raise InputError(f"{source}.{worker}.{format_job_key(key)}", format_job_key(partner),
                                     f"partner has no isolated throughput on {worker}")
    return table


# ----- CSV ------------------------------------------------------------------------------
@dataclass
class _PairRow:
    """One pair row, kept until all isolated rows are known."""

    line: int
    worker: str
    key: JobKey
    partner: JobKey
    throughput: float | None
    mine: float
    theirs: float | None


def parse_csv(text: str, source: str = "table.csv") -> ThroughputTable:
    """Parse the CSV described in the module docstring."""
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    iso: dict[tuple[str, JobKey], tuple[float, int]] = {}
    pair_rows: dict[tuple[str, JobKey, JobKey], _PairRow] = {}
    table = ThroughputTable()
    try:
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if header is None:
                header = _check_header(cells, source, line)
                continue
            row = _row_dict(header, cells, source, line)
            _add_row(row, source, line, iso, pair_rows, table)
    except csv.Error as exc:
        raise InputError(f"{source} line {reader.line_num}", "", f"malformed CSV ({exc})") from None
    if header is None:
        raise InputError(f"{source} line 1", "", "empty file; expected a header: " + ",".join(REQUIRED))
    if not iso:
        raise InputError(f"{source} line {reader.line_num}", "", "no data rows")
    _add_pairs(pair_rows, iso, source, table)
    return table


def _check_header(cells: list[str], source: str, line: int) -> list[str]:
    names = [c.strip().lower() for c in cells]
    where = f"{source} line {line}: header"
    for name in names:
        if name not in COLUMNS:
            raise InputError(where, name, f"unknown column; expected some of {', '.join(COLUMNS)}")
        if names.count(name) > 1:
            raise InputError(where, name, "duplicate column")
    for name in REQUIRED:
        if name not in names:
            raise InputError(where, ",".join(names), f"missing column {name}")
    extra = [n for n in PAIR_COLUMNS if n in names]
    if extra and "partner" not in names:
        raise InputError(where, extra[0], "pair columns need a partner column")
    if "partner" in names and "throughput_with_partner" not in names:
        raise InputError(where, ",".join(names), "a partner column needs a throughput_with_partner column")
    return names


def _row_dict(header: list[str], cells: list[str], source: str, line: int) -> dict[str, str]:
    if len(cells) > len(header):
        raise InputError(f"{source} line {line}", ",".join(cells[len(header):]),
                         f"{len(cells)} fields but the header has {len(header)}")
    values = [c.strip() for c in cells] + [""] * (len(header) - len(cells))
    return dict(zip(header, values))


def _add_row(row: dict[str, str], source: str, line: int, iso: dict, pair_rows: dict,
             table: ThroughputTable) -> None:
    where = f"{source} line {line}"
    worker = _text(row, "worker_type", where)
    key = (_text(row, "job_type", where), _scale_factor(row, "scale_factor", where))
    partner_name = row.get("partner", "")
    if not partner_name:
        for name in PAIR_COLUMNS[1:]:
            if row.get(name):
                raise InputError(f"{where}: {name}", row[name], "only allowed on a pair row (with a partner)")
        if (worker, key) in iso:
            first = iso[worker, key][1]
            raise InputError(f"{where}: job_type", key[0],
                             f"duplicate row for scale factor {key[1]} on {worker} (first on line {first})")
        value = _number(row, "throughput", where)
        iso[worker, key] = (value, line)
        table.isolated.setdefault(worker, {})[key] = value
        return
    sf = row.get("partner_scale_factor", "")
    partner = (partner_name, _scale_factor(row, "partner_scale_factor", where) if sf else key[1])
    if (worker, key, partner) in pair_rows:
        first = pair_rows[worker, key, partner].line
        raise InputError(f"{where}: partner", partner_name, f"duplicate pair row (first on line {first})")
    theirs = row.get("partner_throughput_with_partner", "")
    pair_rows[worker, key, partner] = _PairRow(
        line, worker, key, partner,
        throughput=_number(row, "throughput", where) if row["throughput"] else None,
        mine=_number(row, "throughput_with_partner", where),
        theirs=_number(row, "partner_throughput_with_partner", where) if theirs else None)


def _add_pairs(pair_rows: dict[tuple[str, JobKey, JobKey], _PairRow], iso: dict, source: str,
               table: ThroughputTable) -> None:
    """Check pair rows against the isolated rows, fill in blanks from mirror rows."""
    for p in pair_rows.values():
        where = f"{source} line {p.line}"
        for field_name, key in (("job_type", p.key), ("partner", p.partner)):
            if (p.worker, key) not in iso:
                raise InputError(f"{where}: {field_name}", key[0],
                                 f"no isolated row for scale factor {key[1]} on {p.worker}")
        if p.throughput is not None and p.throughput != iso[p.worker, p.key][0]:
            raise InputError(f"{where}: throughput", p.throughput,
                             f"differs from the isolated row on line {iso[p.worker, p.key][1]}; leave it blank")
        theirs = p.theirs
        if theirs is None:
            mirror = pair_rows.get((p.worker, p.partner, p.key))
            if mirror is None:
                raise InputError(f"{where}: partner_throughput_with_partner", "",
                                 "required unless a mirror row (the partner paired with this job) gives it")
            theirs = mirror.mine
        table.pairs.setdefault(p.worker, {}).setdefault(p.key, {})[p.partner] = (p.mine, theirs)


def _text(row: dict[str, str], name: str, where: str) -> str:
    value = row[name]
    if not value:
        raise InputError(f"{where}: {name}", value, "required")
    return value


def _scale_factor(row: dict[str, str], name: str, where: str) -> int:
    raw = row[name]
    value = int(raw) if raw.isascii() and raw.isdigit() else 0
    if value < 1:
        raise InputError(f"{where}: {name}", raw, "must be a whole number of GPUs, at least 1")
    return value


def _number(row: dict[str, str], name: str, where: str) -> float:
    raw = row[name]
    try:
        if "_" in raw:  # float() takes "1_000"; a spreadsheet never writes that
            raise ValueError(raw)
        value = float(raw)
    except ValueError:
        raise InputError(f"{where}: {name}", raw, "must be a non-negative number") from None
    if not math.isfinite(value):
        raise InputError(f"{where}: {name}", raw, "must be finite")
    if value < 0:
        raise InputError(f"{where}: {name}", raw, "must be a non-negative number")
    return value


def _write_csv(table: ThroughputTable, out: IO[str]) -> None:
    has_pairs = any(row for per in table.pairs.values() for row in per.values())
    columns = COLUMNS if has_pairs else REQUIRED
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    blank = [""] * (len(columns) - len(REQUIRED))
    for worker in dict.fromkeys([*table.isolated, *table.pairs]):
        per_pairs = table.pairs.get(worker, {})
        for key in dict.fromkeys([*table.isolated.get(worker, {}), *per_pairs]):
            if key in table.isolated.get(worker, {}):
                writer.writerow([key[0], key[1], worker, repr(float(table.isolated[worker][key])), *blank])
            for partner, (mine, theirs) in per_pairs.get(key, {}).items():
                writer.writerow([key[0], key[1], worker, "", partner[0], partner[1],
                                 repr(float(mine)), repr(float(theirs))])
