"""Toy RLVR lab: advantage estimators for RL with verifiable rewards, in NumPy, in seconds.

A tabular softmax policy on a 200-prompt, 16-answer task makes the group-baseline story
(REINFORCE, value baseline, RLOO, Dr. GRPO, GRPO) visible without a language model.
Run `python -m toy_rlvr`.
"""

from .demos import demo_gradient_bias, demo_group_size, demo_pass_at_k, demo_training
from .estimators import ESTIMATORS, advantages
from .task import LEVELS, make_task
from .training import Run, train

__all__ = [
    "ESTIMATORS",
    "LEVELS",
    "Run",
    "advantages",
    "demo_gradient_bias",
    "demo_group_size",
    "demo_pass_at_k",
    "demo_training",
    "make_task",
    "train",
]
