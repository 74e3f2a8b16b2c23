"""Pictures and progress that hide nothing (issue 37, part 3): `gavel-ng plot` draws along any swept
axis; a point whose runs left jobs unfinished is never part of a clean line; sweep progress names
every value of a point; no 'nan' in a legend; value labels clear their error bars; a log axis has
plain numbers; `solve --plot` stays readable at 40+ jobs. Each figure written is opened."""

from __future__ import annotations

import io
import json

import matplotlib.image
import numpy as np
import pandas as pd

from gavel_ng.cli import main
from gavel_ng.cli.sweep_cmd import Progress
from gavel_ng.plots import bars_figure, metric_vs_x_figure
from gavel_ng.sweep import ResultsStore
from gavel_ng.sweep.figures import labels
from gavel_ng.sweep.grid import SweepPoint, shown_fields
from gavel_ng.sweep.point import PointResult

SMALL = ["--cluster", "v100=4,k80=4", "--static", "4", "--workers", "1"]


def opened(path) -> np.ndarray:
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0   # a real picture
    return image


def test_plot_draws_along_heterogeneity_and_along_clusters(tmp_path, capsys):
    het, clusters = tmp_path / "het.csv", tmp_path / "clusters.csv"
    assert main(["sweep", "--policy", "las", "--heterogeneity", "0.5,2", *SMALL, "--results", str(het)]) == 0
    assert main(["sweep", "--policy", "las", "--cluster", "v100=4,k80=4;v100=2,k80=6", "--static", "4",
                 "--workers", "1", "--results", str(clusters)]) == 0
    capsys.readouterr()
    assert main(["plot", str(het), "--out", str(tmp_path / "hp")]) == 0
    assert str(tmp_path / "hp" / "jct_vs_heterogeneity.png") in capsys.readouterr().out.splitlines()
    opened(tmp_path / "hp" / "jct_vs_heterogeneity.png")
    assert main(["plot", str(clusters), "--out", str(tmp_path / "cp")]) == 0
    opened(tmp_path / "cp" / "jct_vs_cluster.png")
    assert main(["plot", str(het), "--x", "nonsense"]) == 2


def test_points_with_unfinished_jobs_stay_off_the_clean_line():
    x = np.array([1.0, 2.0, 3.0])
    series = {"las": (x, np.array([5.0, 4.0, 3.0]), None, None), "fifo": (x, np.array([6.0, 7.0, 8.0]), None, None)}
    fig = metric_vs_x_figure(series, "rate", "JCT", unstable={"las": np.array([False, True, True])},
                             notes={"las": ["", "3 of 30 unfinished", "9 of 30 unfinished"]})
    ax = fig.axes[0]
    clean = {line.get_label(): line for line in ax.get_lines() if line.get_marker() == "o"}
    assert list(clean["las"].get_xdata()) == [1.0] and list(clean["fifo"].get_xdata()) == [1.0, 2.0, 3.0]
    floors = [line for line in ax.get_lines() if line.get_marker() == "^" and len(line.get_xdata())]
    assert [list(line.get_xdata()) for line in floors] == [[2.0, 3.0]] and floors[0].get_markerfacecolor() == "white"
    assert {t.get_text() for t in ax.texts} == {"3 of 30 unfinished", "9 of 30 unfinished"}
    assert any("floor" in t.get_text() for t in ax.get_legend().get_texts())


def test_a_real_capped_sweep_marks_its_floors(tmp_path, capsys, monkeypatch):
    results = tmp_path / "r.csv"
    assert main(["sweep", "--policy", "las", "--cluster", "v100=4,k80=4", "--jobs-per-hour", "1,2", "--window",
                 "0:12", "--max-hours", "8", "--workers", "1", "--results", str(results)]) == 0
    out = capsys.readouterr()
    df = ResultsStore(results).load()
    assert (df["jobs_unfinished"] > 0).all() and (df["jobs_in_window"] == 12).all()
    assert "measured jobs unfinished)" in out.err and "left measured jobs unfinished" in out.out
    assert main(["plot", str(results), "--out", str(tmp_path / "p")]) == 0
    opened(tmp_path / "p" / "jct_vs_rate.png")
    opened(tmp_path / "p" / "jct_cdf.png")
    from gavel_ng import plots
    from gavel_ng.sweep.figures import cdf_at

    drawn = {}
    monkeypatch.setattr(plots, "plot_cdf", lambda values, path, *a, totals=None, **k: drawn.update(
        values=values, totals=totals))
    cdf_at(ResultsStore(results), df, tmp_path / "x.png", rate=2.0)
    [(label, values)] = drawn["values"].items()
    row = df[df["jobs_per_hour"] == 2.0].iloc[0]
    assert drawn["totals"][label] == 12 and len(values) == 12 - row["jobs_unfinished"]   # the CDF ends below 1


def test_progress_names_every_value_of_a_point_policy_included():
    points = [SweepPoint(policy=p, static=4, seed=s) for p in ("las", "fifo") for s in (0, 1)]
    keys = shown_fields(points)
    assert keys == ["policy", "static", "seed"]
    stream = io.StringIO()
    bar = Progress(stream, keys)
    bar(PointResult({**points[0].as_row(), "status": "ok", "jobs_unfinished": 2, "jobs_in_window": 4}), 1, 4)
    line = stream.getvalue()
    assert "policy=las static=4 seed=0" in line and "(2 of 4 measured jobs unfinished)" in line


def test_no_nan_in_legends():
    df = pd.DataFrame({"policy": ["las", "las"], "round_seconds": [np.nan, 60.0], "heterogeneity": [1.0, 2.0]})
    got = labels(df, ["policy", "round_seconds", "heterogeneity"]).tolist()
    assert got == ["las, round s=default, het=1", "las, round s=60, het=2"]


def test_value_labels_sit_above_their_error_bars():
    fig = bars_figure({"makespan (hours)": {"las": (40.0, 30.0), "fifo": (44.0, 2.0), "x": (np.nan, np.nan)}})
    ax = fig.axes[0]
    at = {t.get_text(): t.xy[1] for t in ax.texts}
    assert at == {"40": 70.0, "44": 46.0, "n/a": 0}


def test_a_log_axis_has_plain_numbers_even_within_one_decade(tmp_path):
    x = np.array([1.0, 2.0, 3.0])
    fig = metric_vs_x_figure({"las": (x, np.array([3.0, 5.0, 8.0]), None, None)}, "rate", "JCT", logy=True)
    fig.canvas.draw()
    shown = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert "5" in shown and not any("10^" in t or "$" in t for t in shown), shown


def test_solve_plot_is_readable_at_48_jobs(tmp_path, capsys):
    rng = np.random.default_rng(0)
    jobs = [{"id": f"job-{i:02d}", "throughputs": {"v100": float(rng.uniform(2, 10)), "k80": float(rng.uniform(1, 3))}}
            for i in range(48)]
    problem = tmp_path / "p.json"
    problem.write_text(json.dumps({"cluster": {"v100": 8, "k80": 8}, "jobs": jobs}))
    assert main(["solve", "--problem", str(problem), "--plot", str(tmp_path / "a.png")]) == 0
    image = opened(tmp_path / "a.png")
    assert image.shape[1] >= 48 * 0.2 * 120   # about 0.2 inch a job at 120 dpi: labels no longer overlap
    assert main(["solve", "--example", "teams", "--plot", str(tmp_path / "t.png")]) == 0
    assert opened(tmp_path / "t.png").shape[1] == 600   # a few jobs: the figure as it was
