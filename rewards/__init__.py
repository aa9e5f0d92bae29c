"""Reward functions and the registry that maps the names in YAML (`reward_funcs: [correctness, format]`) to them."""

from rlvr.rewards.functions import (
    binary,
    capped_correctness,
    correctness,
    exact_answer,
    format,
    overlong_penalty,
    success,
)
from rlvr.rewards.registry import REWARD_REGISTRY, resolve_reward_funcs

__all__ = [
    "REWARD_REGISTRY",
    "binary",
    "capped_correctness",
    "correctness",
    "exact_answer",
    "format",
    "overlong_penalty",
    "resolve_reward_funcs",
    "success",
]
