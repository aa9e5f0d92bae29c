"""The `gqa_attention` speed-up computes what sdpa computes: logits and gradients over left-padded rows (a mask that
must reach the kernel) and over a cache, for each model family it accepts; a trainer with it switches its models and
one without does not; it says no where it would not apply; and a saved model loads with sdpa."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import FAMILIES, SMALL, small_model
from transformers import AutoModelForCausalLM, Qwen3Config

from rlvr.speedups import gqa_attention


def _padded_batch(seed: int = 1):
    """Six rows of 3-14 tokens, left-padded as TRL pads prompts, with their attention mask."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 15, (6,), generator=gen)
    ids = torch.full((6, int(lengths.max())), SMALL["pad_token_id"])
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths.tolist()):
        ids[i, -n:] = torch.randint(0, 58, (n,), generator=gen)
        mask[i, -n:] = 1
    return ids, mask


def _logits_and_grads(model, ids, mask):
    model.zero_grad()
    logits = model(input_ids=ids, attention_mask=mask).logits
    (logits * mask[..., None]).square().sum().backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_logits_and_gradients_match_sdpa_over_padded_rows(family):
    model = small_model(family).train()
    ids, mask = _padded_batch()
    assert gqa_attention.reason_not(model) is None
    expected = _logits_and_grads(model, ids, mask)
    assert gqa_attention.take(model) and model.config._attn_implementation == gqa_attention.NAME
    logits, grads = _logits_and_grads(model, ids, mask)
    real = mask.bool()
    torch.testing.assert_close(logits[real], expected[0][real], rtol=1e-5, atol=1e-5)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected[1][name], rtol=1e-5, atol=1e-5, msg=name)
    # the mask reached the kernel: a padded row's logits are the same row's alone, unpadded
    n = int(mask[0].sum())
    with torch.no_grad():
        alone = model(input_ids=ids[:1, -n:]).logits
    torch.testing.assert_close(logits[0, -n:], alone[0], rtol=1e-5, atol=1e-5)


def test_a_pass_over_a_cache_matches_sdpa():
    """The log-prob passes' layout: a prefix at batch 1 into a cache, repeated per row, then the rows on it."""
    model = small_model("qwen3")
    prefix = torch.randint(0, 58, (1, 9), generator=torch.Generator().manual_seed(3))
    ids, mask = _padded_batch(seed=4)
    full_mask = torch.cat([torch.ones(6, 9, dtype=mask.dtype), mask], dim=1)

    def rows_on_cache():
        with torch.no_grad():
            cache = model(input_ids=prefix, use_cache=True).cache
            cache.batch_repeat_interleave(6)
            return model(input_ids=ids, attention_mask=full_mask, cache=cache).logits

    expected = rows_on_cache()
    gqa_attention.take(model)
    torch.testing.assert_close(rows_on_cache()[mask.bool()], expected[mask.bool()], rtol=1e-5, atol=1e-5)


def test_it_steps_aside_where_nothing_is_repeated_or_the_attention_is_not_sdpa():
    eager = small_model("qwen3")
    eager.set_attn_implementation("eager")
    assert "eager" in gqa_attention.reason_not(eager) and not gqa_attention.take(eager)
    assert eager.config._attn_implementation == "eager"
    torch.manual_seed(0)
    every_head = AutoModelForCausalLM.from_config(Qwen3Config(**{**SMALL, "num_key_value_heads": 4}, head_dim=8))
    every_head.set_attn_implementation("sdpa")
    assert "nothing is repeated" in gqa_attention.reason_not(every_head)
    other = small_model("qwen3")
    other.config.model_type = "gemma"
    assert "gemma" in gqa_attention.reason_not(other)
    assert gqa_attention.reason_not(torch.nn.Linear(2, 2)) == "not a transformers model"


def test_a_saved_model_loads_with_sdpa(tmp_path):
    model = small_model("llama")
    gqa_attention.take(model)
    model.save_pretrained(tmp_path)
    assert gqa_attention.NAME not in json.dumps(json.loads((tmp_path / "config.json").read_text()))
    assert AutoModelForCausalLM.from_pretrained(tmp_path).config._attn_implementation == "sdpa"


@pytest.mark.parametrize("speedups, switched", [("all", 2), ("gqa_attention", 2), ("none", 0)])
def test_a_trainer_switches_its_policy_and_reference_only_with_the_speedup(run_recipe, speedups, switched):
    trainer, _ = run_recipe("--max_steps", "1", "--beta", "0.04", "--speedups", speedups)
    assert getattr(trainer, "_gqa_attention_models", 0) == switched
    expected = gqa_attention.NAME if switched else "sdpa"
    assert {trainer.model.config._attn_implementation, trainer.ref_model.config._attn_implementation} == {expected}
