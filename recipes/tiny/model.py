"""A tiny Qwen3-architecture model and a byte-level tokenizer, built locally: no Hub, seconds on a CPU.

The tokenizer has one token per byte, so any text round-trips, plus Qwen's chat markers and the four format tags as
single tokens. The tags are *not* special tokens: TRL decodes completions with `skip_special_tokens=True`, which
would otherwise delete them before the format reward sees them.

    python -m rlvr.recipes.tiny.model --output_dir artifacts/tiny-qwen3
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import AddedToken, GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from rlvr.inputs import ArgumentParser, cli, non_negative_int, positive_int

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}"
)
# Like Qwen3's own template, `enable_thinking=False` (a recipe's `chat_template_kwargs`) opens the answer with an
# empty think block; unset or True changes nothing. This lets tests check offline that evaluation renders prompts
# with the recipe's template kwargs exactly as GRPOTrainer does.
TAG_TOKENS = ["<think>", "</think>", "<answer>", "</answer>"]


@dataclass
class TinyModelConfig:
    """Shape of the tiny model. Defaults give ~0.2M parameters: a few steps per second on 2 CPU cores."""

    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    max_position_embeddings: int = 1024  # byte tokens: prompt + completion must fit
    seed: int = 0


def build_tokenizer():
    byte_alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(byte_alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    tokenizer.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in TAG_TOKENS])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(output_dir: str | Path, config: TinyModelConfig | None = None) -> Path:
    """Write a random-weight tiny Qwen3 and its tokenizer to `output_dir` (overwrites), and return the path."""
    config = config or TinyModelConfig()
    tokenizer = build_tokenizer()
    torch.manual_seed(config.seed)
    model_config = Qwen3Config(
        vocab_size=len(tokenizer),
        **{k: v for k, v in asdict(config).items() if k != "seed"},
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(model_config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    output_dir = Path(output_dir)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def ensure_tiny_model(path: str | Path, config: TinyModelConfig | None = None) -> Path:
    """Build the tiny model at `path` unless a model is already there."""
    path = Path(path)
    if not (path / "config.json").exists():
        build_tiny_model(path, config)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description="Build a tiny random-weight Qwen3 + byte tokenizer (no Hub).")
    parser.add_argument("--output_dir", default="artifacts/tiny-qwen3")
    for name, default in asdict(TinyModelConfig()).items():
        parser.add_argument(f"--{name}", type=non_negative_int if name == "seed" else positive_int, default=default)
    args = vars(parser.parse_args(argv))
    path = build_tiny_model(args.pop("output_dir"), TinyModelConfig(**args))
    print(f"tiny model written to {path}")


if __name__ == "__main__":
    cli(main)
