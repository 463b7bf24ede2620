"""Build a tiny random-weight Qwen3 model directory for the real vLLM CPU server.

Only ``config.json`` and tokenizer files are needed: vLLM's ``--load-format
dummy`` fills the weights deterministically. The tokenizer is a byte-level
BPE trained here on a few KB of local text in well under a second, so no
network and no hub are involved.

Its alphabet is the corpus's own (printable ASCII), and the model's ``vocab_size`` is
exactly the tokenizer's: every id the random model can emit decodes to text. (With the
256 byte symbols and a padded vocabulary, greedy decoding settled on ids that decode to
nothing, or to half a UTF-8 character: an answer with tokens but no content, which a
gateway drops from a stream.) Characters outside the alphabet (Korean) are dropped
when a prompt is encoded; the server still answers.
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = """\
The pod console shows each model slot, its health, KV cache usage and the time to
first token. Speculative decoding drafts tokens that the target model verifies.
Prometheus scrapes every slot every fifteen seconds and keeps fifteen days.
A rented host can differ in its driver, its CUDA version and its peer to peer support.
0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,:;!?-_()[]{}
"""


def build(model_dir: Path, max_position_embeddings: int = 2048) -> Path:
    """The model in ``model_dir`` (built there once). ``max_position_embeddings`` bounds
    the ``--max-model-len`` vLLM accepts; the default model, which most tests share, keeps
    2048 — a longer one (the long-prefill test) goes in its own directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    model_dir.mkdir(parents=True, exist_ok=True)
    if (model_dir / "tokenizer.json").exists() and (model_dir / "config.json").exists():
        return model_dir
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=specials,
                                  show_progress=False)
    tok.train_from_iterator([_CORPUS] * 50, trainer=trainer)
    tok.save(str(model_dir / "tokenizer.json"))
    eos_id = tok.token_to_id("<|im_end|>")
    config = {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 768,
        "vocab_size": tok.get_vocab_size(), "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "max_position_embeddings": max_position_embeddings, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": tok.token_to_id("<|endoftext|>"), "eos_token_id": eos_id,
    }
    (model_dir / "config.json").write_text(json.dumps(config, indent=2))
    (model_dir / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_position_embeddings,
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "unk_token": None, "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {str(tok.token_to_id(s)): {
            "content": s, "special": True, "lstrip": False, "rstrip": False,
            "normalized": False, "single_word": False} for s in specials},
    }, indent=2))
    (model_dir / "generation_config.json").write_text(json.dumps({"eos_token_id": eos_id}))
    return model_dir
