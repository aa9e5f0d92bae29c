"""`gqa_attention`: transformers' SDPA attention with each key/value head read once (see rlvr/speedups/__init__.py).

A grouped-query model (the tiny speller: 4 query heads over 2 key/value heads) has transformers hand SDPA its keys
and values repeated once per query head (`repeat_kv`) whenever a mask is passed, as in every padded log-prob pass. On
CPU that copy and its backward (a zero fill, a copy and a sum over the copies) cost as much as the attention kernel
itself, while SDPA's own `enable_gqa` reads each key/value head in place. transformers takes that path only without
a mask (or, process-wide, under TRANSFORMERS_SDPA_FORCE_GQA=1). So this module registers the same attention with
`enable_gqa` as an implementation of its own, through transformers' public AttentionInterface (and
AttentionMaskInterface: sdpa's masks), and a trainer with the speed-up switches its CPU models to it
(`set_attn_implementation`). The config it switches is never saved: a saved model loads with sdpa.

Same outputs: tests/test_gqa_attention.py holds it to sdpa's logits and gradients. Measured in docs/measurements/speed.md.
"""

from __future__ import annotations

import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "sdpa_gqa"
MODEL_TYPES = ("qwen3", "qwen2", "llama")  # the decoders whose attention is plain sdpa over a mask, and tested here


def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' `sdpa_attention_forward` for (B, H, T, D) queries over (B, Hkv, S, D) keys and values, with SDPA's
    grouped-query path in place of the repeated heads. Returns ((B, T, H, D) output, None) as that function does."""
    q_length = query.shape[2]
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = q_length > 1 and attention_mask is None and is_causal
    if is_causal and key.shape[2] > q_length:  # as sdpa: a prefill into a longer empty buffer attends its own length
        key, value = key[:, :, :q_length], value[:, :, :q_length]
    output = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=is_causal,
        enable_gqa=key.shape[1] != query.shape[1],
    )
    return output.transpose(1, 2).contiguous(), None


def reason_not(model) -> str | None:
    """Why `model` keeps its own attention (None: it takes this one)."""
    config = getattr(model, "config", None)
    if config is None or not hasattr(model, "set_attn_implementation"):
        return "not a transformers model"
    if config._attn_implementation not in ("sdpa", NAME):
        return f"attention implementation {config._attn_implementation!r}, not sdpa"
    if model.device.type != "cpu":  # CUDA's SDPA runs a masked grouped-query call on its slow math kernel
        return f"on {model.device.type}, not the CPU"
    text = config.get_text_config()
    if getattr(text, "model_type", None) not in MODEL_TYPES:
        return f"model type {getattr(text, 'model_type', None)!r} is not one of {MODEL_TYPES}"
    heads, kv_heads = text.num_attention_heads, getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    if kv_heads == heads:
        return "every query head has its own key/value head: nothing is repeated"
    return None


def take(model) -> bool:
    """Switch `model` to this attention where `reason_not` finds nothing; True when it runs it."""
    if model is None or reason_not(model) is not None:
        return False
    if model.config._attn_implementation != NAME:
        AttentionInterface.register(NAME, attention)
        AttentionMaskInterface.register(NAME, sdpa_mask)
        model.set_attn_implementation(NAME)
    return True
