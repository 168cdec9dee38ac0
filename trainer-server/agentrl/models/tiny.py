"""A tiny randomly initialised causal LM and a tokenizer with a tool-capable chat template, built
entirely in code: tests, benchmarks and the bundled example run with no download.

The tokenizer is character-level plus a few multi-character tokens for the chat and tool-call
scaffolding, so a valid call is a short token path and a tiny model can learn to produce it.
"""

from __future__ import annotations

import string

import torch
from tokenizers import AddedToken, Tokenizer, decoders
from tokenizers.models import BPE
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"]
# Scaffolding pieces (not special: they decode as text and the model may sample them).
SCAFFOLD_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    '{"name": "',
    '", "arguments": {',
    '"}}',
    '": "',
    "system",
    "user",
    "assistant",
    "tool",
    # a few common words, so that short tool names and argument keys are short token paths
    "lookup",
    "key",
    "value",
    "answer",
]
CHARACTERS = sorted(set(string.ascii_letters + string.digits + string.punctuation + " \n"))

# Qwen/Hermes-style template: tools listed in the system turn, calls as <tool_call>{json}</tool_call>,
# tool results in their own "tool" turn.
CHAT_TEMPLATE = (
    "{% if tools or messages[0]['role'] == 'system' %}"
    "<|im_start|>system\n"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}{% endif %}"
    "{% if tools %}\nTools:{% for t in tools %}\n{{ t | tojson }}{% endfor %}"
    '\nCall a tool with <tool_call>{"name": "NAME", "arguments": {...}}</tool_call>{% endif %}'
    "<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages %}"
    "{% if not (loop.first and m['role'] == 'system') %}"
    "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARACTERS)}
    backend = Tokenizer(BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.decoder = decoders.Fuse()  # tokens are characters or literal pieces: concatenate them
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in SCAFFOLD_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model_and_tokenizer(
    layers: int = 2, hidden: int = 64, seed: int = 0, head_dim: int = 16, tied: bool = True
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """`tied`: the output head is the input embedding, as in the small models this one stands for. Randomly initialised,
    such a model's greedy text repeats its context's last token whatever came before it; untied, it depends on the
    whole context (tests that need an edit to change what it writes use that)."""
    tokenizer = build_tiny_tokenizer()
    config = tiny_config(tokenizer, layers, hidden, head_dim, tied)
    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(state)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def tiny_config(
    tokenizer: PreTrainedTokenizerFast, layers: int = 2, hidden: int = 64, head_dim: int = 16, tied: bool = True
) -> LlamaConfig:
    """The tiny model's shape, without its weights (the memory plan reads it)."""
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // head_dim),
        num_key_value_heads=max(1, hidden // head_dim),
        head_dim=head_dim if hidden >= head_dim else hidden,
        max_position_embeddings=4096,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=tied,
        attn_implementation="sdpa",
    )
