"""Names in YAML -> reward functions, plus the components every run measures.

`reward_funcs` entries are registry names or dotted import paths (`my_pkg.my_rewards.brevity`). `ALWAYS_MEASURED`
run at weight 0.0 when not trained on, so `avg_*`, `binary`, `success` and `zero_std_frac/*` exist in every run; the
DAPO overlong penalty joins at weight 1.0 when configured (docs/rewards-and-extending.md).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from rlvr.rewards.functions import capped_correctness, correctness, format, overlong_penalty, success

from rlvr.inputs import ConfigError

REWARD_REGISTRY: dict[str, Callable] = {
    "correctness": correctness,
    "format": format,
    "success": success,
    "capped_correctness": capped_correctness,
}
ALWAYS_MEASURED = ("correctness", "format", "success")
PENALTY = "penalty"


@dataclass
class RewardSet:
    """The functions TRL will call, their weights in the total, and their metric names (same order)."""

    funcs: list[Callable]
    weights: list[float]
    names: list[str]


def import_reward(path: str, where: str) -> Callable:
    module_path, _, attr = path.rpartition(".")
    sys.path.insert(0, os.getcwd())  # let `my_rewards.fn` resolve from the launch directory, as TRL's script does
    try:
        func = getattr(importlib.import_module(module_path), attr)
    except (ImportError, AttributeError) as err:
        raise ConfigError(where, f"cannot import {path!r}: {err}") from None
    finally:
        sys.path.pop(0)
    if not callable(func):
        raise ConfigError(where, f"{path!r} is not callable")
    return func


def resolve_reward_funcs(
    names: list[str],
    weights: list[float] | None = None,
    overlong_max_length: int | None = None,
    overlong_cache_length: int | None = None,
) -> RewardSet:
    """Validate names and weights (errors name the field) and build the full reward set."""
    if not names:
        raise ConfigError("reward_funcs", "needs at least one reward, e.g. [correctness, format]")
    if weights is None:
        weights = [1.0] * len(names)
    if len(weights) != len(names):
        raise ConfigError(
            "reward_weights", f"has {len(weights)} entries but reward_funcs has {len(names)} ({', '.join(names)})"
        )
    if len(set(names)) != len(names):
        raise ConfigError("reward_funcs", f"lists a reward twice: {names}")
    penalty_configured = overlong_max_length is not None
    if penalty_configured and not (0 < (overlong_cache_length or 0) <= overlong_max_length):
        raise ConfigError(
            "overlong_cache_length",
            f"must be in (0, overlong_max_length={overlong_max_length}], got {overlong_cache_length}",
        )

    funcs, metric_names = [], []
    for i, name in enumerate(names):
        where = f"reward_funcs[{i}]"
        if name == PENALTY:
            if not penalty_configured:
                raise ConfigError(where, "'penalty' needs overlong_max_length and overlong_cache_length")
            funcs.append(overlong_penalty(overlong_max_length, overlong_cache_length))
        elif name in REWARD_REGISTRY:
            funcs.append(REWARD_REGISTRY[name])
        elif "." in name:
            funcs.append(import_reward(name, where))
        else:
            raise ConfigError(
                where, f"unknown reward {name!r}; use one of {[*REWARD_REGISTRY, PENALTY]} or a dotted path"
            )
        metric_names.append(name.rsplit(".", 1)[-1])

    weights = [float(w) for w in weights]
    if penalty_configured and PENALTY not in metric_names:
        funcs.append(overlong_penalty(overlong_max_length, overlong_cache_length))
        metric_names.append(PENALTY)
        weights.append(1.0)
    for name in ALWAYS_MEASURED:
        if name not in metric_names:
            funcs.append(REWARD_REGISTRY[name])
            metric_names.append(name)
            weights.append(0.0)
    return RewardSet(funcs=funcs, weights=weights, names=metric_names)
