"""`agentrl doctor --gpu`: proves the training stack on this machine by running it, each figure beside the bound the
hardware sets. torch sees the devices; a bf16 matrix product against the device's peak; the hf engine's decode
against the memory-bandwidth bound; the learner's tokens/s and peak memory; a 3-step GRPO run of the arithmetic
recipe, LoRA off and on, with its loss mask, its rollout-vs-learner logprob gap and a checkpoint round trip checked;
vLLM's decode where vLLM is installed. It prints a table and writes the report as protocol/schemas/gpu-check.schema.json
says.

Nothing is downloaded. The models are random, built in code from the published shapes of Qwen2.5-0.5B and -3B
(throughput does not depend on what the weights are), and the tokenizer is agentrl's built-in character tokenizer
(agentrl/models/tiny.py), the one tokenizer every machine has, while the models keep Qwen's 151,936-entry vocabulary:
the output head, the largest matrix of a small model, costs what it costs in a real run. `--scale tiny` runs the
same pipeline on a two-layer model in seconds (the default without CUDA), so the CPU tests keep every step of it
working; `full` (the default on CUDA) uses the real shapes.

The modules, each importing only those listed before it:

shapes: the models' published shapes, the Qwen2 config a random model is built from, and each scale's sizes;
peaks: the devices' data-sheet peaks, and the share of them under which a figure is a warning;
context: what a check is given (device, peak, sizes, tokenizer, a work folder) and gives back (rows), the random
model built in it, and the guard that turns a check that raises into a problem row;
kernel_checks: the devices torch sees, the bf16 matmul, the hf engine's decode and its memory-bandwidth bound;
recipe: the arithmetic recipe's run config sized for the scale, which the three checks below share;
learner_check: the learner's tokens/s and peak memory on synthetic episodes;
grpo_check: the 3-step GRPO runs, their loss mask, logprob gap and checkpoint round trip;
vllm_check: vLLM's decode, where vLLM is installed;
report: every check in order, the table and the JSON report; `run` is what `agentrl doctor --gpu` calls.
"""

from agentrl.cli.gpu_check.report import run

__all__ = ["run"]
