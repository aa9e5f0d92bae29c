"""Each algorithm's advantages through the real trainer path, on hand-built rewards; DAPO's dynamic sampling on a
scripted reward sequence; REINFORCE's update uses no baseline and no ratio; MaxRL and RLOO on unscorable rows."""

import pytest
import torch
from conftest import FAST_RECIPE

from rlvr.inputs import ConfigError
from rlvr.metrics.readings import RewardReadings
from rlvr.metrics.reward_batch import RewardBatch
from rlvr.training.algorithms import (
    compute_advantages,
    group_mean_baseline,
    group_zscore,
    leave_one_out,
    maxrl,
    no_baseline,
    trainer_class,
)
from rlvr.training.dapo import informative_groups
from rlvr.training.runner import prepare

# Two prompts, G = 4; columns: correctness, format. total = correctness + 0.5 * format.
CORRECTNESS = [1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5]
FORMAT = [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 0.5]
TOTAL = [1.5, 0.5, 0.5, 1.5, 1.0, 0.75, 1.0, 0.75]
# By hand: group 1 deviates +-0.5 from 1.0 with unbiased std sqrt(1/3); group 2 +-0.125 from 0.875, std sqrt(1/48).
HAND = {
    "grpo": [0.5 / (3**-0.5 + 1e-4) * s for s in (1, -1, -1, 1)]
    + [0.125 / (48**-0.5 + 1e-4) * s for s in (1, -1, 1, -1)],
    "drgrpo": [0.5, -0.5, -0.5, 0.5, 0.125, -0.125, 0.125, -0.125],
    "rloo": [x * 4 / 3 for x in (0.5, -0.5, -0.5, 0.5, 0.125, -0.125, 0.125, -0.125)],
    "reinforce": TOTAL,
    # binary = correctness * (format == 1) = [1, 0, 0, 1, 0.5, 0, 0.5, 0]: means 0.5 and 0.25 (MaxRL on binary,
    # the estimator alone).
    "maxrl_binary": [1.0, -1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0],
    # MaxRL trains on success = exact (correctness 1) and full format = [1, 0, 0, 1, 0, 0, 0, 0]: group 2 has
    # partial credit but no success, so no signal (mean 0).
    "maxrl": [1.0, -1.0, -1.0, 1.0, 0.0, 0.0, 0.0, 0.0],
}
ALGORITHM_FLAGS = {  # what each algorithm's recipe sets on top of the fast GRPO test recipe
    "grpo": ["--scale_rewards", "group"],
    "drgrpo": ["--scale_rewards", "none", "--loss_type", "dr_grpo"],
    "rloo": [],
    "reinforce": [],
    "maxrl": [],
    "dapo": ["--dynamic_sampling", "false"],
}


def build(tiny_model_dir, tmp_path, algorithm="grpo", *overrides):
    argv = [
        "--config",
        FAST_RECIPE,
        "--model_name_or_path",
        tiny_model_dir,
        "--output_dir",
        str(tmp_path / "o"),
        "--report_to",
        "none",
        "--print_rollouts",
        "false",
        "--generation_batch_size",
        "8",
        "--per_device_train_batch_size",
        "8",
        "--algorithm",
        algorithm,
        *overrides,
    ]
    _, trainer, _ = prepare(argv)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, read by the loss
    return trainer


def scripted_rewards(monkeypatch, *batches):
    """Every reward call returns the next hand-built tensor instead of scoring the completions: rows of
    (correctness, format), plus the always-measured success (1 where correctness and format are both 1, as for an
    exact answer at 3 letters), or rows already holding one value per reward of the trainer."""

    def with_success(batch):
        return [[*row, float(row[0] == 1.0 and row[1] == 1.0)] if len(row) == 2 else row for row in batch]

    queue = [torch.tensor(with_success(batch), dtype=torch.float32) for batch in batches]

    def scripted(readings, index, func, kwargs):  # each reward function returns its column; the last one pops
        return (queue[0] if index < len(readings.columns) - 1 else queue.pop(0))[:, index].tolist()

    monkeypatch.setattr(RewardReadings, "column_values", scripted)
    return queue


def prompts(trainer, num_prompts, num_generations):
    return [trainer.train_dataset[i] for i in range(num_prompts) for _ in range(num_generations)]


def test_pure_estimators_match_the_hand_values():
    total = torch.tensor(TOTAL)
    for name, fn in [
        ("grpo", group_zscore),
        ("drgrpo", group_mean_baseline),
        ("rloo", leave_one_out),
        ("reinforce", no_baseline),
    ]:
        assert fn(total, 4).tolist() == pytest.approx(HAND[name], abs=1e-5), name
    binary = torch.tensor([c * (f == 1.0) for c, f in zip(CORRECTNESS, FORMAT)])
    assert maxrl(binary, 4).tolist() == pytest.approx(HAND["maxrl_binary"])


def test_maxrl_is_zero_for_unsolved_groups_and_scales_by_the_success_rate():
    # Group 1 never solved: mean 0, advantage 0 (not NaN). Group 2: p = 1/4, so A = (b - 1/4) / (1/4) = 3 or -1.
    binary = torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    assert maxrl(binary, 4).tolist() == [0.0, 0.0, 0.0, 0.0, 3.0, -1.0, -1.0, -1.0]
    assert maxrl(torch.ones(4), 4).tolist() == [0.0] * 4  # all solved: no contrast


def test_unscorable_rows_leave_the_rest_of_the_group_its_signal():
    """A None reward (NaN) drops that row as TRL's GRPO does: advantage 0, and the group's baseline is the mean of
    the scorable rows, so RLOO's leave-one-out runs over the n = 3 others."""
    total = torch.tensor([1.0, float("nan"), 0.0, 0.5])
    components = {"total": total, "success": torch.tensor([1.0, float("nan"), 0.0, 0.0])}
    rloo = compute_advantages("rloo", components, 4)
    assert rloo.tolist() == pytest.approx([(1.0 - 0.5) * 3 / 2, 0.0, (0.0 - 0.5) * 3 / 2, 0.0])
    assert compute_advantages("maxrl", components, 4).tolist() == pytest.approx([2.0, 0.0, -1.0, -1.0])
    assert compute_advantages("reinforce", components, 4).tolist() == pytest.approx([1.0, 0.0, 0.0, 0.5])
    lonely = compute_advantages("rloo", {"total": torch.tensor([1.0, float("nan")])}, 2)
    assert lonely.tolist() == [0.0, 0.0]  # one scorable row has no leave-one-out baseline
    assert compute_advantages("grpo", components, 4) is None  # TRL's own advantage


@pytest.mark.parametrize("algorithm", ["grpo", "drgrpo", "rloo", "reinforce", "maxrl", "dapo"])
def test_trainer_advantages_on_hand_built_rewards(algorithm, tiny_model_dir, tmp_path, monkeypatch):
    trainer = build(tiny_model_dir, tmp_path, algorithm, *ALGORITHM_FLAGS[algorithm])
    assert (
        trainer_class(algorithm) in type(trainer).__bases__
    )  # the registry's class, under the tiny recipe's speed-ups
    scripted_rewards(monkeypatch, list(zip(CORRECTNESS, FORMAT)))
    output = trainer._generate_and_score_completions(prompts(trainer, 2, 4))
    expected = HAND["grpo" if algorithm == "dapo" else algorithm]
    assert output["advantages"].tolist() == pytest.approx(expected, abs=1e-4)
    # the completions table (log_completions) shows the advantages that trained, not TRL's GRPO ones
    assert list(trainer._logs["advantages"])[-len(expected) :] == output["advantages"].tolist()


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_success_bonus_adds_to_every_solved_completions_advantage(algorithm, tiny_model_dir, tmp_path, monkeypatch):
    """`success_bonus` on top of the algorithm's advantage, solved rows only, in what trains and what is logged."""
    trainer = build(tiny_model_dir, tmp_path, algorithm, *ALGORITHM_FLAGS[algorithm], "--success_bonus", "0.5")
    scripted_rewards(monkeypatch, list(zip(CORRECTNESS, FORMAT)))
    solved = [True, False, False, True, False, False, True, False]  # a random model solves nothing: set by hand
    monkeypatch.setattr(RewardBatch, "solved", lambda batch: torch.tensor(solved))
    output = trainer._generate_and_score_completions(prompts(trainer, 2, 4))
    expected = [a + 0.5 * s for a, s in zip(HAND[algorithm], solved)]
    assert output["advantages"].tolist() == pytest.approx(expected, abs=1e-4)
    assert list(trainer._logs["advantages"])[-len(expected) :] == output["advantages"].tolist()


def test_an_algorithm_whose_defining_field_disagrees_fails_before_the_model(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError) as err:
        build(tiny_model_dir, tmp_path, "drgrpo", "--scale_rewards", "group", "--loss_type", "dr_grpo")
    assert err.value.field == "scale_rewards" and "drgrpo" in err.value.message


def test_reinforce_takes_one_rollout_per_prompt_and_no_baseline(tiny_model_dir, tmp_path, monkeypatch):
    trainer = build(tiny_model_dir, tmp_path, "reinforce", "--num_generations", "1")
    assert trainer.num_generations == 1
    rewards = [[1.0, 1.0], [0.0, 1.0], [1.0, 0.5], [0.25, 0.0], [0.0, 0.0], [1.0, 1.0], [0.5, 1.0], [0.0, 0.5]]
    scripted_rewards(monkeypatch, rewards)
    output = trainer._generate_and_score_completions(prompts(trainer, 8, 1))
    # A group mean over one rollout would zero every advantage; REINFORCE keeps the raw total.
    assert output["advantages"].tolist() == pytest.approx([c + 0.5 * f for c, f in rewards])


def test_no_ratio_loss_ignores_old_logprobs(tiny_model_dir, tmp_path, monkeypatch):
    """-A * log pi: stale old log-probs (which would clip a PPO ratio) do not change the loss or its gradient."""
    trainer = build(tiny_model_dir, tmp_path, "rloo")
    scripted_rewards(monkeypatch, list(zip(CORRECTNESS, FORMAT)))
    batch = trainer._generate_and_score_completions(prompts(trainer, 2, 4))
    stale = {**batch, "old_per_token_logps": torch.full(batch["completion_mask"].shape, -30.0)}
    assert trainer._compute_loss(trainer.model, stale).item() == pytest.approx(
        trainer._compute_loss(trainer.model, batch).item()
    )
    grpo = build(tiny_model_dir, tmp_path, "grpo")  # the clipped PPO surrogate does notice them
    assert grpo._compute_loss(grpo.model, stale).item() != pytest.approx(grpo._compute_loss(grpo.model, batch).item())


def test_informative_groups_filter_all_min_or_all_max():
    values = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0, 0.5, 0.5, 0.5, 0.5])
    assert informative_groups(values, 4, "all_min_or_max").tolist() == [False, False, True, True]


def dapo_round(flags):
    """Scripted correctness for 4 groups of G=2: 'i' informative (0, 1), '0' all zero, '1' all one."""
    pattern = {"i": [0.0, 1.0], "0": [0.0, 0.0], "1": [1.0, 1.0]}
    return [[c, 1.0] for flag in flags for c in pattern[flag]]


def test_dynamic_sampling_resamples_until_full(tiny_model_dir, tmp_path, monkeypatch):
    trainer = build(tiny_model_dir, tmp_path, "dapo", "--num_generations", "2", "--max_resample_rounds", "4")
    queue = scripted_rewards(
        monkeypatch, dapo_round("0i10"), dapo_round("ii01"), dapo_round("1iii"), dapo_round("iiii")
    )
    output = trainer._generate_and_score_completions(prompts(trainer, 4, 2))
    assert len(queue) == 1  # three rounds: 1 + 2 + 3 informative groups >= 4 needed
    assert output["advantages"].shape[0] == 8 and output["completion_ids"].shape[0] == 8
    assert (output["advantages"].view(-1, 2).abs().sum(dim=1) > 0).all()  # every kept group carries signal
    metrics = trainer._metrics["train"]
    assert metrics["dapo/groups_generated"] == [12] and metrics["dapo/groups_kept"] == [4]
    assert (
        metrics["dapo/oversampling"] == [3.0]
        and metrics["dapo/rounds"] == [2.0]
        and metrics["dapo/groups_topped_up"] == [0]
    )


def test_dynamic_sampling_stops_at_the_cap_and_tops_up(tiny_model_dir, tmp_path, monkeypatch):
    trainer = build(tiny_model_dir, tmp_path, "dapo", "--num_generations", "2", "--max_resample_rounds", "1")
    queue = scripted_rewards(monkeypatch, dapo_round("0i10"), dapo_round("i001"), dapo_round("iiii"))
    output = trainer._generate_and_score_completions(prompts(trainer, 4, 2))
    assert len(queue) == 1 and output["advantages"].shape[0] == 8
    metrics = trainer._metrics["train"]
    assert (
        metrics["dapo/groups_kept"] == [2]
        and metrics["dapo/groups_topped_up"] == [2]
        and metrics["dapo/rounds"] == [1.0]
    )
    assert metrics["generation_step"] == [1.0, 1.0]  # extra rounds are not new generation steps ...
    assert metrics["generated_samples"] == [8.0, 16.0]  # ... but every generated sample is counted


@pytest.mark.parametrize("lora", [False, True])
def test_kl_is_one_yaml_field_and_is_logged(lora, run_recipe):
    """beta > 0 loads a frozen reference copy, or under LoRA reuses the base model with adapters disabled. Step 1
    samples from the untouched policy, so its logged KL to the reference is 0; after one update the policy has moved
    off the reference and KL is positive (k3 >= 0). A reference that followed the policy would log 0 there too.
    The logged value itself is checked against the estimator by hand in tests/test_kl_estimator.py."""
    from conftest import read_jsonl

    extra = (
        ["--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8", "--lora_target_modules", "q_proj", "v_proj"]
        if lora
        else []
    )
    trainer, out = run_recipe("--max_steps", "2", "--beta", "0.04", *extra)
    assert (trainer.ref_model is None) == lora
    rows = [row for row in read_jsonl(f"{out}/metrics.jsonl") if "loss" in row]
    assert [row["step"] for row in rows] == [1, 2]
    assert rows[0]["kl"] == pytest.approx(0.0, abs=1e-7)
    assert rows[1]["kl"] > 1e-6
