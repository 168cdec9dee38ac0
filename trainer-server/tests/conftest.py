import json
import os
from pathlib import Path

import jsonschema
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
PROTOCOL = REPO / "protocol"
EXAMPLE_CONFIG = REPO / "trainer-server" / "agentrl" / "examples" / "lookup" / "lookup.agentrl.yaml"


@pytest.fixture(scope="session")
def trajectory_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((PROTOCOL / "schemas" / "trajectory.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="session")
def tiny():
    from agentrl.models.tiny import build_tiny_model_and_tokenizer

    return build_tiny_model_and_tokenizer(layers=1, hidden=32, seed=0)
