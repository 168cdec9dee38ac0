#!/usr/bin/env bash
# Creates .venv-trl at the repo root: TRL in its own virtual environment, so the project's dependencies
# (trainer-server/pyproject.toml, .venv) stay its own. Idempotent: a finished install is left as it is.
#
# torch is installed FIRST and pinned to the project's version, 2.13.0 (its CPU build lies on local disk);
# TRL and its dependencies are then installed against it with a constraint that keeps that torch, since
# any other torch version would mean downloading gigabytes. TRL_VERSION is the release the comparison
# in README was made with.
set -euo pipefail

TORCH_VERSION=2.13.0
TRL_VERSION=1.13.0
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="$ROOT/.venv-trl"
STAMP="$VENV/.installed-trl-$TRL_VERSION-torch-$TORCH_VERSION"

if [[ -f "$STAMP" ]]; then
  echo "setup: $VENV already has trl $TRL_VERSION and torch $TORCH_VERSION"
  exit 0
fi
test -x "$VENV/bin/python" || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "torch==$TORCH_VERSION"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "torch==$TORCH_VERSION" >"$constraints"
# The same transformers as the project's venv, when there is one: both sides then run the same model code
# and tokenizer, so the prompts' token ids and the evaluation mean the same thing on both.
if [[ -x "$ROOT/.venv/bin/python" ]]; then
  "$ROOT/.venv/bin/python" -c "import transformers; print('transformers==' + transformers.__version__)" >>"$constraints"
fi
# trl brings transformers, accelerate and datasets; its GRPOTrainer module also imports requests (for
# its vLLM client) without declaring it, so requests is named here. jsonschema, pydantic and pyyaml are for the task's own
# code: train_trl.py imports the recipe's ToolEnv, its calculator Tool, the tool-call parser and the chat
# rendering from trainer-server's source (not installed here), so TRL's episodes are parsed, executed,
# rendered and scored by the very same code as agentrl's.
"$VENV/bin/python" -m pip install --quiet -c "$constraints" "trl==$TRL_VERSION" requests jsonschema pydantic pyyaml
"$VENV/bin/python" -c "import jsonschema, pydantic, yaml, torch, trl, transformers; print('setup: torch', torch.__version__, '| trl', trl.__version__, '| transformers', transformers.__version__)"
touch "$STAMP"
