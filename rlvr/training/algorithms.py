"""The algorithm registry: a recipe's `algorithm:` field names one entry, and the entry says everything the runner
needs to train it (trainer class, config class, advantage estimator, loss form, the fields that define it, so
`algorithm: drgrpo` with `scale_rewards: group` fails up front: docs/algorithms.md). An algorithm that differs from
GRPO only in its advantage is one function here plus one registry line.

The registry imports no trainer and no config (entries name them by dotted path), so `trainer.py`, `dapo.py`,
`ppo.py` and `config.py` can read it without an import circle (tests/test_import_graph.py keeps it so).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from trl.trainer.utils import nanstd

from rlvr.inputs import ConfigError
from rlvr.metrics.keys import TOTAL
from rlvr.metrics.reward_batch import flat_rows

# Advantage estimators: `fn(rewards, num_generations) -> advantages` on the gathered (N,) reward column the registry
# names, G contiguous rows per prompt. A NaN reward (unscorable completion) is left out of its group's statistics and
# its own advantage is 0 (the dispatch zeroes it), as in TRL's GRPO. GRPO and Dr. GRPO train with TRL's own
# computation; `group_zscore` and `group_mean_baseline` write it out to be read side by side and tested against TRL.


def group_zscore(rewards: torch.Tensor, num_generations: int, eps: float = 1e-4) -> torch.Tensor:
    """GRPO: (r - group mean) / (group std + eps), with the unbiased std as TRL uses."""
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
    grouped = rewards.view(-1, num_generations)
    count = (~torch.isnan(grouped)).sum(dim=1, keepdim=True)
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


TRAINER = "rlvr.training.trainer.RLVRTrainer"
CONFIG = "rlvr.training.config.RLVRConfig"


@dataclass(frozen=True)
class Algorithm:
    name: str
    summary: str
    trainer: str = TRAINER  # dotted path of the trainer class (`trainer_class` imports it)
    config: str = CONFIG  # dotted path of the config class (`config_class` imports it)
    advantage: Callable[[torch.Tensor, int], torch.Tensor] | None = None  # None: TRL's own (`scale_rewards`)
    advantage_reward: str = TOTAL  # the reward component the advantage is computed from
    ratio: bool = True  # False: -A * log pi, no ratio or clip: each batch is used once (RLOO, REINFORCE, MaxRL)
    group_baseline: bool = (
        True  # False: no group baseline (REINFORCE's raw reward, PPO's critic): flat groups keep theirs
    )
    requires: dict = field(default_factory=dict)  # config values that define the algorithm


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("grpo", "group z-score (r - mean) / std, PPO-clip"),
        Algorithm(
            "drgrpo",
            "r - group mean, no std, no length normalisation",
            requires={"scale_rewards": "none", "loss_type": "dr_grpo"},
        ),
        Algorithm(
            "dapo",
            "GRPO + clip-higher, token-level loss, overlong penalty, dynamic sampling",
            "rlvr.training.dapo.DAPOTrainer",
            "rlvr.training.dapo.DAPOConfig",
        ),
        Algorithm("rloo", "leave-one-out baseline, no ratio", advantage=leave_one_out, ratio=False),
        Algorithm(
            "reinforce",
            "raw reward, no baseline, no ratio",
            config="rlvr.training.config.SingleRolloutConfig",
            advantage=no_baseline,
            ratio=False,
            group_baseline=False,
        ),
        Algorithm(
            "maxrl",
            "0/1 success over the group success rate, no ratio",
            advantage=maxrl,
            advantage_reward="success",
            ratio=False,
        ),
        Algorithm(
            "gspo", "sequence-level importance ratio, tight clip", requires={"importance_sampling_level": "sequence"}
        ),
        Algorithm("cispo", "clipped stop-gradient importance weight", requires={"loss_type": "cispo"}),
        Algorithm("sapo", "soft temperature gate instead of a clip", requires={"loss_type": "sapo"}),
        Algorithm(
            "ppo",
            "learned critic, GAE over tokens, KL in the reward",
            "rlvr.training.ppo.PPOTrainer",
            "rlvr.training.ppo.PPOConfig",
            group_baseline=False,
        ),
    )
}


def _load(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def trainer_class(name: str) -> type:
    """The trainer class of algorithm `name` (imported now: the registry itself imports no trainer)."""
    return _load(ALGORITHMS[name].trainer)


def config_class(name: str) -> type:
    """The config dataclass of algorithm `name`, which the recipe parser fills."""
    return _load(ALGORITHMS[name].config)


def check_algorithm_config(training) -> None:
    """The fields that define the recipe's algorithm have the values it needs (one line naming the field)."""
    algorithm = ALGORITHMS[training.algorithm]
    for key, wanted in algorithm.requires.items():
        value = getattr(training, key)
        value = getattr(value, "value", value)
        if value != wanted:
            raise ConfigError(key, f"algorithm {algorithm.name!r} needs {key}: {wanted}, the recipe sets {value!r}")


def compute_advantages(name: str, components: dict[str, torch.Tensor], num_generations: int) -> torch.Tensor | None:
    """The one dispatch: advantages of algorithm `name` from the batch's reward components, or None when the
    algorithm uses TRL's own. Unscorable rows (NaN) get advantage 0 and never touch their group's baseline, and every
    row of a flat group (`flat_groups`: all scorable values equal) gets exactly 0, not a rounding residue."""
    algorithm = ALGORITHMS[name]
    if algorithm.advantage is None:
        return None
    rewards = components[algorithm.advantage_reward]
    advantages = torch.nan_to_num(algorithm.advantage(rewards, num_generations), nan=0.0).masked_fill(
        torch.isnan(rewards), 0.0
    )
    return zero_flat_groups(name, advantages, components, num_generations)


def zero_flat_groups(
    name: str,
    advantages: torch.Tensor,
    components: dict[str, torch.Tensor],
    num_generations: int,
    rows: slice = slice(None),
) -> torch.Tensor:
    """`advantages` (the batch's `rows`) with every row of a flat group of the algorithm's advantage reward set to
    exactly 0, for algorithms with a group baseline. Float arithmetic does not give 0 on its own: for a group whose
    totals are all 1.1667, the float32 group mean is one ulp off and GRPO's division by (std + 1e-4) turns that into
    -1.2e-3 on every member. TRL computes GRPO's and Dr. GRPO's advantages itself, so the trainer applies this to
    TRL's output too (`AlgorithmMixin`)."""
    algorithm = ALGORITHMS[name]
    if not algorithm.group_baseline:
        return advantages
    flat = flat_rows(components[algorithm.advantage_reward], num_generations)[rows].to(advantages.device)
    return advantages.masked_fill(flat, 0.0)
