"""gavel_ng.logs: a repeating warning is logged once, then counted by kind with its jobs."""

from __future__ import annotations

import logging

import numpy as np

from gavel_ng.logs import WarningLedger, collapse_repeats, format_warnings, readable

log = logging.getLogger("gavel_ng.tests.logs")


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_first_of_each_kind_is_logged_then_counted_with_its_jobs():
    root = logging.getLogger()
    seen = Collect()
    root.addHandler(seen)
    try:
        with collapse_repeats() as ledger:
            for i in range(50):
                log.warning("SLOs cannot be met for %d job(s): %s", 1, str(i % 3), extra={"jobs": [str(i % 3)]})
                log.warning("solver %s failed (%s)", "highs", f"status {i}")        # one kind: the template
                log.warning(f"no template here {i}", extra={"kind": "explicit kind", "jobs": np.int64(i)})
            log.info("infos are never collapsed")
            log.info("infos are never collapsed")
        log.warning("after the ledger: logged as usual")
        log.warning("after the ledger: logged as usual")
    finally:
        root.removeHandler(seen)
    assert seen.messages == ["SLOs cannot be met for 1 job(s): 0", "solver highs failed (status 0)",
                             "no template here 0", "after the ledger: logged as usual",
                             "after the ledger: logged as usual"]
    kinds = {w["kind"]: w for w in ledger.summary()}
    assert set(kinds) == {"SLOs cannot be met for %d job(s): %s", "solver %s failed (%s)", "explicit kind"}
    slo = kinds["SLOs cannot be met for %d job(s): %s"]
    assert slo["count"] == 50 and slo["jobs"] == ["0", "1", "2"]
    assert slo["first"] == "SLOs cannot be met for 1 job(s): 0"
    assert slo["message"] == "SLOs cannot be met for ... job(s): ..."
    assert kinds["solver %s failed (%s)"]["jobs"] == [] and kinds["explicit kind"]["jobs"] == list(range(50))
    assert ledger.repeated == 147
    assert logging.getLogger("gavel_ng").propagate and not logging.getLogger("gavel_ng").handlers


def test_nested_ledgers_each_count_and_the_innermost_decides():
    with collapse_repeats() as outer:
        log.warning("x %d", 1)
        with collapse_repeats() as inner:
            log.warning("x %d", 2)        # new to the inner ledger: logged again
            log.warning("x %d", 3)
        log.warning("x %d", 4)
    assert [w["count"] for w in outer.summary()] == [4]
    assert [w["count"] for w in inner.summary()] == [2]


def test_a_long_running_service_relogs_a_kind_with_its_count():
    now = [0.0]
    ledger = WarningLedger(reemit_after=60.0, clock=lambda: now[0])
    seen = Collect()
    logging.getLogger().addHandler(seen)
    try:
        with collapse_repeats(ledger):
            for t in range(0, 200, 10):   # every 10 s for 200 s
                now[0] = float(t)
                log.warning("round %d: job %d cannot meet its SLO", t, 7, extra={"jobs": [7]})
    finally:
        logging.getLogger().removeHandler(seen)
    assert seen.messages == ["round 0: job 7 cannot meet its SLO",
                             "round 60: job 7 cannot meet its SLO (and 5 more like it since it was last logged)",
                             "round 120: job 7 cannot meet its SLO (and 5 more like it since it was last logged)",
                             "round 180: job 7 cannot meet its SLO (and 5 more like it since it was last logged)"]
    assert ledger.summary()[0]["count"] == 20


def test_text_lines_cap_the_job_list():
    lines = format_warnings([{"count": 3, "message": "m", "jobs": list(range(30))},
                             {"count": 1, "message": "n", "jobs": []}], max_jobs=4)
    assert lines == ["       3 x m  [jobs 0, 1, 2, 3, ... (30 jobs)]", "       1 x n"]
    assert readable("%(name)s took %.1f s, %d%%") == "... took ... s, ...%"
