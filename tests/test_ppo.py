"""PPO: GAE on hand-built rewards and values; a 2-step run where both the policy and the critic get
finite, non-zero updates; evaluations that leave the training rows alone."""

import math
from pathlib import Path

import pytest
import torch
from conftest import REPO, read_jsonl

from rlvr.metrics.keys import is_timing
from rlvr.training.ppo import PPOTrainer, generalized_advantages, masked_whiten, sequence_reward_on_last_token


def test_gae_by_hand():
    # One completion of 3 tokens (then padding), gamma 1, lambda 0.5; reward 1 on the last token.
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0]])
    values = torch.tensor([[0.5, 0.25, 0.75, 9.0]])  # the padded position's value must be ignored
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    advantages, returns = generalized_advantages(rewards, values, mask, gamma=1.0, lam=0.5)
    # delta_2 = 1 - 0.75 = 0.25; delta_1 = 0 + 0.75 - 0.25 = 0.5; delta_0 = 0 + 0.25 - 0.5 = -0.25
    # A_2 = 0.25; A_1 = 0.5 + 0.5 * 0.25 = 0.625; A_0 = -0.25 + 0.5 * 0.625 = 0.0625
    assert advantages.tolist() == [[0.0625, 0.625, 0.25, 0.0]]
    assert returns.tolist() == [[0.5625, 0.875, 1.0, 0.0]]


def test_gae_with_discount_and_lambda_one_is_discounted_return_minus_value():
    rewards = torch.tensor([[0.5, 0.0, 2.0]])
    values = torch.tensor([[1.0, 2.0, 3.0]])
    advantages, _ = generalized_advantages(rewards, values, torch.ones(1, 3), gamma=0.9, lam=1.0)
    expected = [0.5 + 0.9 * 0.0 + 0.81 * 2.0 - 1.0, 0.0 + 0.9 * 2.0 - 2.0, 2.0 - 3.0]
    assert advantages[0].tolist() == pytest.approx(expected)


def test_sequence_reward_lands_on_the_last_real_token_and_whitening_ignores_padding():
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    assert sequence_reward_on_last_token(torch.tensor([2.0, -1.0]), mask).tolist() == [
        [0.0, 2.0, 0.0],
        [0.0, 0.0, -1.0],
    ]
    whitened = masked_whiten(torch.tensor([[1.0, 3.0, 100.0], [1.0, 3.0, 2.0]]), mask)
    assert whitened[0, 2] == 0.0 and (whitened * mask).sum().abs() < 1e-5


def test_two_ppo_steps_give_policy_and_critic_finite_updates(run_recipe, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    recipe = str(REPO / "recipes" / "tiny" / "ppo.yaml")
    trainer, out = run_recipe(
        "--max_steps",
        "2",
        "--generation_batch_size",
        "8",
        "--per_device_train_batch_size",
        "8",
        "--beta",
        "0.05",
        recipe=recipe,
    )
    critic_before = PPOTrainer._build_value_model(trainer, None)[0].state_dict()  # fresh init from the same weights
    critic_after = trainer.accelerator.unwrap_model(trainer.value_model).state_dict()
    policy_after = trainer.model.state_dict()
    for weights in (critic_after, policy_after):  # a NaN update changes the weights too
        assert all(torch.isfinite(value).all() for value in weights.values())
    assert any(not torch.equal(critic_before[k], critic_after[k]) for k in critic_before if not k.startswith("score"))
    policy_before = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    assert any(not torch.equal(policy_before[k], v) for k, v in policy_after.items() if k in policy_before)
    rows = [row for row in read_jsonl(f"{out}/metrics.jsonl") if "loss" in row]
    # metrics.jsonl writes a NaN or inf as null
    assert all(row[key] is not None and math.isfinite(row[key]) for row in rows for key in ("loss", "ppo/value_loss"))
    for key in (
        "ppo/value_loss",
        "ppo/explained_variance",
        "ppo/value_clipfrac",
        "ppo/advantage_early",
        "ppo/advantage_late",
        "ppo/kl_penalty",
        "avg_correctness",
    ):
        assert key in rows[0], key
    assert rows[0]["zero_std_frac/total"] == 1.0  # one rollout per prompt: no group contrast, by construction
    assert (Path(out) / "value_model" / "config.json").exists()


def test_ppo_evaluations_leave_the_training_rows_alone_and_sample_and_score_only_without_log_probs(
    run_recipe, tmp_path
):
    """An evaluation's values, advantages and KL penalty are logged as its own (eval_ppo/...), not into the next
    training row; with `eval_log_probs: false` it runs no critic or log-prob pass and logs none of them."""
    recipe = str(REPO / "recipes" / "tiny" / "ppo.yaml")
    batch = ("--generation_batch_size", "8", "--per_device_train_batch_size", "8", "--beta", "0.05")
    evaluate = (
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "1",
        "--eval_prompts",
        "4",
        "--per_device_eval_batch_size",
        "4",
    )
    _, plain = run_recipe(
        "--max_steps", "2", *batch, "--eval_strategy", "no", recipe=recipe, output_dir=tmp_path / "plain"
    )
    _, full = run_recipe(
        "--max_steps", "2", *batch, *evaluate, "--eval_log_probs", "true", recipe=recipe, output_dir=tmp_path / "full"
    )
    lean_trainer, lean = run_recipe(
        "--max_steps", "2", *batch, *evaluate, "--eval_log_probs", "false", recipe=recipe, output_dir=tmp_path / "lean"
    )
    training = lambda out: [
        {k: v for k, v in row.items() if not is_timing(k)}
        for row in read_jsonl(f"{out}/metrics.jsonl")
        if "loss" in row
    ]
    assert training(full) == training(plain) == training(lean)
    evaluations = lambda out: [row for row in read_jsonl(f"{out}/metrics.jsonl") if "eval_runtime" in row]
    assert all("eval_ppo/advantage_early" in row and "eval_ppo/value_loss" in row for row in evaluations(full))
    assert [row["eval_exact_match"] for row in evaluations(lean)] == [
        row["eval_exact_match"] for row in evaluations(full)
    ]
    assert not any(key.startswith("eval_ppo/") for row in evaluations(lean) for key in row)
    critic_calls = []
    lean_trainer.value_model.register_forward_hook(lambda *_: critic_calls.append(1))
    lean_trainer.evaluate()
    assert critic_calls == []
