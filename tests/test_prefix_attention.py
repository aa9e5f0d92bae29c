"""The `prefix_attention` speed-up computes what the model computes: its restated forward against the model's own
(logits), its sampling loop against `generate` with the same seed (the same tokens), for each model family it
accepts, in training and in evaluation; and it says no to what it does not restate."""

from __future__ import annotations

import pytest
import torch
from conftest import FAMILIES, SMALL, small_model
from transformers import AutoModelForCausalLM, GenerationConfig, Qwen2Config, Qwen3Config

from rlvr.speedups import prefix_attention


def _rows(batch=6, prefix=20, seed=1):
    gen = torch.Generator().manual_seed(seed)
    prefix_ids = torch.randint(0, 58, (prefix,), generator=gen)
    rest = [torch.randint(0, 58, (int(n),), generator=gen) for n in torch.randint(1, 5, (batch,), generator=gen)]
    return prefix_ids, rest


def _left_padded(prefix_ids, rest, completions=None, pad=60):
    """TRL's layout: [pad ...] + prefix + rest_i (+ completion_i, right-padded), with its attention mask."""
    completions = completions or [torch.zeros(0, dtype=torch.long)] * len(rest)
    prompt_width = len(prefix_ids) + max(len(r) for r in rest)
    completion_width = max(len(c) for c in completions)
    ids = torch.full((len(rest), prompt_width + completion_width), pad)
    mask = torch.zeros_like(ids)
    for i, (r, c) in enumerate(zip(rest, completions, strict=True)):
        prompt = torch.cat([prefix_ids, r])
        ids[i, prompt_width - len(prompt) : prompt_width] = prompt
        ids[i, prompt_width : prompt_width + len(c)] = c
        mask[i, prompt_width - len(prompt) : prompt_width + len(c)] = 1
    return ids, mask


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_restated_logits_match_the_models_own_forward(family):
    """Every position of every row (prefix once, then each row's rest of prompt and tokens, right-aligned as the
    sampling loop lays them out) against the model's forward over TRL's left-padded rows."""
    model = small_model(family)
    prefix_ids, rest = _rows()
    ids, mask = _left_padded(prefix_ids, rest)
    assert prefix_attention.reason_not(model) is None
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask).logits[:, len(prefix_ids) :]
        net = prefix_attention.Restated(model)
        width = max(len(r) for r in rest)
        lengths = torch.tensor([len(r) for r in rest])
        rest_ids = torch.zeros(len(rest), width, dtype=torch.long)
        for i, r in enumerate(rest):
            rest_ids[i, width - len(r) :] = r
        columns = torch.arange(width)
        valid = columns[None, :] >= (width - lengths)[:, None]
        positions = (len(prefix_ids) + columns[None, :] - (width - lengths)[:, None]).clamp(min=len(prefix_ids))
        bias = prefix_attention.attention_bias(
            valid[:, None, :] & (columns[None, :] <= columns[:, None])[None], len(prefix_ids), net.heads // net.kv_heads
        )
        hidden, _ = net.forward(rest_ids, net.rope(positions), net.prefix(prefix_ids), bias)
        restated = net.logits(hidden)
    # left-padded rows end with their rest of prompt, in the same last columns as the right-aligned layout
    torch.testing.assert_close(restated[valid], full[valid], rtol=1e-5, atol=1e-5)
    assert valid.sum() == sum(len(r) for r in rest)


GENERATION = {
    "plain sampling": {"do_sample": True},
    "temperature, top-k, top-p": {"do_sample": True, "temperature": 0.7, "top_k": 20, "top_p": 0.9},
    "min-p and repetition penalty": {"do_sample": True, "min_p": 0.05, "repetition_penalty": 1.3},
    "greedy": {"do_sample": False},
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("settings", sorted(GENERATION))
@pytest.mark.parametrize("group_prompts", [False, True])
def test_sampling_loop_draws_generates_tokens_with_the_same_seed(family, settings, group_prompts):
    """Distinct prompts, and (group_prompts) GRPO-style groups: 3 prompts x 3 rows, interleaved, the prompt pass run
    once per distinct prompt."""
    model = small_model(family)
    prefix_ids, rest = _rows(batch=8)
    if group_prompts:
        rest = [rest[i % 3] for i in range(9)]
    config = GenerationConfig(max_new_tokens=12, pad_token_id=60, eos_token_id=[59, 7], **GENERATION[settings])
    assert prefix_attention.reason_not(model, prefix_attention.prepared(model, config)) is None
    ids, mask = _left_padded(prefix_ids, rest)
    torch.manual_seed(3)
    expected = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, ids.shape[1] :]
    torch.manual_seed(3)
    got = prefix_attention.sample(model, config, prefix_ids, rest, group_prompts=group_prompts)
    assert got.shape == expected.shape
    assert torch.equal(got, expected)
    if config.do_sample:  # the EOS path ran: rows stopped and were padded after it, as generate pads them
        assert torch.isin(got, torch.tensor([59, 7])).any(dim=1).any() and (got == 60).any()


def test_random_stream_after_sampling_is_generates():
    """Training draws the next batch after generation: the loop must leave the generator where generate leaves it."""
    model = small_model("qwen3")
    prefix_ids, rest = _rows(batch=8)
    config = GenerationConfig(max_new_tokens=10, do_sample=True, pad_token_id=60, eos_token_id=[59, 7])
    ids, mask = _left_padded(prefix_ids, rest)
    after = []
    for run in (
        lambda: model.generate(input_ids=ids, attention_mask=mask, generation_config=config),
        lambda: prefix_attention.sample(model, config, prefix_ids, rest),
    ):
        torch.manual_seed(5)
        run()
        after.append(torch.rand(4))
    assert torch.equal(after[0], after[1])


def test_draw_is_multinomials_draw_token_for_token_and_stream_for_stream():
    """`draw` restates torch.multinomial's one-sample path (argmax of p / Exp(1)) with the exponential from float64
    uniforms: on decode-sized batches, peaked and flat, the same tokens and the generator left where multinomial
    leaves it; NaN probabilities raise as they do there."""
    for seed in range(40):
        logits = torch.randn(64, 263, generator=torch.Generator().manual_seed(seed)) * (1 + seed % 4) * 3
        logits[:, seed % 7] = float("-inf")  # a masked token (top-k, top-p) has p = 0
        probs = torch.softmax(logits, dim=-1)
        got = []
        for sampler in (lambda p: torch.multinomial(p, num_samples=1).squeeze(1), prefix_attention.draw):
            torch.manual_seed(seed)
            got.append((sampler(probs), torch.rand(3)))
        assert torch.equal(got[0][0], got[1][0]) and torch.equal(got[0][1], got[1][1])
    with pytest.raises(RuntimeError, match="nan"):
        prefix_attention.draw(torch.full((2, 5), float("nan")))


def test_it_says_no_to_what_it_does_not_restate():
    model = small_model("qwen3")
    assert prefix_attention.reason_not(model.to(torch.bfloat16)) == "torch.bfloat16 weights"
    model = small_model("qwen3")
    assert "num_beams" in prefix_attention.reason_not(model, GenerationConfig(num_beams=2, max_new_tokens=4))
    assert "min_new_tokens" in prefix_attention.reason_not(model, GenerationConfig(min_new_tokens=3, max_new_tokens=4))
    assert "max_new_tokens" in prefix_attention.reason_not(model, GenerationConfig(max_length=40))
    torch.manual_seed(0)
    sliding = AutoModelForCausalLM.from_config(Qwen2Config(**SMALL, use_sliding_window=True, sliding_window=8))
    assert "sliding" in prefix_attention.reason_not(sliding)
    torch.manual_seed(0)
    dynamic = AutoModelForCausalLM.from_config(
        Qwen3Config(**SMALL, head_dim=8, rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4})
    )
    assert "dynamic RoPE" in prefix_attention.reason_not(dynamic)  # frequencies that move with the length
    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(small_model("qwen3"), LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    assert "LoRA" in prefix_attention.reason_not(lora.base_model.model)  # the adapters' output is not F.linear
    model.config.model_type = "gemma"
    assert "gemma" in prefix_attention.reason_not(model)


def test_evaluation_samples_the_same_completions_with_and_without_it(tiny_model_dir):
    """`rlvr evaluate` (hf_sampler) with the recipe's prefix_attention on: the same completions as generate's
    num_return_sequences, under the same seed, and the restated loop really ran."""
    from unittest import mock

    from transformers import AutoTokenizer

    from rlvr.analysis.evaluate import hf_sampler, prompt_token_ids

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    prompts = [
        [
            {"role": "system", "content": "Spell the word backward inside <answer></answer>."},
            {"role": "user", "content": f"Spell this word backward: {word}"},
        ]
        for word in ("sun", "river", "at", "planet")
    ]
    chunk = prompt_token_ids(tokenizer, prompts, None)
    settings = {
        "max_new_tokens": 16,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "min_p": None,
        "repetition_penalty": 1.0,
    }
    results = []
    for speedups in (frozenset(), frozenset({"prefix_attention"})):
        sample = hf_sampler(model, tokenizer, settings, 3, "cpu", None, speedups)
        torch.manual_seed(11)
        with mock.patch.object(prefix_attention, "sample", wraps=prefix_attention.sample) as restated:
            results.append(sample(chunk))
        assert restated.called == bool(speedups)
    assert results[0] == results[1]
    assert [len(rows) for rows in results[1]] == [3, 3, 3, 3]


def test_without_an_eos_every_row_runs_to_max_new_tokens_as_in_generate():
    model = small_model("llama")
    model.generation_config.eos_token_id = None
    prefix_ids, rest = _rows(batch=4)
    config = GenerationConfig(max_new_tokens=6, do_sample=True, pad_token_id=60, eos_token_id=None)
    ids, mask = _left_padded(prefix_ids, rest)
    torch.manual_seed(4)
    expected = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, ids.shape[1] :]
    torch.manual_seed(4)
    got = prefix_attention.sample(model, config, prefix_ids, rest)
    assert got.shape == (4, 6) and torch.equal(got, expected)
