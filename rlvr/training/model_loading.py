"""How a recipe's model is loaded, in one place for training and evaluation: TRL's own arguments, QLoRA included.

Doing what `trl/scripts/grpo.py` does (`model_init_kwargs` from `ModelConfig`, `quantization_config` from
`get_quantization_config`) is what makes `load_in_4bit: true` (QLoRA) reach the model instead of being parsed and
dropped (docs/memory-and-gpu.md).
"""

from __future__ import annotations

import importlib.util

import torch
from trl import get_quantization_config

from rlvr.inputs import ConfigError


def check_quantization(model_args, training, dry_run: bool = False) -> None:
    """Called by `rlvr.training.config.validate`, before any model loads: a quantized base needs LoRA adapters to train, and
    bitsandbytes needs its package and a CUDA device. Each failure is one line naming the field, not a traceback
    from inside `from_pretrained` minutes later. A dry run (and the planner) checks only the config itself."""
    flag = "load_in_4bit" if model_args.load_in_4bit else "load_in_8bit" if model_args.load_in_8bit else None
    if flag is None:
        return
    if model_args.load_in_4bit and model_args.load_in_8bit:
        raise ConfigError("load_in_8bit", "choose one of load_in_4bit and load_in_8bit")
    if not model_args.use_peft:
        raise ConfigError(flag, "quantized weights cannot be trained directly; set use_peft: true (QLoRA)")
    if dry_run:
        return
    if training.use_cpu:
        raise ConfigError(flag, "bitsandbytes quantization needs a CUDA GPU, and this recipe sets use_cpu: true")
    if not torch.cuda.is_available():
        raise ConfigError(flag, "bitsandbytes quantization needs a CUDA GPU, and torch sees none here")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError(flag, "needs the bitsandbytes package (pip install bitsandbytes), which is not installed")


def model_init_kwargs(model_args, training) -> dict:
    """`from_pretrained` arguments exactly as trl/scripts/grpo.py builds them; the recipe's own `model_init_kwargs`
    win, as there."""
    return {
        "revision": model_args.model_revision,
        "trust_remote_code": training.trust_remote_code,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
        **(training.model_init_kwargs or {}),
    }


def quantization_config(model_args):
    """TRL's `get_quantization_config`: a `BitsAndBytesConfig` for load_in_4bit / load_in_8bit (compute dtype =
    the recipe's dtype, quant type, nested quant, storage), else None."""
    return get_quantization_config(model_args)
