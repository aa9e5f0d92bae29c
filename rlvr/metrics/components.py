"""Pure tensor functions over one generation batch's rewards, grouped by prompt.

The gathered reward tensor is ordered as TRL's `RepeatSampler` lays out the global batch: the G completions of a
prompt are contiguous across the concatenation of all processes, so `view(-1, G)` recovers whole groups even when a
group straddles two processes.
"""

from __future__ import annotations

import torch
from rlvr.metrics.keys import reward_key, zero_std_key

TOTAL, BINARY, PENALTY = "total", "binary", "penalty"


def reward_components(rewards_per_func: torch.Tensor, names: list[str], weights: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each reward column by name, plus `total` (the weighted sum TRL trains on), `binary` and `penalty`.

    `binary = correctness * (format == 1)`, the course homework's definition: it carries spell_backward's per-letter
    partial credit, so it is not 0/1 (the 0/1 indicator is the `success` reward, a column of its own). `penalty` is 0
    when the overlong penalty is not configured.
    """
    columns = {name: rewards_per_func[:, i] for i, name in enumerate(names)}
    total = (rewards_per_func * weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    total[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan  # unscorable rows, as TRL treats them
    columns[TOTAL] = total
    columns.setdefault(PENALTY, torch.zeros_like(total))
    if "correctness" in columns and "format" in columns:
        columns[BINARY] = columns["correctness"] * (columns["format"] == 1.0).float()
    return columns


def flat_groups(values: torch.Tensor, num_generations: int) -> torch.Tensor:
    """(num_groups,) bool: True where a prompt group's scorable (non-NaN) values are all equal, whatever their value.

    The test is exact: max == min over the group's scorable rows (max - min == 0), for every float value and any
    memory layout. A std-based test is not: the float32 std of eight copies of 0.2 is ~1.5e-8, above
    `torch.isclose`'s 1e-8 absolute tolerance, and it differs between a contiguous tensor and a strided column slice.
    TRL's own `frac_reward_zero_std` (`isclose(nanstd, 0)`) has that flaw and misses such flat groups, so it can read
    lower than our `zero_std_frac/total`. A group with fewer than two scorable rows has no contrast and counts as flat.
    A flat group gets advantage 0 under any group baseline (the trainer zeroes it exactly), so it adds no gradient.
    The one definition that the zero-std metrics, DAPO's filter and the advantage share.
    """
    if num_generations < 2:  # a single rollout per prompt has no group contrast by construction
        return torch.ones(values.numel(), dtype=torch.bool, device=values.device)
    grouped = values.reshape(-1, num_generations)
    scorable = ~torch.isnan(grouped)
    high = torch.where(scorable, grouped, torch.full_like(grouped, -torch.inf)).amax(dim=1)
    low = torch.where(scorable, grouped, torch.full_like(grouped, torch.inf)).amin(dim=1)
    return (high == low) | (scorable.sum(dim=1) < 2)


def flat_rows(values: torch.Tensor, num_generations: int) -> torch.Tensor:
    """(N,) bool: `flat_groups` spread over each group's rows (the mask that zeroes a flat group's advantages)."""
    flat = flat_groups(values, num_generations)
    return flat if num_generations < 2 else flat.repeat_interleave(num_generations)


def zero_std_fraction(rewards: torch.Tensor, num_generations: int) -> float:
    """Fraction of prompt groups whose scorable rewards are all equal (`flat_groups`): their advantage is 0.

    Always per group and exact: TRL's own `frac_reward_zero_std` becomes all-or-nothing under `scale_rewards: batch`,
    and its `isclose(std, 0)` misses flat groups at values such as 0.2 (see `flat_groups`).
    """
    return flat_groups(rewards, num_generations).float().mean().item()


def group_summary(components: dict[str, torch.Tensor], num_generations: int) -> dict[str, float]:
    """`avg_<component>` and `zero_std_frac/<component>` for every component of one generation batch (the components
    of a `RewardBatch`, computed once per batch)."""
    metrics = {}
    for name, values in components.items():
        metrics[reward_key(name)] = torch.nanmean(values).item()
        metrics[zero_std_key(name)] = zero_std_fraction(values, num_generations)
    return metrics
