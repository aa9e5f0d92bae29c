"""The members of the family that TRL's GRPOTrainer cannot express with config alone: RLOO and REINFORCE.

Both replace TRL's group advantage with their own estimator (see `rlvr/advantages.py`) and drop the importance
ratio: the loss is the plain policy gradient -A * log pi, because each batch is used for exactly the gradient
it was sampled for. (TRL's own `RLOOTrainer` clips a sequence-level ratio and has none of this repo's hooks, so
RLOO here is GRPOTrainer with the leave-one-out baseline instead.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from trl import GRPOConfig

from rlvr.advantages import leave_one_out, no_baseline
from rlvr.group_stats import reward_components
from rlvr.trainer import RLVRGRPOTrainer


class CustomAdvantageMixin:
    """Recomputes the advantages from the gathered total reward with `advantage_fn(total, G)`."""

    advantage_fn: Callable[[torch.Tensor, int], torch.Tensor]

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        num_generations = self.num_generations if self.model.training else self.num_generations_eval
        total = reward_components(self._scored_rewards, self.reward_func_names, self.reward_weights)["total"]
        advantages = torch.nan_to_num(type(self).advantage_fn(total, num_generations), nan=0.0)
        local = len(inputs)
        start = self.accelerator.process_index * local
        output["advantages"] = advantages[start : start + local].to(output["advantages"].device)
        return output


class NoRatioMixin:
    """Loss without importance ratio: with old log-probs = current log-probs (detached), TRL's clipped surrogate
    reduces to exactly -A * grad log pi, whatever the clip range."""

    def _compute_loss(self, model, inputs):
        return super()._compute_loss(model, {k: v for k, v in inputs.items() if k != "old_per_token_logps"})


class RLOOTrainer(CustomAdvantageMixin, NoRatioMixin, RLVRGRPOTrainer):
    """RLOO: advantage = G/(G-1) * (r - group mean), REINFORCE-style loss."""

    advantage_fn = staticmethod(leave_one_out)


class ReinforceTrainer(CustomAdvantageMixin, NoRatioMixin, RLVRGRPOTrainer):
    """REINFORCE: advantage = raw total reward, no baseline; usually one rollout per prompt."""

    advantage_fn = staticmethod(no_baseline)


@dataclass
class SingleRolloutConfig(GRPOConfig):
    """GRPOConfig that accepts one rollout per prompt (REINFORCE, PPO).

    GRPO rejects `num_generations < 2` because a group of one has no baseline; REINFORCE uses none. Validation
    runs as for a group of two (every other check still applies), then G is set back to what was asked.
    """

    min_generations = 1  # rlvr.validation reads it: plain GRPO configs need 2

    def __post_init__(self):
        requested = self.num_generations
        if requested == 1:
            self.num_generations = 2
            if self.generation_batch_size is not None and self.generation_batch_size % 2:
                raise ValueError(f"generation_batch_size ({self.generation_batch_size}) must be even with num_generations 1")
        super().__post_init__()
        self.num_generations = requested
        if self.num_generations_eval is None:
            self.num_generations_eval = requested
