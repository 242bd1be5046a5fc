# Two commands do all the set-up:   make lab   (install, open JupyterLab)   make test   (all tests)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# JupyterLab refuses to start as root (containers, some cloud machines) unless told it may.
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test install benchmark execute reliability binder-check

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

install: $(VENV)/.installed

lab: install
	$(BIN)/jupyter lab $(LAB_FLAGS) notebooks/00_start_here.ipynb

test: install
	$(BIN)/python -m pytest

# Re-execute every notebook in place (after changing one), then re-run the benchmark.
execute: install
	$(BIN)/python benchmarks/execute_notebooks.py

benchmark: install
	$(BIN)/python benchmarks/benchmark.py

# Slow checks kept out of `make test`; results go to benchmarks/results/.
reliability: install
	$(BIN)/python benchmarks/reliability.py

binder-check: install
	$(BIN)/python benchmarks/check_binder_env.py
