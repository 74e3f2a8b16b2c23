import math

import numpy as np
import pytest

from gavel_ng.errors import InputError
from gavel_ng.traces import Trace, TraceGenerator, TraceSpec, generate, read_trace, write_trace


def test_round_trip(tmp_path, reference_table):
    t = generate(TraceSpec(jobs_per_hour=2.0, multi_gpu=True, priorities=True, slos=True, seed=3),
                 reference_table, 50)
    p = tmp_path / "t.trace"
    write_trace(t, p)
    lines = p.read_text().splitlines()
    assert len(lines) == 50 and all(len(line.split("\t")) == 10 for line in lines)
    back = read_trace(p)
    assert back.job_types == t.job_types
    np.testing.assert_array_equal(back.scale_factors, t.scale_factors)
    np.testing.assert_array_equal(back.weights, t.weights)
    np.testing.assert_array_equal(back.steps, t.steps)
    np.testing.assert_allclose(back.slo_s, t.slo_s)
    np.testing.assert_allclose(back.arrivals, t.arrivals)


def test_same_seed_same_trace_and_prefix_stable(reference_table):
    spec = TraceSpec(jobs_per_hour=3.0, seed=7)
    a = generate(spec, reference_table, 100)
    g = TraceGenerator(spec, reference_table)
    b = g.ensure(3000)
    assert a.job_types == b.job_types[:100]
    np.testing.assert_array_equal(a.arrivals, b.arrivals[:100])
    c = generate(TraceSpec(jobs_per_hour=3.0, seed=8), reference_table, 100)
    assert not np.array_equal(a.arrivals, c.arrivals)


def test_distributions(reference_table):
    t = generate(TraceSpec(jobs_per_hour=3.0, multi_gpu=True, priorities=True, slos=True, seed=1),
                 reference_table, 4000)
    assert t.arrivals[0] == 0.0 and np.all(np.diff(t.arrivals) >= 0)
    rate = (len(t) - 1) / (t.arrivals[-1] / 3600)
    assert 2.8 < rate < 3.2
    # Gavel's order: the GPU count first (70/10/15/5 %), then a type with a profile at that count
    shares = [np.mean(t.scale_factors == s) for s in (1, 2, 4, 8)]
    assert abs(shares[0] - 0.70) < 0.03 and abs(shares[1] - 0.10) < 0.02 and abs(shares[2] - 0.15) < 0.02
    assert abs(shares[3] - 0.05) < 0.015
    assert all((k, int(s)) in reference_table.job_keys for k, s in zip(t.job_types, t.scale_factors))
    multi_types = {k for k, s in zip(t.job_types, t.scale_factors) if s > 1}
    assert multi_types and {k.split(" (")[0] for k in multi_types} <= {"ResNet-18", "ResNet-50", "Transformer", "LM"}
    assert 0.17 < np.mean(t.weights == 5.0) < 0.23
    v100 = np.array([reference_table.get((k, int(s)), "v100") for k, s in zip(t.job_types, t.scale_factors)])
    minutes = t.steps / v100 / 60
    assert minutes.min() >= 10 ** 1.5 * 0.99 and minutes.max() <= 10 ** 4 * 1.01
    long = np.mean(minutes > 1000)
    assert 0.17 < long < 0.23
    ratio = t.slo_s / (minutes * 60)
    assert set(np.round(np.unique(np.round(ratio, 2)), 1)) <= {1.2, 2.0, 10.0}
    assert len(set(t.job_types)) == 26


def test_static_trace_all_at_zero(reference_table):
    t = generate(TraceSpec(seed=0), reference_table, 20)
    assert np.all(t.arrivals == 0) and len(t) == 20 and np.all(np.isinf(t.slo_s))


@pytest.mark.parametrize("line, where", [
    ("A\tcmd\t.\t--n\t0\t100\t1\t1\t-1", "line 2"),
    ("A\tcmd\t.\t--n\t0\tmany\t1\t1\t-1\t0", "line 2 total_steps"),
    ("A\tcmd\t.\t--n\t0\t100\t1.5\t1\t-1\t0", "line 2 scale_factor"),
    ("A\tcmd\t.\t--n\t0\t100\t1\t1\t-1\t-5", "line 2 arrival_time"),
])
def test_bad_lines_name_the_line(tmp_path, line, where):
    p = tmp_path / "bad.trace"
    p.write_text("A\tcmd\t.\t--n\t0\t100\t1\t1\t-1\t0\n" + line + "\n")
    with pytest.raises(InputError) as e:
        read_trace(p)
    assert where in str(e.value)


def test_unknown_job_type_is_named(reference_table):
    t = Trace(["ResNet-18 (batch size 16)", "NoSuchNet"], np.array([1, 1]), np.ones(2), np.ones(2),
              np.full(2, math.inf), np.zeros(2))
    with pytest.raises(InputError, match="job 1.*NoSuchNet"):
        t.check_against(reference_table)
