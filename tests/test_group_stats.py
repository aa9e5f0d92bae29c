import pytest
import torch

from rlvr.metrics.reward_batch import group_summary, reward_components, zero_std_fraction

NAMES = ["correctness", "format"]
WEIGHTS = torch.tensor([1.0, 0.5])


def test_zero_std_fraction_on_known_groups():
    rewards = torch.tensor(
        [1.0, 1.0, 1.0, 0.0, 0.5, 0.0, 0.2, 0.2, 0.2, 0.0, 0.0, 0.0]
    )  # G = 3: groups 0, 2, 3 are flat
    assert zero_std_fraction(rewards, 3) == pytest.approx(3 / 4)
    assert zero_std_fraction(rewards, 2) == pytest.approx(3 / 6)  # pairs (1,1) (.2,.2) (0,0)
    assert zero_std_fraction(torch.tensor([0.3, 0.7]), 1) == 1.0  # one rollout per prompt: no contrast by construction


def test_group_split_across_two_ranks_is_counted_whole():
    """G = 4, 3 prompts over 2 ranks of 6 rows: group 1 has rows on both ranks. Gathering keeps it whole."""
    rank0 = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 0.0])  # group 0 flat; group 1 starts (0, 0 ...
    rank1 = torch.tensor([0.0, 1.0, 0.5, 0.5, 0.5, 0.5])  # ... 0, 1): not flat; group 2 flat
    gathered = torch.cat([rank0, rank1])  # what accelerate's gather returns on every rank
    assert zero_std_fraction(gathered, 4) == pytest.approx(2 / 3)
    # Judging each rank's rows alone would call the straddling half-groups flat and count wrong.
    assert zero_std_fraction(rank0[4:], 2) == 1.0


def test_matches_trls_own_zero_std_test():
    from trl.trainer.utils import nanstd

    torch.manual_seed(0)
    rewards = torch.randint(0, 3, (64,)).float() / 2
    trl_is_std_zero = torch.isclose(nanstd(rewards.view(-1, 4), dim=1), torch.zeros(16))
    assert zero_std_fraction(rewards, 4) == trl_is_std_zero.float().mean().item()  # on 0, 0.5, 1 both are exact


def test_trls_isclose_test_misses_flat_groups_that_ours_counts():
    from trl.trainer.utils import nanstd

    flat = torch.full((8,), 0.2)  # float32 std ~1.5e-8 > isclose's 1e-8
    assert not torch.isclose(nanstd(flat.view(1, 8), dim=1), torch.zeros(1)).item()
    assert zero_std_fraction(flat, 8) == 1.0


def test_components_total_binary_and_absent_penalty():
    rewards_per_func = torch.tensor([[1.0, 1.0], [1.0, 0.75], [0.5, 1.0], [0.0, 0.0]])
    components = reward_components(rewards_per_func, NAMES, WEIGHTS)
    assert components["total"].tolist() == [1.5, 1.375, 1.0, 0.0]
    assert components["binary"].tolist() == [1.0, 0.0, 0.5, 0.0]
    assert components["penalty"].tolist() == [0.0] * 4


def test_summary_has_avg_and_zero_std_for_every_component():
    rewards_per_func = torch.tensor([[1.0, 1.0], [1.0, 1.0], [0.0, 1.0], [1.0, 1.0]])
    summary = group_summary(reward_components(rewards_per_func, NAMES, WEIGHTS), num_generations=2)
    assert summary["avg_correctness"] == 0.75 and summary["avg_format"] == 1.0 and summary["avg_total"] == 1.25
    assert summary["avg_binary"] == 0.75 and summary["avg_penalty"] == 0.0
    assert summary["zero_std_frac/correctness"] == 0.5 and summary["zero_std_frac/format"] == 1.0
    assert summary["zero_std_frac/total"] == 0.5 and summary["zero_std_frac/penalty"] == 1.0


def test_unscorable_rows_are_ignored_like_trl():
    nan = float("nan")
    rewards_per_func = torch.tensor([[nan, nan], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    summary = group_summary(reward_components(rewards_per_func, NAMES, WEIGHTS), num_generations=2)
    assert summary["avg_total"] == 1.5
    # A group left with one scorable row has no contrast (its advantage is 0): flat, as is the all-1.5 group.
    assert summary["zero_std_frac/total"] == 1.0
