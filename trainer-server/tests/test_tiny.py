import torch
from agentrl.models.tiny import build_tiny_model_and_tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer


def test_tiny_checkpoint_round_trips(tmp_path):
    model, tokenizer = build_tiny_model_and_tokenizer(layers=1, hidden=32, seed=3)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True)
    loaded_tok = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    messages = [{"role": "user", "content": "add 2 and 3"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert loaded_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == text
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert loaded_tok(text, add_special_tokens=False).input_ids == ids
    with torch.no_grad():
        batch = torch.tensor([ids])
        assert torch.equal(model(batch).logits, loaded(batch).logits)
