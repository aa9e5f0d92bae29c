"""Advantage estimators over one generation batch, rows grouped by prompt (G contiguous rows per group).

GRPO and Dr. GRPO use TRL's own computation (`scale_rewards: group` / `none`); these functions are the ones TRL
lacks, plus the two TRL has, written out so each estimator's arithmetic can be read side by side and tested.
"""

from __future__ import annotations

import torch


def group_zscore(rewards: torch.Tensor, num_generations: int, eps: float = 1e-4) -> torch.Tensor:
    """GRPO: (r - group mean) / (group std + eps), with the unbiased std as TRL uses."""
    grouped = rewards.view(-1, num_generations)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    return (centred / (grouped.std(dim=1, keepdim=True) + eps)).view(-1)


def group_mean_baseline(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """Dr. GRPO: r - group mean, no division by the std (which biases towards too-easy and too-hard prompts)."""
    grouped = rewards.view(-1, num_generations)
    return (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)


def leave_one_out(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """RLOO: r - mean of the *other* G-1 rewards = G/(G-1) * (r - group mean); unbiased, unlike the group mean."""
    if num_generations < 2:
        raise ValueError("RLOO needs num_generations >= 2: the baseline is the mean of the other completions")
    return group_mean_baseline(rewards, num_generations) * num_generations / (num_generations - 1)


def no_baseline(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """REINFORCE: the raw reward is the advantage. Unbiased, but any constant in the reward adds variance."""
    return rewards.clone()
