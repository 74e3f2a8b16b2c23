"""The same grid on a local Ray instance (skipped when ray is not installed)."""

import pytest

from gavel_ng.sweep import ResultsStore, expand, run_sweep

ray = pytest.importorskip("ray")


@pytest.mark.slow
@pytest.mark.xdist_group("ray")   # one local Ray instance at a time under `make test`'s -n 2
def test_ray_backend_matches_local(tmp_path, tiny_base):
    pts = expand({"policy": ["las", "las_agnostic"], "jobs_per_hour": [1.0, 2.0]}, tiny_base)
    local = ResultsStore(tmp_path / "local.csv")
    run_sweep(pts, local, workers=1)
    remote = ResultsStore(tmp_path / "ray.csv")
    rep = run_sweep(pts[:3], remote, backend="ray", workers=2)
    assert (rep.ran, rep.failed) == (3, 0)
    rep = run_sweep(pts, remote, backend="ray", workers=2)       # resumes: only the 4th point runs
    assert (rep.skipped, rep.ran) == (3, 1)
    a = local.load().set_index("point_id")["avg_jct_hours"]
    b = remote.load().set_index("point_id")["avg_jct_hours"]
    assert a.sort_index().tolist() == pytest.approx(b.sort_index().tolist())
    assert len(remote.jobs(pts[0].point_id)) == 12
