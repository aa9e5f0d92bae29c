"""DAPO's filter drops every flat group of the filter reward, partial-credit values included; upstream's all-0/all-1
rule stays available. Pure masks on hand-built values, then the trainer on scripted rewards (G = 2, four groups)."""

import pytest
import torch
from test_algorithms import build, prompts, scripted_rewards

from rlvr.inputs import ConfigError
from rlvr.metrics.reward_batch import flat_groups, zero_std_fraction
from rlvr.training.dapo import all_min_or_max, flat_partial_groups, informative_groups

# G = 4: all 0, all 1, all 0.75 (flat, partial credit), mixed, nearly flat (0.5 vs 0.5 + 1e-3: not flat).
VALUES = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 0.75, 0.75, 0.75, 0.75, 0, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.501])


def test_flat_groups_is_the_zero_std_test():
    assert flat_groups(VALUES, 4).tolist() == [True, True, True, False, False]
    assert zero_std_fraction(VALUES, 4) == pytest.approx(3 / 5)  # the logged metric counts the same groups
    assert flat_groups(torch.tensor([0.3, 0.7]), 1).tolist() == [True, True]  # G = 1: no contrast by construction


def test_zero_variance_drops_partial_credit_groups_all_min_or_max_keeps_them():
    assert informative_groups(VALUES, 4).tolist() == [False, False, False, True, True]
    assert informative_groups(VALUES, 4, "all_min_or_max").tolist() == [False, False, True, True, True]
    assert all_min_or_max(VALUES, 4).tolist() == [True, True, False, False, False]
    assert flat_partial_groups(VALUES, 4) == 1


def test_unscorable_group_is_dropped_by_zero_variance_only():
    """A group whose correctness is all NaN (no reward could score it) has advantage 0 on every row, so
    `zero_variance` drops it like any flat group; upstream's all-0/all-1 rule does not see it and keeps it."""
    values = torch.tensor([float("nan")] * 2 + [0.5, 0.5])
    assert informative_groups(values, 2).tolist() == [False, False]
    assert informative_groups(values, 2, "all_min_or_max").tolist() == [True, True]


def rewards(*groups):
    """Scripted (correctness, format) rows for groups of G = 2, one correctness pair per group."""
    return [[c, 1.0] for pair in groups for c in pair]


FLAT_PARTIAL, MIXED, ZERO, ONE = (0.75, 0.75), (0.0, 1.0), (0.0, 0.0), (1.0, 1.0)


@pytest.fixture(scope="module")
def dapo(tiny_model_dir, tmp_path_factory):
    """One DAPO trainer (G = 2, one extra round at most) for the module; each step sets its rule."""
    return build(
        tiny_model_dir, tmp_path_factory.mktemp("dapo"), "dapo", "--num_generations", "2", "--max_resample_rounds", "1"
    )


def dapo_step(trainer, monkeypatch, rule, *rounds):
    trainer.args.dynamic_sampling_filter = rule
    trainer._metrics["train"].clear()
    queue = scripted_rewards(monkeypatch, *rounds)
    output = trainer._generate_and_score_completions(prompts(trainer, 4, 2))
    kept_flat = int((output["advantages"].view(-1, 2).abs().sum(dim=1) == 0).sum())
    return trainer._metrics["train"], len(queue), kept_flat


@pytest.mark.parametrize(
    "rule, unused, rounds, generated, kept_flat",
    [
        ("zero_variance", 0, 1.0, 8, 0),  # only 2 groups carry signal: a second round, every kept group has one
        ("all_min_or_max", 1, 0.0, 4, 2),  # upstream's rule counts the 0.75 groups as kept: half the batch is flat
    ],
)
def test_groups_flat_at_partial_credit_are_resampled_past_or_kept(
    dapo, monkeypatch, rule, unused, rounds, generated, kept_flat
):
    """Two groups flat at 0.75 of four, under each rule."""
    first, second = rewards(FLAT_PARTIAL, MIXED, FLAT_PARTIAL, (0.25, 0.5)), rewards(MIXED, MIXED, MIXED, MIXED)
    metrics, left, flat = dapo_step(dapo, monkeypatch, rule, first, second)
    assert left == unused and metrics["dapo/rounds"] == [rounds] and metrics["dapo/groups_generated"] == [generated]
    assert metrics["dapo/groups_kept"] == [4] and metrics["dapo/groups_flat_partial"] == [2]
    assert flat == kept_flat


def test_both_rules_drop_all_zero_and_all_one(dapo, monkeypatch):
    for rule in ("zero_variance", "all_min_or_max"):
        metrics, unused, kept_flat = dapo_step(
            dapo, monkeypatch, rule, rewards(ZERO, MIXED, ONE, MIXED), rewards(MIXED, ONE, MIXED, ZERO)
        )
        assert unused == 0 and metrics["dapo/groups_kept"] == [4] and metrics["dapo/groups_flat_partial"] == [0], rule
        assert kept_flat == 0, rule


def test_unknown_filter_is_a_one_line_config_error(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError) as err:
        build(tiny_model_dir, tmp_path, "dapo", "--dynamic_sampling_filter", "min_max")
    assert err.value.field == "dynamic_sampling_filter"
