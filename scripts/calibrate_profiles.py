"""Fit the performance model to a measured Gavel-format throughput table and report.

Usage: python scripts/calibrate_profiles.py [--reference gavel-osdi20|FILE.json|FILE.csv] [--network-gbps 10]
    [--dry-run]
Writes gavel_ng/profiles/data/constants.json unless --dry-run. The measured table is
only read; nothing from it is stored except the fitted constants.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(ROOT))

from gavel_ng.profiles.calibrate import fit_constants, score  # noqa: E402
from gavel_ng.profiles.table_io import resolve_table  # noqa: E402

DEFAULT_REFERENCE = "gavel-osdi20"   # Gavel's measured K80/P100/V100 table, shipped with gavel_ng
OUT = ROOT / "gavel_ng" / "profiles" / "data" / "constants.json"
log = logging.getLogger("calibrate_profiles")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=DEFAULT_REFERENCE)
    parser.add_argument("--network-gbps", type=float, default=10.0)
    parser.add_argument("--dry-run", action="store_true", help="report only, write nothing")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    measured = resolve_table(args.reference, "--reference")
    constants = fit_constants(measured, args.network_gbps)
    report = score(measured, constants, args.network_gbps)
    print(f"single-GPU throughputs, 26 job types (targets: Spearman >= 0.8, "
          f"median |log| <= {math.log(1.5):.3f}):")
    for t in report.types:
        print(f"  {t.gpu:5s} Spearman {t.spearman:.3f}  median |log(model/measured)| "
              f"{t.median_abs_log_error:.3f} (x{math.exp(t.median_abs_log_error):.2f})")
    print(f"V100-over-K80 speedups: Spearman {report.speedup_spearman:.3f}")
    print(f"multi-GPU (sf 2-8, both placements): median |log| "
          f"{report.multi_gpu_median_abs_log_error:.3f}")
    print(f"space-sharing slowdowns: median |log| {report.pair_median_abs_log_error:.3f}")
    print(f"single-GPU pairs marked impossible correctly: {report.impossible_pair_accuracy:.1%}")
    print("constants:", json.dumps(constants.to_json(), indent=1))
    if not args.dry_run:
        doc = {"description": "Performance-model constants fitted by "
                              "scripts/calibrate_profiles.py; see gavel_ng/profiles/model.py.",
               "network_gbps": args.network_gbps,
               "constants": constants.to_json(),
               "fit": {"spearman": {t.gpu: round(t.spearman, 3) for t in report.types},
                       "median_abs_log_error": {t.gpu: round(t.median_abs_log_error, 3)
                                                for t in report.types},
                       "speedup_spearman": round(report.speedup_spearman, 3)}}
        OUT.write_text(json.dumps(doc, indent=1) + "\n")
        log.warning("wrote %s", OUT)


if __name__ == "__main__":
    main()
