"""Advantage estimators over one generation batch, rows grouped by prompt (G contiguous rows per group).

Each is `fn(rewards, num_generations) -> advantages` on the gathered (N,) reward column its algorithm names in the
registry (`rlvr/training/algorithms.py`; the total for most, the 0/1 `success` for MaxRL). A NaN reward marks an unscorable
completion (every reward function returned None): as in TRL's GRPO it is left out of its group's statistics and its
own advantage is 0 (the dispatch zeroes it), so one bad row never silences the rest of its group.

GRPO and Dr. GRPO train with TRL's own computation (`scale_rewards: group` / `none`); `group_zscore` and
`group_mean_baseline` write that arithmetic out so the estimators can be read side by side and tested against TRL.
"""

from __future__ import annotations

import torch


def _grouped(rewards: torch.Tensor, num_generations: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(G-wide rows, valid mask, valid count per group) with NaN rows excluded."""
    grouped = rewards.view(-1, num_generations)
    valid = ~torch.isnan(grouped)
    return grouped, valid, valid.sum(dim=1, keepdim=True)


def group_zscore(rewards: torch.Tensor, num_generations: int, eps: float = 1e-4) -> torch.Tensor:
    """GRPO: (r - group mean) / (group std + eps), with the unbiased std as TRL uses."""
    from trl.trainer.utils import nanstd

    grouped = rewards.view(-1, num_generations)
    centred = grouped - torch.nanmean(grouped, dim=1, keepdim=True)
    return (centred / (nanstd(grouped, dim=1).unsqueeze(1) + eps)).view(-1)


def group_mean_baseline(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """Dr. GRPO: r - group mean, no division by the std (which biases towards too-easy and too-hard prompts)."""
    grouped = rewards.view(-1, num_generations)
    return (grouped - torch.nanmean(grouped, dim=1, keepdim=True)).view(-1)


def leave_one_out(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """RLOO: r - mean of the *other* scorable rewards of the group = n/(n-1) * (r - group mean) over its n scorable
    rows; unbiased, unlike the plain group mean. A group with fewer than 2 scorable rows has no baseline: 0."""
    if num_generations < 2:
        raise ValueError("RLOO needs num_generations >= 2: the baseline is the mean of the other completions")
    grouped, valid, count = _grouped(rewards, num_generations)
    centred = grouped - torch.nanmean(grouped, dim=1, keepdim=True)
    scale = torch.where(count > 1, count / (count - 1).clamp(min=1), torch.zeros_like(count, dtype=grouped.dtype))
    return (centred * scale).view(-1)


def no_baseline(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """REINFORCE: the raw reward is the advantage. Unbiased, but any constant in the reward adds variance."""
    return rewards.clone()


def maxrl(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """MaxRL (Tajwar et al., 2026) on the 0/1 success b (the `success` reward: exact answer and full format; not the
    partial-credit `binary`, for which 1/p is not a pass rate): (b - mean_group(b)) / mean_group(b) when the group mean is
    > 0, else 0. Dividing by the success rate p (not the std) weights a prompt by 1/p: rarely solved prompts get the
    largest push, which is the gradient of log pass-rate (maximum likelihood of success) rather than of the pass rate."""
    grouped = rewards.view(-1, num_generations)
    mean = torch.nanmean(grouped, dim=1, keepdim=True)
    solved = mean > 0
    return torch.where(solved, (grouped - mean) / torch.where(solved, mean, torch.ones_like(mean)), 0.0).view(-1)
