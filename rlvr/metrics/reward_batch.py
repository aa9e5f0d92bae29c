"""The hook that hands a generation batch's reward tensors to callbacks.

HF `TrainerCallback` events never see rewards, so the trainer mixin calls `on_rewards` on every callback that
subclasses `RewardBatchCallback`, once per generation step, with the rewards gathered over all processes. What a
callback returns is logged through TRL's own metric path (console, wandb, metrics.jsonl).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import TrainerCallback

from rlvr.metrics.components import reward_components
from rlvr.rewards.functions import exact_answer


@dataclass
class RewardBatch:
    """One scored generation batch, global over processes, rows grouped by prompt (G contiguous rows per group)."""

    rewards_per_func: torch.Tensor  # (N, K)
    names: list[str]  # K reward names, as in the metrics
    weights: torch.Tensor  # (K,) weights of the total
    num_generations: int
    completions: list[str]  # N completion texts
    rows: list[dict]  # N dataset rows (question, answer, difficulty, ...)
    completion_lengths: list[int]  # N completion lengths in tokens
    mode: str = "train"
    round: int = 0  # > 0 for DAPO's extra generation rounds within one step
    extra: dict = field(default_factory=dict)
    _components: dict | None = field(default=None, init=False, repr=False, compare=False)
    _exact: torch.Tensor | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def size(self) -> int:
        return self.rewards_per_func.shape[0]

    def components(self) -> dict[str, torch.Tensor]:
        """Every reward component by name (`reward_components`), computed on first use and cached: one pass over the
        batch, whoever reads it (advantage, metrics, rollouts, step metrics, DAPO's filter)."""
        if self._components is None:
            self._components = reward_components(self.rewards_per_func, self.names, self.weights)
        return self._components

    def exact(self) -> torch.Tensor:
        """(N,) bool: the extracted answer is exactly the row's expected answer (`rlvr.rewards.functions.exact_answer`),
        whatever the format; cached like the components."""
        if self._exact is None:
            self._exact = torch.tensor(
                [exact_answer(text, row.get("answer")) for text, row in zip(self.completions, self.rows)], dtype=torch.bool
            )
        return self._exact


class RewardBatchCallback(TrainerCallback):
    """A TrainerCallback that also sees every scored generation batch."""

    def on_rewards(self, args, state, control, batch: RewardBatch) -> dict[str, float] | None:
        """Return metrics to log for this generation step (or None)."""
        return None
