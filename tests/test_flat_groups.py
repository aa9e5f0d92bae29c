"""One exact flatness test (max == min over a group's scorable rows) for every float value, group size, memory layout
and process split, shared by zero_std_frac/*, DAPO's filter and the advantage: a flat group's advantage is exactly 0
for every algorithm with a group baseline, TRL's GRPO and Dr. GRPO included."""

import pytest
import torch
from test_algorithms import build, prompts, scripted_rewards

from rlvr.metrics.reward_batch import flat_groups, reward_components, zero_std_fraction
from rlvr.training.algorithms import ALGORITHMS, compute_advantages, zero_flat_groups
from rlvr.training.dapo import informative_groups

PARTIAL_CREDIT = sorted({k / n for n in range(3, 12) for k in range(n + 1)})  # spell_backward's scores, 3..11 letters
GROUP_SIZES = range(2, 17)
NAN = float("nan")


def total_of(correctness: float, format_: float = 1.0, rows: int = 1) -> torch.Tensor:
    """`total` as the trainer computes it (correctness + 0.5 * format, float32 nansum)."""
    rewards = torch.tensor([[correctness, format_]] * rows, dtype=torch.float32)
    return reward_components(rewards, ["correctness", "format"], torch.tensor([1.0, 0.5]))["total"]


def layouts(column: torch.Tensor):
    """The same values contiguous and as a strided column slice of an (N, 3) tensor. (Rows gathered from several
    processes arrive contiguous, so a process split is no third layout here: it is the slice of the batch each
    process zeroes, `test_a_group_split_across_two_processes_is_zeroed_on_both`.)"""
    wide = torch.stack([torch.rand_like(column), column, torch.rand_like(column)], dim=1)
    yield "contiguous", column.contiguous()
    yield "strided", wide[:, 1]


def test_std_based_test_missed_these_groups():
    """The bug: `isclose(nanstd, 0)` (TRL's frac_reward_zero_std, and ours before) calls eight 0.2s informative."""
    from trl.trainer.utils import nanstd

    eight = torch.full((8,), 0.2)
    assert not torch.isclose(nanstd(eight.view(1, 8), dim=1), torch.zeros(1)).item()
    assert flat_groups(eight, 8).tolist() == [True] and zero_std_fraction(eight, 8) == 1.0


@pytest.mark.parametrize("G", GROUP_SIZES)
def test_every_partial_credit_value_is_flat_in_every_layout(G):
    torch.manual_seed(G)
    values = torch.tensor(PARTIAL_CREDIT, dtype=torch.float32).repeat_interleave(G)  # one flat group per value
    for name, column in layouts(values):
        assert flat_groups(column, G).all(), (name, G)
        assert zero_std_fraction(column, G) == 1.0
        assert not informative_groups(column, G).any()  # DAPO drops them all


@pytest.mark.parametrize("G", GROUP_SIZES)
def test_one_ulp_apart_is_not_flat(G):
    torch.manual_seed(G)
    values = torch.tensor(PARTIAL_CREDIT, dtype=torch.float32).repeat_interleave(G)
    nudged = values.view(-1, G).clone()
    nudged[:, -1] = torch.nextafter(nudged[:, -1], torch.tensor(2.0))
    for name, column in layouts(nudged.view(-1)):
        assert not flat_groups(column, G).any(), (name, G)


@pytest.mark.parametrize("G", GROUP_SIZES)
def test_a_group_split_across_two_processes_is_zeroed_on_both(G):
    """Each process holds a slice of the gathered batch that starts and ends inside a group; `zero_flat_groups` on
    its slice (with the gathered components) must zero exactly the rows of flat groups, on both sides of the cut,
    and leave every row of a group one ulp from flat as it was."""
    values = torch.tensor(PARTIAL_CREDIT, dtype=torch.float32).repeat_interleave(G).view(-1, G)
    values[1::2, -1] = torch.nextafter(values[1::2, -1], torch.tensor(2.0))  # odd groups: one ulp apart, not flat
    total = values.view(-1)
    flat_row = (torch.arange(len(total)) // G) % 2 == 0
    advantages = torch.randn(len(total), generator=torch.Generator().manual_seed(G)) + 3.0  # never 0 by chance
    cut = G * (len(PARTIAL_CREDIT) // 2) + G // 2  # inside a group
    for rows in (slice(0, cut), slice(cut, len(total))):
        zeroed = zero_flat_groups("grpo", advantages[rows].clone(), {"total": total}, G, rows)
        assert torch.equal(zeroed == 0, flat_row[rows]), (G, rows)
        assert torch.equal(zeroed[~flat_row[rows]], advantages[rows][~flat_row[rows]])


def test_unscorable_rows_are_left_out():
    # G = 4: flat among its scorable rows; mixed; one scorable row (no contrast); none scorable.
    values = torch.tensor([0.2, NAN, 0.2, 0.2, 0.2, NAN, 0.4, 0.2, NAN, NAN, 0.6, NAN, NAN, NAN, NAN, NAN])
    for name, column in layouts(values):
        assert flat_groups(column, 4).tolist() == [True, False, True, True], name


@pytest.mark.parametrize("G", [2, 4, 7, 8, 16])
def test_the_1_1667_total_is_flat_and_every_estimator_gives_exactly_zero(G):
    """total = 2/3 + 0.5: the float32 group mean is one ulp off, and GRPO's / (std + 1e-4) made -1.2e-3 of it."""
    flat = total_of(2 / 3, rows=G)
    mixed = torch.cat([total_of(1.0), total_of(0.0, rows=G - 1)])
    total = torch.cat([flat, mixed])
    components = {
        "total": total,
        "success": torch.cat([torch.ones(G), torch.tensor([1.0] + [0.0] * (G - 1))]),
        "binary": torch.cat([torch.ones(G), torch.tensor([1.0] + [0.0] * (G - 1))]),
    }
    assert flat_groups(total, G).tolist() == [True, False]
    for name, algorithm in ALGORITHMS.items():
        if algorithm.advantage is None or not algorithm.group_baseline:
            continue
        advantages = compute_advantages(name, components, G)
        assert advantages[:G].tolist() == [0.0] * G, name
        assert advantages[G:].abs().sum() > 0, name  # the mixed group keeps its signal
    # TRL's own arithmetic for GRPO leaves the residue; the trainer zeroes it (here on a second process's rows).
    from trl.trainer.utils import nanstd

    grouped = total.view(-1, G)
    trl = ((grouped - grouped.nanmean(dim=1, keepdim=True)) / (nanstd(grouped, dim=1).unsqueeze(1) + 1e-4)).view(-1)
    if G >= 6:
        assert trl[:G].abs().max() > 0  # TRL's residue on a flat group (1.2e-3 at G = 8)
    rows = slice(G // 2, G // 2 + G)  # a process holding the second half of the flat group and half the mixed one
    zeroed = zero_flat_groups("grpo", trl[rows].clone(), components, G, rows)
    assert zeroed[: G - G // 2].tolist() == [0.0] * (G - G // 2)
    assert torch.equal(zeroed[G - G // 2 :], trl[rows][G - G // 2 :])


def test_reinforce_keeps_its_raw_reward_on_a_flat_group():
    """No group baseline, no zeroing: REINFORCE's advantage is the reward itself."""
    total = total_of(2 / 3, rows=4)
    assert compute_advantages("reinforce", {"total": total}, 4).tolist() == total.tolist()


@pytest.mark.parametrize("algorithm", ["grpo", "drgrpo"])
def test_trls_own_advantage_is_exactly_zero_on_a_flat_group(algorithm, tiny_model_dir, tmp_path, monkeypatch):
    """GRPO and Dr. GRPO train on TRL's advantage; the trainer zeroes its flat groups after TRL computes it."""
    flags = {"grpo": ["--scale_rewards", "group"], "drgrpo": ["--scale_rewards", "none", "--loss_type", "dr_grpo"]}
    trainer = build(
        tiny_model_dir,
        tmp_path,
        algorithm,
        *flags[algorithm],
        "--generation_batch_size",
        "16",
        "--per_device_train_batch_size",
        "16",
        "--num_generations",
        "8",
    )
    columns = {"correctness": [2 / 3] * 8 + [1.0, 0.0] * 4, "format": [1.0] * 16}
    scripted_rewards(
        monkeypatch, [[columns.get(name, [1.0] * 16)[i] for name in trainer.reward_func_names] for i in range(16)]
    )
    output = trainer._generate_and_score_completions(prompts(trainer, 2, 8))
    assert output["advantages"][:8].tolist() == [0.0] * 8
    assert output["advantages"][8:].abs().min() > 0.1
