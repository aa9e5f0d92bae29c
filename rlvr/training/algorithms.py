"""The algorithm registry: a recipe's `algorithm:` field names one entry, and the entry says everything the runner
needs to train it (trainer class, config class, advantage estimator, loss form, the config it requires).

Like rlhf-book's `loss:` field with one `compute_advantages` dispatch: an algorithm that differs from GRPO only in
its advantage is one function in `advantages.py` plus one line here (and a recipe YAML with `base:` + `algorithm:`).
The variants TRL expresses with config alone (Dr. GRPO, GSPO, CISPO, SAPO) use TRL's own advantage and loss; their
entry lists the fields that define them, so `algorithm: drgrpo` with `scale_rewards: group` fails up front instead
of silently training GRPO.

    ratio=False: the loss is the plain policy gradient -A * log pi (no importance ratio, no clip), because each batch
    is used for exactly the gradient it was sampled for (RLOO, REINFORCE and MaxRL as upstream writes them).

The registry is a leaf: it imports no trainer and no config. An entry names its trainer and config classes by dotted
path, and `trainer_class` / `config_class` import them when a run asks, so `trainer.py`, `dapo.py`, `ppo.py` and
`config.py` can read the registry without an import circle (tests/test_import_graph.py keeps it so).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from rlvr.inputs import ConfigError
from rlvr.metrics.components import flat_rows
from rlvr.training import advantages

TRAINER = "rlvr.training.trainer.RLVRTrainer"
CONFIG = "rlvr.training.config.RLVRConfig"


@dataclass(frozen=True)
class Algorithm:
    name: str
    summary: str
    trainer: str = TRAINER  # dotted path of the trainer class (`trainer_class` imports it)
    config: str = CONFIG  # dotted path of the config class (`config_class` imports it)
    advantage: Callable[[torch.Tensor, int], torch.Tensor] | None = None  # None: TRL's own (`scale_rewards`)
    advantage_reward: str = "total"  # the reward component the advantage is computed from
    ratio: bool = True  # False: -A * log pi, no importance ratio
    group_baseline: bool = True  # False: no group baseline (REINFORCE's raw reward, PPO's critic): flat groups keep theirs
    requires: dict = field(default_factory=dict)  # config values that define the algorithm


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("grpo", "group z-score (r - mean) / std, PPO-clip"),
    Algorithm("drgrpo", "r - group mean, no std, no length normalisation", requires={"scale_rewards": "none", "loss_type": "dr_grpo"}),
    Algorithm("dapo", "GRPO + clip-higher, token-level loss, overlong penalty, dynamic sampling", "rlvr.training.dapo.DAPOTrainer", "rlvr.training.dapo.DAPOConfig"),
    Algorithm("rloo", "leave-one-out baseline, no ratio", advantage=advantages.leave_one_out, ratio=False),
    Algorithm("reinforce", "raw reward, no baseline, no ratio", config="rlvr.training.config.SingleRolloutConfig", advantage=advantages.no_baseline, ratio=False, group_baseline=False),
    Algorithm("maxrl", "0/1 success over the group success rate, no ratio", advantage=advantages.maxrl, advantage_reward="success", ratio=False),
    Algorithm("gspo", "sequence-level importance ratio, tight clip", requires={"importance_sampling_level": "sequence"}),
    Algorithm("cispo", "clipped stop-gradient importance weight", requires={"loss_type": "cispo"}),
    Algorithm("sapo", "soft temperature gate instead of a clip", requires={"loss_type": "sapo"}),
    Algorithm("ppo", "learned critic, GAE over tokens, KL in the reward", "rlvr.training.ppo.PPOTrainer", "rlvr.training.ppo.PPOConfig", group_baseline=False),
)}


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
    advantages = torch.nan_to_num(algorithm.advantage(rewards, num_generations), nan=0.0).masked_fill(torch.isnan(rewards), 0.0)
    return zero_flat_groups(name, advantages, components, num_generations)


def zero_flat_groups(name: str, advantages: torch.Tensor, components: dict[str, torch.Tensor], num_generations: int,
                     rows: slice = slice(None)) -> torch.Tensor:
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
