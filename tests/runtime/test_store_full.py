"""The state store when SQLite cannot write (its own SQLITE_FULL, through PRAGMA max_page_count):
the real reason reaches the caller, nothing of a failed decision is kept, on disk or in memory,
and writes work again once there is room. The full-disk case with real processes and a real
full file system is tests/worker/test_disk_full.py."""

from __future__ import annotations

import pytest

from gavel_ng.protocol.jobspec import JobSpec
from gavel_ng.protocol.protos import gavel_pb2 as pb
from gavel_ng.runtime.config import ClusterConfig
from gavel_ng.runtime.service import SchedulerService
from gavel_ng.runtime.store import Store, StoreError

JOB = JobSpec("ResNet-18 (batch size 32)", steps=1000, size="tiny")


def fill_up(store: Store) -> None:
    """No page more than the file has now: the next write that needs one fails with SQLITE_FULL."""
    pages = store._all("PRAGMA page_count")[0][0]
    store._all(f"PRAGMA max_page_count = {pages}")
    for size in (2000, 200, 20, 0):           # use up the free pages, then the room left on the last ones
        with pytest.raises(StoreError):
            for i in range(100_000):
                store.event("filler", detail="x" * size, n=i)


def room(store: Store) -> None:
    store._all("PRAGMA max_page_count = 1073741823")


def test_a_full_store_refuses_with_the_real_reason_and_keeps_nothing(tmp_path):
    store = Store(tmp_path)
    fill_up(store)
    before = len(store.load_jobs())
    with pytest.raises(StoreError) as err:
        store.add_jobs([JOB] * 50, 0.0)
    assert err.value.full and "database or disk is full" in str(err.value)
    assert "rollback" not in str(err.value)
    assert len(store.load_jobs()) == before and store.failing
    room(store)
    assert len(store.add_jobs([JOB] * 50, 0.0)) == 50 and not store.failing
    store.close()


def test_decisions_change_memory_only_after_the_store_took_them(tmp_path):
    svc = SchedulerService(ClusterConfig(round_seconds=1.0), tmp_path / "state", port=0, bind="127.0.0.1")
    try:
        st = svc.state
        st.register(pb.RegisterWorkerRequest(worker_id="w", address="w:1", gpu_type="v100", gpus=1),
                    lambda address: (None, None))
        [job] = st.submit([JOB])
        fill_up(svc.store)
        with pytest.raises(StoreError):
            st.cancel(job)
        assert st.jobs[job].status == "queued" and st.jobs[job].finished is None
        with pytest.raises(StoreError):
            st.submit([JOB])
        assert list(st.jobs) == [job]
        w = st.workers["w"]
        with pytest.raises(StoreError):
            st.worker_lost(w, "test")
        assert w.alive                         # retried by check_workers once the store takes it
        room(svc.store)
        assert st.cancel(job)[0] == "cancelled" and st.jobs[job].status == "cancelled"
        assert st.worker_lost(w, "test") == [] and not w.alive
    finally:
        svc.stop(grace=0.1)
