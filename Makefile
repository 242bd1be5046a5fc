# Two commands do all the set-up:   make lab   (install the learner set, open start-here)
#                                   make test  (add the test tools, run every test)
# While changing code:              make check (the linter, then the unit tests: no notebooks, no browser)
# A class on one server (as root):  make hub LEARNERS=ada,ben,cy ... make hub-stop   (instructor/hub.md)
# Options:  make lab TORCH=cpu       CPU-only torch from PyTorch's CPU wheel index (Linux; small)
#           make lab WHEELS=DIR      install with no network from a folder made by `make wheelhouse`
# A value given to make is text, never code: one holding a `$` would run as code where make expands it
# (make hub IP='$(shell id)'), and the room's targets run as root. Refused before anything is expanded;
# hub/settings.py then checks each of them whole (the room's section, at the end).
ROOM_VARIABLES := LEARNERS IP PORT N LIMITS HUB_VENV HUB_PYTHON HUB_STATE HUB_TEST_COPY WHEELS TORCH
$(foreach v,$(ROOM_VARIABLES),$(if $(findstring $$,$(value $(v))),$(error $(v) must not contain a '$$': make would \
  run it as code. Nothing was run)))
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

.PHONY: lab test check quick lint install install-test doctor present stop benchmark planner-peak execute reliability binder-check \
	install-size classroom plans wheelhouse offline-install reproducibility compat

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

$(VENV)/.installed-test: requirements-test.txt site/package-lock.json $(VENV)/.installed
	@$(PYTHON) tools/install_notice.py test
	$(PIP) -r requirements-test.txt
	@# KaTeX for the book site's math test, from site/package-lock.json; without npm that test is skipped
	if command -v npm >/dev/null 2>&1; then npm ci --no-audit --no-fund --prefix site; \
	else echo "npm not found: tests/site/test_math.py will be skipped (apt-get install nodejs npm)"; fi
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
# make present PRESET=forgot-to-divide   (other settings go in the page's address: the URL it prints)
# A name pasted from the chat never meets a shell: make exports it (its text as typed, $(value ...)
# expands nothing), present/serve.py checks it before Voila starts, then prints the URL with its token.
# PRESET itself stays out of the environment: exporting it would expand a $(shell ...).
unexport PRESET
present: export LAB_PRESET := $(value PRESET)
present: install
	$(BIN)/python present/serve.py

LINTED := widgets tests tools benchmarks instructor present hub site conftest.py
RUFF := $(BIN)/ruff check $(LINTED)
# What each part of widgets/ may import: pyproject.toml's import-linter contracts.
IMPORTS := $(BIN)/lint-imports --no-logo --no-cache

# The linters (ruff and import-linter, pinned in requirements-test.txt; their rules are in pyproject.toml).
lint: install-test
	$(RUFF)
	$(IMPORTS)

# Tests run in three processes (pytest-xdist), on two cores too: the browser tests, the gloo runs and the time
# limits wait more than they compute. A file's tests stay in one process, so that a notebook's cells share a kernel. The second pass re-runs every notebook, and the unit tests that state a claim about
# rounding (marked `rounding`), with torch's own kernels held to plain code (ATEN_CPU_CAPABILITY) and Intel
# MKL's matrix products to SSE4.2 (MKL picks its own path by CPU and reads only its own variable): the
# committed outputs must reproduce on any CPU, not only on one like this (make reproducibility runs more
# legs). Both libraries read these variables when they load, hence a separate pytest process.
CPU_LEG := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2
XDIST := -n 3 --dist loadfile
test: install-test
	$(RUFF)
	$(IMPORTS)
	$(BIN)/python -m pytest $(XDIST)
	$(CPU_LEG) $(BIN)/python -m pytest notebooks tests -m "notebook or rounding" $(XDIST) -q -p no:cacheprovider

# The quick loop: the linters, then the unit tests. Not the notebooks (nbval), not the browser, not
# the tests marked slow (they start processes or run a notebook; tests/conftest.py): `make test` has them.
check: install-test
	$(RUFF)
	$(IMPORTS)
	$(BIN)/python -m pytest tests -m "not browser and not slow" $(XDIST)

# The loop while changing one lesson (CONTRIBUTING.md): the linters, then that lesson's unit tests, those
# of the shared parts it imports and the rules over the whole tree (tools/quick.py), as make check runs them:
# `make quick LESSON=researcher_7`; without LESSON, every shared part's.
# LESSON reaches it as its text, never through a shell ($(value ...) expands nothing).
quick: export QUICK_LESSON := $(value LESSON)
quick: install-test
	$(RUFF)
	$(IMPORTS)
	$(BIN)/python tools/quick.py

# The book site, built offline from the committed notebooks (never re-executed) into build/site/html: Sphinx with
# MyST-NB and sphinx-book-theme (site/build.py says what it changes for a page without a kernel). Binder and Colab
# launch buttons; make site HUB=https://hub.example.org adds a JupyterHub one (nbgitpuller). HUB reaches
# site/build.py as its text ($(value ...) expands nothing), which checks it is an address.
.PHONY: site
unexport HUB
site: export LAB_SITE_HUB := $(value HUB)
site: install-test
	$(BIN)/python site/build.py

# Re-execute every notebook in place (after changing one) and write the plans again (they cite cell
# numbers); then re-run the benchmark.
execute: install-test
	$(BIN)/python benchmarks/execute_notebooks.py
	$(BIN)/python instructor/make_plans.py

# The plans and start-here's map quote the measured times: both are written again after a run.
# readability.py reads the executed notebooks (prose, numbers, walls of output; nothing runs).
benchmark: install-test
	$(BIN)/python benchmarks/benchmark.py
	$(BIN)/python benchmarks/planner_peak.py
	$(BIN)/python benchmarks/readability.py
	$(BIN)/python instructor/make_plans.py
	$(BIN)/python benchmarks/execute_notebooks.py notebooks/00_start_here.ipynb

# The planner's predicted peak against the CPU allocator's, on a GPT-2-shaped transformer (about 3 minutes;
# researcher_4 reads benchmarks/results/planner_peak.json, so re-execute it after a run).
planner-peak: install-test
	$(BIN)/python benchmarks/planner_peak.py

# Slow checks kept out of `make test`; results go to benchmarks/results/.
reliability: install-test
	$(BIN)/python benchmarks/reliability.py

binder-check: install-test
	$(BIN)/python benchmarks/check_binder_env.py

# nbval over every notebook on legs that move both dispatchers (ATen's ATEN_CPU_CAPABILITY, MKL's
# MKL_ENABLE_INSTRUCTIONS, and MKL_CBWR, which alone moves MKL on AMD CPUs), those this CPU has, each
# with 1 and 2 threads: benchmarks/results/reproducibility.json. About 3 minutes a leg.
reproducibility: install-test
	$(BIN)/python benchmarks/reproducibility.py

# Every notebook where learners already are: a Colab-like environment (requirements-colab.txt: ipywidgets
# 7.7.1, torch 2.11.0) and the newest (torch 2.14.1), each a fresh venv in /tmp with the lab installed the
# way the notebooks' install cell installs it; nbval with benchmarks/compat_sanitize.cfg. Writes
# benchmarks/results/compat.json. Not in CI: it downloads several GB (torch's CUDA wheels);
# COMPAT_WHEELS=DIR lets pip take torch and its nvidia-* wheels from a folder first. Then the widgets in
# Chromium under ipywidgets 7.7.1 (classic Notebook 6.5 from the Colab-like venv; screenshots in
# test-artifacts/). The venvs stay in /tmp/gradient-accumulation-lab-compat (about 11 GB) for that test and
# for a rerun (python benchmarks/compat.py --reuse --keep); remove the folder when done.
COMPAT_WHEELS ?=
compat: install-test
	$(PYTHON) benchmarks/compat.py --keep $(if $(COMPAT_WHEELS),--find-links $(COMPAT_WHEELS),)
	COMPAT_BROWSER=1 $(BIN)/python -m pytest tests/test_browser_ipywidgets7.py -q -p no:cacheprovider

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

# --- The room on JupyterHub (instructor/hub.md), as root: each learner is a system user ----------
# make hub LEARNERS=ada,ben,cy [IP=192.168.1.10] [PORT=8000] [LIMITS=memory=3G,processes=512,kernels=4]
#                      (prints the room password once; LIMITS: what each learner may hold, see hub.md)
# make hub-stop        stops everything it started      make hub-test   isolation and security tests
# make hub-room N=40   a room at a learner's pace: benchmarks/results/hub_room_<N>.json, then hub.md's sizing
# make hub-export      the instructor's record: learners x exercises and a Canvas gradebook, as CSV files
# The hub's environment is the learner set plus requirements-hub.txt, built at HUB_VENV from HUB_PYTHON:
# a path every learner can read (a venv whose Python sits under a mode-700 home, as pyenv's under
# /root does, is unreachable to them). Its proxy, configurable-http-proxy, comes from hub/package-lock.json.
HUB_VENV ?= /opt/gradient-accumulation-lab/venv
HUB_PYTHON ?= /usr/bin/python3
HUB_STATE ?= /var/lib/gradient-accumulation-lab-hub
IP ?= 127.0.0.1
PORT ?= 8000
N ?= 10
LEARNERS ?=
LIMITS ?=
HUB_TEST_COPY ?= /tmp/gradient-accumulation-lab-hub-test
APT_GET := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq

# These recipes run as root, so no value given to make is ever pasted into one of their lines: each
# reaches them as $LAB_MAKE_<NAME> in the environment, exactly as typed ($(value ...) expands nothing),
# and hub-settings (hub/settings.py) checks them all before anything else runs: make hub LEARNERS='a;id'
# stops there, naming LEARNERS. Unexported under their own names: exporting expands them.
unexport $(ROOM_VARIABLES)
$(foreach v,$(ROOM_VARIABLES),$(eval export LAB_MAKE_$(v) := $$(value $(v))))
HUB_PY := "$$LAB_MAKE_HUB_VENV/bin/python"
# HUB_VENV also names two targets below, read by make itself before any recipe: a space, ; : = % or #
# in it would change the rules (make would stop with a puzzling message), so it is refused here by name.
HASH := \#
$(if $(or $(word 2,$(value HUB_VENV)),$(strip $(foreach c,; : = % $(HASH),$(findstring $(c),$(value HUB_VENV))))),$(error \
  HUB_VENV must be a path of letters, digits and / . _ + - only. Nothing was run))

.PHONY: hub hub-stop hub-test hub-room hub-export hub-system hub-settings

hub-settings:
	@python3 hub/settings.py

# Node.js and npm (the proxy) and python3-venv, from Debian, when missing and we are root.
hub-system: | hub-settings
	@if ! command -v npm >/dev/null 2>&1 || ! "$$LAB_MAKE_HUB_PYTHON" -c "import ensurepip" 2>/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && $(APT_GET) nodejs npm python3-venv; \
	  else echo "The room needs Node.js, npm and python3-venv: sudo apt-get install nodejs npm python3-venv"; exit 1; fi; fi
	test -x hub/node_modules/.bin/configurable-http-proxy || npm ci --no-audit --no-fund --prefix hub

# (install and install-test, above, paste VENV, PYTHON, TORCH and WHEELS into their lines: checked first)
$(HUB_VENV)/.installed-hub: requirements-hub.txt requirements.txt pyproject.toml | hub-settings
	$(MAKE) install VENV="$$LAB_MAKE_HUB_VENV" PYTHON="$$LAB_MAKE_HUB_PYTHON"
	$(HUB_PY) -m pip install --progress-bar on $${LAB_MAKE_WHEELS:+--no-index --find-links "$$LAB_MAKE_WHEELS"} \
	  -r requirements-hub.txt
	touch "$$LAB_MAKE_HUB_VENV/.installed-hub"

$(HUB_VENV)/.installed-hub-test: requirements-test.txt $(HUB_VENV)/.installed-hub | hub-settings
	$(MAKE) install-test VENV="$$LAB_MAKE_HUB_VENV" PYTHON="$$LAB_MAKE_HUB_PYTHON"
	touch "$$LAB_MAKE_HUB_VENV/.installed-hub-test"

# The hub's environment has the lab installed editable, from whichever checkout installed it: another
# clone's make hub or hub-test (a fresh clone, CI's) leaves it importing that clone's widgets, and the
# room would serve its code beside this checkout's notebooks. -I: not the working folder's widgets/.
.PHONY: hub-lab
hub-lab: $(HUB_VENV)/.installed-hub | hub-settings
	@$(HUB_PY) -I -c "import os, sys, widgets; \
	  sys.exit(os.path.dirname(os.path.dirname(os.path.realpath(widgets.__file__))) != os.path.realpath('.'))" 2>/dev/null || { \
	  echo "--- the hub's environment imported the lab from another checkout: installing this one"; \
	  $(HUB_PY) -m pip install -q --no-deps --no-build-isolation -e .; }

hub: hub-settings hub-system hub-lab
	LAB_HUB_STATE="$$LAB_MAKE_HUB_STATE" $(HUB_PY) tools/hub.py start --ip "$$LAB_MAKE_IP" --port "$$LAB_MAKE_PORT" \
	  --learners "$$LAB_MAKE_LEARNERS" --limits "$$LAB_MAKE_LIMITS"

hub-stop: hub-settings
	@if [ -x "$$LAB_MAKE_HUB_VENV/bin/python" ]; then LAB_HUB_STATE="$$LAB_MAKE_HUB_STATE" $(HUB_PY) tools/hub.py stop; \
	else echo "No room hub was ever installed here ($$LAB_MAKE_HUB_VENV)."; fi

# A few minutes: one hub, two throw-away learners; leaves no process, user or file behind (tested).
# The learners must read the checkout: one under a mode-700 home (a CI clone in /root) is tested from
# a readable copy in HUB_TEST_COPY instead (the same files, without .git and the environments; marked
# as make's own by the file hub/settings.py's TEST_COPY_MARK names, so that no other folder is replaced;
# made by a plain mkdir, which fails rather than write into a folder someone put there meanwhile).
hub-test: hub-settings
	@if runuser -u nobody -- test -r "$(CURDIR)/notebooks/00_start_here.ipynb" 2>/dev/null; then \
	  $(MAKE) hub-test-here; \
	else \
	  echo "--- other users cannot read $(CURDIR): the room is tested from a copy at $$LAB_MAKE_HUB_TEST_COPY"; \
	  rm -rf "$$LAB_MAKE_HUB_TEST_COPY" && mkdir -m 755 "$$LAB_MAKE_HUB_TEST_COPY" && \
	  tar -c --exclude=./.git --exclude=./.venv --exclude=./hub/node_modules . | tar -x -C "$$LAB_MAKE_HUB_TEST_COPY" && \
	  touch "$$LAB_MAKE_HUB_TEST_COPY/.gradient-accumulation-lab-hub-test" && chmod -R a+rX "$$LAB_MAKE_HUB_TEST_COPY" && \
	  $(MAKE) -C "$$LAB_MAKE_HUB_TEST_COPY" hub-test-here; \
	fi

.PHONY: hub-test-here
hub-test-here: hub-settings hub-system $(HUB_VENV)/.installed-hub-test hub-lab
	LAB_HUB_TESTS=1 $(HUB_PY) -m pytest tests/hub -p no:cacheprovider -q -o addopts=""

hub-export: hub-settings hub-lab
	LAB_HUB_STATE="$$LAB_MAKE_HUB_STATE" $(HUB_PY) hub/export.py

hub-room: hub-settings hub-system hub-lab
	$(HUB_PY) benchmarks/hub_room.py --learners "$$LAB_MAKE_N"
	$(HUB_PY) hub/sizing.py
