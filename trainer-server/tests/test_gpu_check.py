"""`agentrl doctor --gpu`: the whole check at tiny scale on this machine's CPU, as a user runs it (a subprocess of
`python -m agentrl.cli.main`), its report valid against protocol/schemas/gpu-check.schema.json and every row there;
and the table of known GPUs on the names torch gives them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import torch
from agentrl.cli.gpu_check.context import Row
from agentrl.cli.gpu_check.kernel_checks import decode_bound
from agentrl.cli.gpu_check.peaks import device_peak
from agentrl.cli.gpu_check.shapes import QWEN25_0_5B, QWEN25_3B, parameter_count, qwen2_config
from agentrl.contract.schemas import CHECK_STATUSES
from agentrl.models.tiny import build_tiny_tokenizer
from conftest import PROTOCOL

TRAINER_SERVER = Path(__file__).resolve().parents[1]
REPORT = jsonschema.Draft202012Validator(json.loads((PROTOCOL / "schemas" / "gpu-check.schema.json").read_text()))
TINY = "tiny Qwen2 (2 layers)"


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check") / "report.json"
    # From trainer-server/, so the checkout's agentrl is the one run, as pytest imports it.
    done = subprocess.run(
        [sys.executable, "-m", "agentrl.cli.main", "doctor", "--gpu", "--scale", "tiny", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=TRAINER_SERVER,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return json.loads(out.read_text()), done.stdout


def test_the_tiny_scale_runs_every_check_and_its_report_is_valid(tiny_report):
    report, table = tiny_report
    REPORT.validate(report)
    assert report["scale"] == "tiny" and report["device"] == "cpu" and report["peak"] is None
    assert "character tokenizer" in report["tokenizer"]
    rows = {row["id"]: row for row in report["rows"]}
    expected = [
        "devices",
        "matmul_bf16",
        f"decode_hf/{TINY}/batch1",
        f"decode_hf/{TINY}/batch4",
        f"learner/{TINY}/tokens_per_s",
        f"learner/{TINY}/peak_memory",
        *(
            f"grpo/{mode}/{part}"
            for mode in ("full", "lora")
            for part in ("steps", "logprob_gap", "loss_mask", "checkpoint")
        ),
        f"decode_vllm/{TINY}",
    ]
    assert list(rows) == expected
    for row_id in expected[:-1]:
        assert rows[row_id]["status"] == "ok", rows[row_id]
    for row_id in expected[1:6]:  # measured figures, without a bound on a CPU
        assert rows[row_id]["figure"] > 0 and rows[row_id]["bound"] is None
        assert rows[row_id]["bound_note"].startswith("n/a")
    for mode in ("full", "lora"):
        gap = rows[f"grpo/{mode}/logprob_gap"]
        assert 0 <= gap["figure"] <= gap["bound"] == 0.05
        assert rows[f"grpo/{mode}/loss_mask"]["figure"] > 0  # tool-result tokens were there, and out of the loss
        assert rows[f"grpo/{mode}/checkpoint"]["figure"] > 0
    # LoRA's checkpoint holds the adapter alone: fewer tensors than the full model's.
    assert rows["grpo/lora/checkpoint"]["figure"] < rows["grpo/full/checkpoint"]["figure"]
    vllm = rows[f"decode_vllm/{TINY}"]
    if importlib.util.find_spec("vllm") is None:
        assert vllm["status"] == "warning" and "not installed" in vllm["detail"]
    else:
        assert vllm["status"] == "ok" and vllm["figure"] > 0
    assert "No problems." in table and "GRPO, LoRA: checkpoint round trip" in table


@pytest.mark.parametrize(
    ("name", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", None),
        ("NVIDIA GeForce RTX 3060", None),
    ],
)
def test_the_device_table_reads_the_names_torch_gives(name, peak):
    found = device_peak(name)
    assert (found.name if found else None) == peak


def test_a_figure_under_its_floor_is_a_warning_and_one_without_a_bound_stands_alone():
    assert Row("x", "x", "ok", figure=100.0, bound=1000.0).judge(0.5).status == "warning"
    judged = Row("x", "x", "ok", figure=600.0, bound=1000.0).judge(0.5)
    assert judged.status == "ok" and judged.ratio == 0.6
    assert Row("x", "x", "ok", figure=600.0).judge(0.5).ratio is None


def test_a_row_says_its_status_in_the_words_doctor_s_checks_use():
    row_status = REPORT.schema["$defs"]["row"]["properties"]["status"]["enum"]
    assert tuple(row_status) == CHECK_STATUSES == ("ok", "warning", "problem")


@pytest.mark.parametrize(("shape", "parameters"), [(QWEN25_0_5B, 494_032_768), (QWEN25_3B, 3_085_938_688)])
def test_the_shapes_give_the_published_parameter_counts(shape, parameters):
    """Qwen2.5-0.5B's 0.49B and -3B's 3.09B (their model cards), built on the meta device: no memory, no time."""
    assert parameter_count(meta_model(shape)) == parameters


def test_the_decode_bound_is_the_bandwidth_over_the_bytes_a_step_reads():
    """Qwen2.5-0.5B in bf16 at batch 1: 0.99 GB of weights a step, and 192 positions of KV cache (12 KiB each) more:
    at 3.35 TB/s about 3,380 tokens/s; at batch 32 the cache is read 32 times."""
    model = meta_model(QWEN25_0_5B)
    assert 3370 < decode_bound(model, QWEN25_0_5B, 1, 192, 3.35) < 3390
    weights, cache = 494_032_768 * 2, 32 * 192 * 2 * 24 * 2 * 64 * 2
    assert decode_bound(model, QWEN25_0_5B, 32, 192, 3.35) == pytest.approx(32 * 3.35e12 / (weights + cache))


def meta_model(shape):
    from transformers import Qwen2ForCausalLM

    with torch.device("meta"):
        return Qwen2ForCausalLM(qwen2_config(shape, build_tiny_tokenizer())).to(torch.bfloat16)
