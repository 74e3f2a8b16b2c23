"""A user's policy in a file of its own, by name, in every command: solve, simulate, sweep
(process pool, a fresh interpreter, Ray), plus the installed-package entry-point group.

Everything runs on the built-in profiles with a few jobs on a small cluster. The
scheduler (`gavel-ng scheduler --plugin`) is tested in tests/worker/test_cluster_plugin.py.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import subprocess
import sys
import textwrap

import pytest

from gavel_ng.cli import main
from gavel_ng.errors import InputError
from gavel_ng.policies import get_policy, list_policies, plugins
from gavel_ng.sweep import ResultsStore, SweepPoint, run_point

PROPORTIONAL = '''\
import cvxpy as cp
import gavel_ng as g


@g.policy("proportional", "maximize sum_m log(sf_m thr_m / thr_equal_m)")
def proportional(p):
    return cp.Maximize(cp.sum(cp.log(p.normalized_thr.cvx)))
'''
SMALL = ["--cluster", "v100=2,k80=2", "--static", "6"]


@pytest.fixture(autouse=True)
def _each_test_leaves_the_registry_as_it_found_it(clean_registry):
    """Each test starts from the built-in policies and leaves them so (tests/conftest.py)."""


@pytest.fixture
def plugin_file(tmp_path):
    path = tmp_path / "fair_policies.py"
    path.write_text(PROPORTIONAL)
    return path


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_the_plugin_is_ten_lines():
    assert len([line for line in PROPORTIONAL.splitlines() if line.strip()]) <= 10


def test_solve_with_plugin(plugin_file, capsys):
    assert "proportional" not in list_policies()
    assert main(["solve", "--plugin", str(plugin_file), "--policy", "proportional", "--example", "paper_example",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "proportional" and out["solver"] == "clarabel"
    assert all(v > 0 for v in out["effective_throughput"].values())


def test_simulate_with_plugin(plugin_file, capsys):
    assert main(["simulate", "--plugin", str(plugin_file), "--policy", "proportional", *SMALL, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "proportional" and out["jobs_measured"] == 6 and not out["unstable"]
    assert out["policy_solves"] >= 1


def test_simulate_without_the_plugin_names_the_policy(capsys):
    assert main(["simulate", "--policy", "proportional", *SMALL]) == 2
    err = capsys.readouterr().err
    assert "policy='proportional'" in err and len(err.strip().splitlines()) == 1


def _sweep(tmp_path, plugin_file, *extra):
    return main(["sweep", "--plugin", str(plugin_file), "--results", str(tmp_path / "r.csv"), "--policy",
                 "proportional", *SMALL, "--seed", "0,1", "--json", *extra])


def test_sweep_process_pool_with_plugin_and_resume(tmp_path, plugin_file, capsys):
    assert _sweep(tmp_path, plugin_file, "--workers", "2") == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ran"], report["failed"]) == (2, 0), report
    df = ResultsStore(tmp_path / "r.csv").load()
    assert set(df["status"]) == {"ok"} and set(df["policy"]) == {"proportional"}
    # the plugin is not part of a point's identity: the ids are those of the plain points
    ids = {SweepPoint(policy="proportional", cluster="v100=2,k80=2", static=6, seed=s).point_id for s in (0, 1)}
    assert set(df["point_id"]) == ids
    assert _sweep(tmp_path, plugin_file, "--workers", "2") == 0       # resumes: nothing left to run
    report = json.loads(capsys.readouterr().out)
    assert (report["skipped"], report["ran"]) == (2, 0)


def test_points_carry_the_plugin_text_to_a_fresh_interpreter(tmp_path, plugin_file):
    """A spawned process has none of the driver's state and the file is gone: the point's
    plugin travels as its text."""
    shipped = plugins.read_plugin(str(plugin_file))
    plugin_file.unlink()
    point = SweepPoint(policy="proportional_agnostic", cluster="v100=2,k80=2", static=4)
    with mp.get_context("spawn").Pool(1) as pool:
        bare = pool.apply(run_point, (point,))
        res = pool.apply(run_point, (point,), {"plugins": (shipped,)})
    assert not bare.ok and "proportional_agnostic" in bare.row["error"]   # without it, the name is unknown
    assert res.ok, res.row["error"]
    assert res.row["jobs_measured"] == 4


@pytest.mark.slow
@pytest.mark.xdist_group("ray")   # one local Ray instance at a time under `make test`'s -n 2
def test_sweep_on_ray_with_plugin(tmp_path, plugin_file, capsys):
    pytest.importorskip("ray")
    assert _sweep(tmp_path, plugin_file, "--backend", "ray", "--workers", "2") == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ran"], report["failed"]) == (2, 0), report
    df = ResultsStore(tmp_path / "r.csv").load()
    assert set(df["status"]) == {"ok"} and df["avg_jct_hours"].notna().all()


BAD = {
    "missing": None,
    "raises": "x = 1\nraise RuntimeError('no GPUs today')\n",
    "nothing": "import gavel_ng\nX = 1\n",
    "syntax": "def broken(:\n    pass\n",
}
NEEDLE = {"missing": "no such file", "raises": "line 2: RuntimeError: no GPUs today",
          "nothing": "registers no policy", "syntax": "syntax error at line 1"}


def _command(name: str, tmp_path, plugin: str) -> list[str]:
    if name == "solve":
        return ["solve", "--plugin", plugin, "--example", "paper_example"]
    if name == "simulate":
        return ["simulate", "--plugin", plugin, *SMALL]
    if name == "sweep":
        return ["sweep", "--plugin", plugin, "--results", str(tmp_path / "r.csv"), *SMALL]
    config = tmp_path / "cluster.json"
    config.write_text(json.dumps({"worker_types": ["v100"]}))
    return ["scheduler", "--plugin", plugin, "--cluster-config", str(config), "--state", str(tmp_path / "state"),
            "--port", "0", "--bind", "127.0.0.1"]


@pytest.mark.parametrize("command", ["solve", "simulate", "sweep", "scheduler"])
@pytest.mark.parametrize("kind", list(BAD))
def test_bad_plugin_is_one_line_exit_2_naming_the_file(tmp_path, capsys, command, kind):
    path = tmp_path / f"{kind}_plugin.py"
    if BAD[kind] is not None:
        path.write_text(BAD[kind])
    assert main(_command(command, tmp_path, str(path))) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"gavel-ng {command}: error: --plugin=") and str(path) in err and NEEDLE[kind] in err, err
    assert not (tmp_path / "r.csv").exists()


def test_a_failing_plugin_leaves_the_registry_as_it_was(tmp_path):
    path = write(tmp_path, "half.py", """\
        import gavel_ng as g

        @g.policy("half_done")
        def half_done(p):
            return p.maximize_min(p.normalized_thr)

        raise ImportError("missing dependency")
        """)
    with pytest.raises(InputError, match="line 7: ImportError: missing dependency"):
        plugins.load(str(path))
    assert "half_done" not in list_policies()


def test_a_taken_name_is_refused_unless_the_plugin_says_it_replaces(tmp_path, caplog):
    las = get_policy("las")
    clash = write(tmp_path, "clash.py", """\
        import gavel_ng as g

        @g.policy("las")
        def my_las(p):
            return p.maximize_min(p.normalized_thr)
        """)
    with pytest.raises(InputError, match="policy 'las' is registered already .*replace=True"):
        plugins.load(str(clash))
    assert get_policy("las") is las and get_policy("las_agnostic").fn is las.fn
    stand_in = write(tmp_path, "stand_in.py", """\
        import gavel_ng as g

        @g.policy("las", replace=True)
        def my_las(p):
            return p.maximize_min(p.normalized_thr)
        """)
    assert plugins.load(str(stand_in)) == ("las", "las_agnostic")
    assert get_policy("las").fn.__name__ == "my_las" and "replaces the policies las" in caplog.text


def test_loading_is_idempotent_and_files_never_collide(tmp_path, plugin_file):
    first = plugins.load_plugins([str(plugin_file)])
    assert plugins.load(first[0]) == ("proportional", "proportional_agnostic")
    assert plugins.load(str(plugin_file)) == ("proportional", "proportional_agnostic")   # no second run
    (tmp_path / "other").mkdir()
    other = write(tmp_path / "other", "fair_policies.py", """\
        import gavel_ng as g

        @g.policy("linear_fair", "maximize min_m thr_m / thr_equal_m")
        def linear_fair(p):
            return p.maximize_min(p.normalized_thr)
        """)
    assert plugins.load(str(other)) == ("linear_fair", "linear_fair_agnostic")
    modules = [m for m in sys.modules if m.startswith("gavel_ng_plugin_fair_policies_")]
    assert len(modules) == 2
    assert get_policy("proportional").fn.__module__ != get_policy("linear_fair").fn.__module__


def test_a_module_by_dotted_name(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "gng_test_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fair.py").write_text(PROPORTIONAL)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["solve", "--plugin", "gng_test_pkg.fair", "--policy", "proportional", "--example",
                 "paper_example", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "proportional"
    shipped = plugins.read_plugin("gng_test_pkg.fair")
    assert not shipped.is_file and shipped.source is None     # a module travels by name


ENTRY_POINTS = """\
[gavel_ng.policies]
fair = gng_ep_fair
broken = gng_ep_broken:nothing
"""


@pytest.fixture
def installed(tmp_path):
    """A distribution on a path of its own: a .dist-info with entry_points.txt, as pip writes it."""
    site = tmp_path / "site"
    dist = site / "gng_ep_demo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gng-ep-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "gng_ep_fair.py").write_text(PROPORTIONAL.replace('"proportional"', '"ep_proportional"'))
    (site / "gng_ep_broken.py").write_text("raise RuntimeError('broken on purpose')\n")
    return site


def _gavel(site, *args):
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "gavel_ng", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.slow
def test_entry_points_register_policies_everywhere_without_flags(installed, tmp_path):
    listed = _gavel(installed, "policies")
    assert listed.returncode == 0, listed.stderr
    assert "ep_proportional " in listed.stdout and "ep_proportional_agnostic" in listed.stdout
    assert "las " in listed.stdout                      # the broken one broke nothing
    warnings = [line for line in listed.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "broken = gng_ep_broken:nothing" in warnings[0], listed.stderr
    assert "gng-ep-demo" in warnings[0] and "RuntimeError: broken on purpose" in warnings[0]
    solved = _gavel(installed, "solve", "--policy", "ep_proportional", "--example", "paper_example", "--json")
    assert solved.returncode == 0, solved.stderr
    assert json.loads(solved.stdout)["policy"] == "ep_proportional"
    simulated = _gavel(installed, "simulate", "--policy", "ep_proportional_agnostic", *SMALL, "--json")
    assert simulated.returncode == 0, simulated.stderr
    assert json.loads(simulated.stdout)["jobs_measured"] == 6
