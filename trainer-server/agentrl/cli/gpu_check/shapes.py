"""The models the check builds, and how much work each scale does: the published shapes of Qwen2.5-0.5B and -3B, a
two-layer Qwen2 for the tiny scale, and the Qwen2 config a random model of a shape is built from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The published shapes (the models' config.json on the Hugging Face Hub); both tie the output head to the embedding.
QWEN_VOCABULARY = 151_936


@dataclass(frozen=True)
class Shape:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocabulary: int


QWEN25_0_5B = Shape("Qwen2.5-0.5B", 896, 24, 14, 2, 4864, QWEN_VOCABULARY)
QWEN25_3B = Shape("Qwen2.5-3B", 2048, 36, 16, 2, 11008, QWEN_VOCABULARY)
# Head size 32: one vLLM's CPU attention supports, so the tiny scale can run vLLM too. The vocabulary is the
# character tokenizer's, padded as Qwen's is past its tokenizer.
TINY_QWEN = Shape("tiny Qwen2 (2 layers)", 128, 2, 4, 2, 256, 512)


@dataclass(frozen=True)
class Sizes:
    """How much work each check does at a scale."""

    shapes: tuple[Shape, ...]  # the decode and learner checks run each; the GRPO runs and vLLM the first
    matmul_n: int  # the square product's side
    decode_prompt: int
    decode_new_tokens: int
    decode_batches: tuple[int, ...]
    learner_episodes: int
    learner_prompt: int
    learner_response: int
    learner_micro_batch: dict[str, int]  # shape name -> episodes per forward and backward
    grpo_group_size: int
    grpo_batch_size: int
    grpo_new_tokens: int


SCALES = {
    "full": Sizes(
        shapes=(QWEN25_0_5B, QWEN25_3B),
        matmul_n=8192,
        decode_prompt=128,
        decode_new_tokens=128,
        decode_batches=(1, 32),
        learner_episodes=16,
        learner_prompt=256,
        learner_response=256,
        learner_micro_batch={QWEN25_0_5B.name: 8, QWEN25_3B.name: 4},
        grpo_group_size=4,
        grpo_batch_size=16,
        grpo_new_tokens=64,
    ),
    "tiny": Sizes(
        shapes=(TINY_QWEN,),
        matmul_n=512,  # oneDNN multiplies smaller bf16 matrices 30 times slower per operation (2-core EPYC)
        decode_prompt=16,
        decode_new_tokens=16,
        decode_batches=(1, 4),
        learner_episodes=4,
        learner_prompt=32,
        learner_response=32,
        learner_micro_batch={TINY_QWEN.name: 4},
        grpo_group_size=2,
        grpo_batch_size=4,
        grpo_new_tokens=40,  # the scripted calculator call is 33 characters, a token each
    ),
}


def qwen2_config(shape: Shape, tokenizer: Any) -> Any:
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=shape.vocabulary,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["Qwen2ForCausalLM"],
    )


def parameter_count(model: Any) -> int:
    """Each parameter once (the tied output head is the embedding)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
