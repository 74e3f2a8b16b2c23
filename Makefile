# Two commands on a fresh machine: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-slurm bench profiles lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev,worker,sweep]"
	touch $(STAMP)

# A simulation on the built-in throughput profiles: heterogeneity-aware vs agnostic LAS on one
# trace. It ends with the comparison line; out/demo/jct.png has both policies' JCT CDFs.
DEMO_ARGS := --cluster v100=8,a100=8,h100=8 --jobs-per-hour 2 --window 0:200 --seed 0

demo: $(STAMP)
	$(BIN)/gavel-ng solve --example teams --policy hierarchical --plot out/demo/allocation.png
	@echo "plot: out/demo/allocation.png"
	$(BIN)/gavel-ng simulate --policy las,las_agnostic $(DEMO_ARGS) --out out/demo

# two test processes (pytest-xdist): most slow tests wait on real processes' rounds, so the
# 2-core CI runs two at once; tests marked xdist_group(...) run one at a time.
test: $(STAMP)
	$(BIN)/pytest -n 2 --dist loadgroup --durations=10

# the edit-test loop: everything but the loopback clusters and long runs (make test runs all)
test-fast: $(STAMP)
	$(BIN)/pytest -n 2 -m "not slow"

# deploy/slurm/ end to end on a private one-node Slurm of this machine (not part of `make test`):
# installs slurm-wlm with apt-get if missing (root or sudo -n), runs the sbatch scripts and a tiny
# job, tears everything down and ends with PASS or FAIL.
test-slurm: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" bash tests/slurm/run_e2e.sh

bench: $(STAMP)
	$(BIN)/python -m solver_bench.bench_policies

profiles: $(STAMP)
	$(BIN)/python scripts/measure_workloads.py
	$(BIN)/python scripts/calibrate_profiles.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) out solver_bench/results .pytest_cache
