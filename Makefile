# sriov-dra: the two commands a newcomer needs are `make lab` (main job) and `make test` (all tiers).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
TESTS ?= tests/pure
LAB_ARGS ?=
SCALE_ARGS ?= --pods 200
FUZZ_SECONDS ?= 1800
FUZZ_JOBS ?= 2

.PHONY: setup deps realvf-setup venv binaries image push collections test check lint typecheck pure lab bench \
	fuzz clean-cache help

help:
	@echo "make setup   - what the lab needs: Debian packages, Python venv (.venv), pinned Kubernetes/etcd/Multus/CNI"
	@echo "               binaries and the real-node parts (kubelet, containerd, crictl, pause, the images: make image)"
	@echo "make test    - make setup and make realvf-setup, lint, type checks, then every test tier"
	@echo "               (pure, host, cluster, cni, e2e, ansible, realvf)"
	@echo "make check   - the inner loop: lint, type checks and the pure tier (light hypothesis profile; ~2 min)"
	@echo "make pure    - only the pure tier; one file or test: make pure TESTS=tests/pure/core/test_render.py::<name>"
	@echo "make realvf-setup - QEMU and the guest kernel of the realvf tier (tools/realvf-setup.sh; make test runs it)"
	@echo "make lab     - the main job: the local lab (docs/lab.md); options of 'sriov-dra lab demo' in"
	@echo "               LAB_ARGS, e.g. make lab LAB_ARGS=\"--multus thick\" or LAB_ARGS=--hold"
	@echo "make collections - .venv plus the Ansible collections the roles need (kubernetes.core), no Go build"
	@echo "make image   - the container images the real lab nodes run (tools/build-image.sh; mmdebstrap + buildah)"
	@echo "make push REPOSITORY=registry.example.com/team/sriov-dra [INVENTORY=~/sriov-dra/inventory.yml]"
	@echo "             [MULTUS=<multus image>] [PUSH_ARGS=\"--insecure --authfile F\"] - build the product image and"
	@echo "             push it by digest (tools/push-image.sh; skopeo); the digest goes beside the inventory"
	@echo "make bench   - benchmarks under bench/ (ratios measured in one run); bench/scale.py with"
	@echo "               SCALE_ARGS (default --pods 200, ~5 min); the design's scale target of 1,000 Pods x 8 VFs"
	@echo "               (~20 min on 2 cores): make bench SCALE_ARGS=--pods=1000"
	@echo "make fuzz    - mutation fuzzing of every parser of outside input (bench/fuzz_parsers.py): executions"
	@echo "               per parser and crash classes; FUZZ_SECONDS (default 1800) on FUZZ_JOBS (default 2)"
	@echo "make lint    - ruff, ruff format --check, import-linter layer contracts"
	@echo "make typecheck - mypy (strict on the whole runtime, the shared rules and the lab)"

setup: deps venv binaries image collections
	@echo "[setup] done: venv in $(VENV), binaries under $${SRIOV_DRA_CACHE:-$$HOME/.cache/sriov-dra}"

deps:
	@bash tools/install-debian-deps.sh

venv: $(STAMP)
	@echo "[setup] Python venv ready ($(VENV); reinstalled only when pyproject.toml changes)"

$(STAMP): pyproject.toml lab/pyproject.toml
	@echo "[setup] creating $(VENV) and installing the Python dependencies (a few minutes the first time)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@# setuptools' notice on every editable install (a folder named like the package) is not actionable here
	@PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip install -q -e '.[dev]' -e ./lab
	@touch $(STAMP)

collections: venv
	@$(PY) collection/install_requirements.py

binaries:
	@bash tools/build-binaries.sh

# The images the real lab nodes run (sriov-dra from collection/image/Containerfile, Multus thin and thick),
# built without a registry; rebuilt only when their inputs change (tools/build-image.sh).
image: binaries
	@bash tools/build-image.sh

# The product image only (no Go build), pushed with its digest kept; see tools/push-image.sh and docs/install.md.
push:
	@bash tools/push-image.sh "$(REPOSITORY)" $(if $(INVENTORY),--inventory "$(INVENTORY)") \
		$(if $(MULTUS),--multus "$(MULTUS)") $(PUSH_ARGS)

realvf-setup:
	@bash tools/realvf-setup.sh

lint: venv
	$(VENV)/bin/ruff check runtime plugins/module_utils/sriov_dra_rules lab tests bench tools
	$(VENV)/bin/ruff format --check runtime plugins/module_utils/sriov_dra_rules lab tests bench tools
	$(VENV)/bin/lint-imports

typecheck: venv
	$(VENV)/bin/mypy

# The pure tier needs only .venv. TESTS narrows it to a file or one test, PYTEST_ARGS adds options
# (-k, -x); HYPOTHESIS_PROFILE=ci runs CI's 500 examples per property instead of the light default.
pure: venv
	$(VENV)/bin/pytest -m pure $(TESTS) $(PYTEST_ARGS)

check: lint typecheck pure

test: setup realvf-setup lint typecheck
	$(VENV)/bin/pytest $(PYTEST_ARGS)

lab: setup
	$(VENV)/bin/sriov-dra lab demo $(LAB_ARGS)

bench: venv
	@for b in bench/*.py; do echo "== $$b"; args=""; [ "$$b" = bench/scale.py ] && args="$(SCALE_ARGS)"; \
		$(PY) $$b $$args || exit 1; done

fuzz: venv
	nice $(PY) bench/fuzz_parsers.py --seconds $(FUZZ_SECONDS) --jobs $(FUZZ_JOBS)

clean-cache:
	rm -rf $${SRIOV_DRA_CACHE:-$$HOME/.cache/sriov-dra}
