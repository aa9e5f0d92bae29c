"""Advantage estimators: what each group sample's reward is compared against.

They differ only in the baseline subtracted (and GRPO's division by the group std), which is
exactly what decides bias and variance of the policy gradient.
"""

import numpy as np

ESTIMATORS = ("none", "value", "rloo", "group_mean", "grpo")

LABELS = {
    "none": "none (REINFORCE)",
    "value": "value baseline",
    "rloo": "RLOO",
    "group_mean": "group mean (Dr. GRPO)",
    "grpo": "GRPO (z-score)",
}


def advantages(
    estimator: str, rewards: np.ndarray, baseline: np.ndarray | None = None, eps: float = 1e-4
) -> np.ndarray:
    """Advantages for groups of rewards (..., G).

    baseline (...,) is the per-prompt value V, used only by "value". GRPO uses the sample std
    (Bessel-corrected) and eps = 1e-4, as TRL does.
    """
    group_size = rewards.shape[-1]
    if estimator == "none":
        return rewards
    if estimator == "value":
        return rewards - baseline[..., None]
    group_sum = rewards.sum(-1, keepdims=True)
    if estimator == "rloo":
        return rewards - (group_sum - rewards) / (group_size - 1)
    centred = rewards - group_sum / group_size
    if estimator == "group_mean":
        return centred
    if estimator == "grpo":
        return centred / (rewards.std(-1, ddof=1, keepdims=True) + eps)
    raise ValueError(f"unknown estimator {estimator!r}; choose from {ESTIMATORS}")
