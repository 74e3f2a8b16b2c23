# Two commands on a fresh machine: `make demo` (the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench profiles lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev,worker]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gavel-ng solve --example paper_example --policy las
	$(BIN)/gavel-ng solve --example paper_example --policy max_min_fairness
	$(BIN)/gavel-ng solve --example teams --policy hierarchical --plot out/demo/allocation.png
	@echo "plot written to out/demo/allocation.png"

test: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python -m solver_bench.bench_policies

profiles: $(STAMP)
	$(BIN)/python scripts/measure_workloads.py
	$(BIN)/python scripts/calibrate_profiles.py

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) out solver_bench/results .pytest_cache
