# Two commands do all the set-up:   make lab   (install the learner set, open start-here)
#                                   make test  (add the test tools, run every test)
# While changing code:              make check (the linter, then the unit tests: no notebooks, no browser)
# Options:  make lab TORCH=cpu       CPU-only torch from PyTorch's CPU wheel index (Linux; small)
#           make lab WHEELS=DIR      install with no network from a folder made by `make wheelhouse`
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?=
WHEELS ?=
TORCH_VERSION := $(shell sed -n 's/^torch==//p' requirements.txt)
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
PIP := $(BIN)/python -m pip install --progress-bar on $(if $(WHEELS),--no-index --find-links $(WHEELS),)
# JupyterLab refuses to start as root (containers, some cloud machines) unless told they may.
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test check lint install install-test doctor present stop benchmark execute reliability binder-check \
	install-size classroom plans wheelhouse offline-install reproducibility

$(VENV)/.installed: requirements.txt pyproject.toml
	@$(PYTHON) tools/install_notice.py learner $(if $(TORCH),--torch $(TORCH),)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
ifeq ($(TORCH),cpu)
	@echo "--- torch $(TORCH_VERSION)+cpu from $(TORCH_CPU_INDEX) (a CPU-only build, Linux)"
	$(PIP) --extra-index-url $(TORCH_CPU_INDEX) "torch==$(TORCH_VERSION)+cpu" || { \
	  echo "Could not install torch $(TORCH_VERSION)+cpu from $(TORCH_CPU_INDEX) (unreachable from here?)."; \
	  echo "Run plain 'make lab' instead: it takes torch from PyPI."; exit 1; }
endif
	@echo "--- the learner set: requirements.txt"
	$(PIP) -r requirements.txt
	touch $@

$(VENV)/.installed-test: requirements-test.txt $(VENV)/.installed
	@$(PYTHON) tools/install_notice.py test
	$(PIP) -r requirements-test.txt
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# Opens start-here and prints its URL; if this checkout's lab is already running, prints its URL.
lab: install
	$(BIN)/python tools/lab.py $(LAB_FLAGS)

stop:
	$(BIN)/python tools/lab.py --stop

# Checks this environment the way a notebook's `widgets.doctor()` checks its kernel.
doctor: install
	$(BIN)/python -m widgets.lab.doctor

# The projector view: the explorer and the bricks as a page with no code, large type (Voila).
# make present PRESET=forgot-to-divide   or   make present STATE=<code from explorer.share_code()>
# A code pasted from the chat never meets a shell: make exports it (its text as typed, $(value ...)
# expands nothing), present/serve.py checks it before Voila starts, then prints the URL with its token.
# STATE and PRESET themselves stay out of the environment: exporting them would expand a $(shell ...).
unexport STATE PRESET
present: export LAB_PRESET := $(value PRESET)
present: export LAB_STATE := $(value STATE)
present: install
	$(BIN)/python present/serve.py

LINTED := widgets tests tools benchmarks instructor present conftest.py
RUFF := $(BIN)/ruff check $(LINTED)

# The linter (ruff, pinned in requirements-test.txt; its rules are in pyproject.toml).
lint: install-test
	$(RUFF)

# The second pass re-runs every notebook with torch held to its plain (no AVX) CPU kernels: the
# committed outputs must reproduce on any CPU, not only on one like this (make reproducibility).
test: install-test
	$(RUFF)
	$(BIN)/python -m pytest
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest notebooks -q -p no:cacheprovider

# The quick loop: the linter, then the unit tests. Not the notebooks (nbval), not the browser, not
# the tests marked slow (they start processes or run a notebook; tests/conftest.py): `make test` has them.
check: install-test
	$(RUFF)
	$(BIN)/python -m pytest tests -m "not browser and not slow"

# Re-execute every notebook in place (after changing one) and write the plans again (they cite cell
# numbers); then re-run the benchmark.
execute: install-test
	$(BIN)/python benchmarks/execute_notebooks.py
	$(BIN)/python instructor/make_plans.py

# The plans and start-here's map quote the measured times: both are written again after a run.
benchmark: install-test
	$(BIN)/python benchmarks/benchmark.py
	$(BIN)/python instructor/make_plans.py
	$(BIN)/python benchmarks/execute_notebooks.py notebooks/00_start_here.ipynb

# Slow checks kept out of `make test`; results go to benchmarks/results/.
reliability: install-test
	$(BIN)/python benchmarks/reliability.py

binder-check: install-test
	$(BIN)/python benchmarks/check_binder_env.py

# nbval over every notebook under ATEN_CPU_CAPABILITY=default, avx2 and avx512 (those this CPU has),
# each with 1 and 2 threads: benchmarks/results/reproducibility.json. Minutes per leg.
reproducibility: install-test
	$(BIN)/python benchmarks/reproducibility.py

# Fresh virtual environments in /tmp: size and time of the learner and the test installs.
install-size: install-test
	$(BIN)/python benchmarks/install_size.py

# Peak kernel memory of start-here and the explorer notebook, and 5 and 10 kernels at once.
classroom: install-test
	$(BIN)/python benchmarks/classroom.py

# instructor/plans.md and instructor/room_setup.md, computed from benchmarks/results*.
plans: install
	$(BIN)/python instructor/make_plans.py

# Every wheel the learner set needs, for a room with no network: then `make lab WHEELS=wheelhouse`.
wheelhouse: install
	grep -v '^-e ' requirements.txt | $(BIN)/python -m pip download --progress-bar on -d wheelhouse -r /dev/stdin \
	  "setuptools>=77" wheel  # the lab's own package is built from the checkout, with these

# The offline plan, run end to end in /tmp: a wheel folder, then an install with no index.
offline-install: install-test
	$(BIN)/python benchmarks/offline_install.py
