"""Everything read off one scored generation batch, in one dict: the reward components' means and zero-std
fractions, which side the flat groups are on, and every registered `step/*` metric. `GroupStatsCallback` logs it,
in our trainer and, through `rlvr.metrics.readings.with_readings`, in any `trl.GRPOTrainer`."""

from __future__ import annotations

import torch

from rlvr.metrics.components import flat_groups, group_summary
from rlvr.metrics.keys import zero_std_side_key
from rlvr.metrics.reward_batch import RewardBatch
from rlvr.metrics.step_metrics import compute_step_metrics


def zero_std_sides(batch: RewardBatch) -> dict[str, float]:
    """Which side the groups that are flat on `total` (`flat_groups`: no contrast, no gradient) are on, each as a
    fraction of all the batch's groups: `all_wrong` (no completion exactly right, `RewardBatch.solved`: too hard),
    `all_correct` (every one right: solved), `all_truncated` (every one cut off: a length budget), `identical` (the G
    completions are one text: the policy collapsed, sampling entropy near 0). The sides overlap (an all-truncated
    group is usually all wrong too); right and wrong need the rows' answers, truncation the completion ids."""
    G = batch.num_generations
    flat = flat_groups(batch.components()["total"], G)
    sides = {}
    if batch.has_answers():
        solved = batch.solved().reshape(-1, G)
        sides["all_wrong"] = flat & ~solved.any(dim=1)
        sides["all_correct"] = flat & solved.all(dim=1)
    if batch.truncated is not None:
        sides["all_truncated"] = flat & torch.tensor(batch.truncated, dtype=torch.bool).reshape(-1, G).all(dim=1)
    texts = [batch.completions[i : i + G] for i in range(0, batch.size, G)]
    sides["identical"] = flat & torch.tensor([len(set(group)) == 1 for group in texts], dtype=torch.bool)
    return {zero_std_side_key(side): mask.float().mean().item() for side, mask in sides.items()}


def batch_readings(batch: RewardBatch) -> dict[str, float]:
    """Everything read off one scored batch: `avg_<component>` and `zero_std_frac/<component>` for every component,
    `zero_std_side/*`, and every registered `step/*` metric (`rlvr/metrics/step_metrics.py`)."""
    summary = group_summary(batch.components(), batch.num_generations)
    return {**summary, **zero_std_sides(batch), **compute_step_metrics(batch)}
