"""Regenerate gavel_ng/profiles/data/workloads.json: per-iteration work of the 26 job types.

Usage: python scripts/measure_workloads.py [--out PATH]
Runs on the meta device (no GPU, no data); takes well under a minute on two cores.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from gavel_ng.profiles.measure import measure_all  # noqa: E402

log = logging.getLogger("measure_workloads")
DEFAULT_OUT = ROOT / "gavel_ng" / "profiles" / "data" / "workloads.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    profiles = measure_all("full")
    doc = {
        "description": "Work of one training iteration (forward+backward+optimizer) per job "
                       "type, counted on the meta device; see gavel_ng/profiles/measure.py.",
        "torch_version": torch.__version__.split("+")[0],
        "job_types": [p.to_json() for p in profiles],
    }
    lines = ",\n".join("  " + json.dumps(r, separators=(",", ":")) for r in doc["job_types"])
    head = json.dumps({k: v for k, v in doc.items() if k != "job_types"}, indent=1)[:-2]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(f'{head},\n "job_types": [\n{lines}\n ]\n}}\n')
    json.loads(args.out.read_text())  # fail loudly if the hand-laid layout is not JSON
    log.info("wrote %d job types to %s in %.1f s", len(profiles), args.out,
                 time.perf_counter() - start)


if __name__ == "__main__":
    main()
