"""Every metric key this repo writes, named once: the trainer logs them, the records, plots, report and sweep read them.

The reward components are not a fixed list: a run's components are its recipe's reward names (custom dotted-path
rewards included, under their function name; `success` is always measured) plus the derived `total`, `binary`
(partial credit, as the course homework defines it) and `penalty`
(`rlvr/metrics/reward_batch.py`). Readers therefore discover them from a run's own rows (`components_in`), so a new
reward shows up in every curve, table and summary without touching this file.

Why our own keys beside TRL's `rewards/<name>/mean` and `frac_reward_zero_std`: `avg_<component>` are the names the
course homework uses, `binary` and `total` are not TRL reward functions, `zero_std_frac/<component>` is per group for
every component (TRL's is for the total only, and all-or-nothing under `scale_rewards: batch`). Ours is also exact:
a group is flat when max == min over its scorable rows (`rlvr.metrics.reward_batch.flat_groups`); TRL's
`isclose(std, 0)` misses flat groups whose float32 std exceeds 1e-8 (eight 0.2s, 1/3s, ...), so `frac_reward_zero_std`
can read below our `zero_std_frac/total` on the same batch.
"""

from __future__ import annotations

REWARD_PREFIX = "avg_"  # avg_<component>: batch mean of the component
ZERO_STD_PREFIX = "zero_std_frac/"  # zero_std_frac/<component>: fraction of prompt groups with no contrast on it
ZERO_STD_SIDE_PREFIX = "zero_std_side/"  # zero_std_side/<side>: groups flat on total, by side (rlvr.metrics.readings)
ZERO_STD_SIDES = ("all_wrong", "all_correct", "all_truncated", "identical")
GROUP_PREFIX = "groups/"  # groups/<side>: from rollouts.jsonl, every prompt group by its side (rlvr.analysis.zero_std)
GROUP_SIDES, MIXED = ("all_wrong", "all_correct"), "mixed"  # `rlvr.rewards.functions.group_side`
EXACT_PREFIX = "zero_std_exact/"  # zero_std_exact/<what>: groups flat on exact match, observed and predicted
STEP_PREFIX = "step/"  # step/<name>: a registered per-step metric (rlvr/metrics/step_metrics.py)
CURRICULUM_PREFIX = "curriculum/"  # curriculum/{level, weight/<v>, pass_rate/<v>}: rlvr/training/curriculum.py
KNOWN_ORDER = ("correctness", "format", "success", "binary", "total", "penalty")  # how the built-in components are listed

# Cumulative counters (the compute axis): a log window keeps their last value instead of averaging them.
COUNTERS = GENERATION_STEP, GENERATED_SAMPLES, GENERATED_TOKENS = ("generation_step", "generated_samples",
                                                                   "generated_tokens")
TIME_PHASES = ("generation", "scoring", "logprobs", "optimization")  # time/<phase>_s, then time/total_s
STOPPED_EARLY = "stopped_early"  # in the closing row of a run stopped before its end (a signal, the divergence guard)
TIME_TOTAL, GENERATION_SHARE = "time/total_s", "time/generation_share"  # the step's time, generation's share of it

# TRL's own keys that the readers (plots, report, doctor) read.
LOSS, KL, ENTROPY, GRAD_NORM, LEARNING_RATE, REWARD = "loss", "kl", "entropy", "grad_norm", "learning_rate", "reward"
CLIPPED_RATIO, MEAN_LENGTH = "completions/clipped_ratio", "completions/mean_length"
TRL_ZERO_STD = "frac_reward_zero_std"  # isclose(std, 0) on the total: see above
TRAIN_RUNTIME = "train_runtime"  # the closing row's


def time_key(phase: str) -> str:
    return f"time/{phase}_s"


def reward_key(component: str) -> str:
    return f"{REWARD_PREFIX}{component}"


def zero_std_key(component: str) -> str:
    return f"{ZERO_STD_PREFIX}{component}"


def zero_std_side_key(side: str) -> str:
    return f"{ZERO_STD_SIDE_PREFIX}{side}"


def step_key(name: str) -> str:
    return f"{STEP_PREFIX}{name}"


def group_key(side: str) -> str:
    return f"{GROUP_PREFIX}{side}"


def exact_key(what: str) -> str:
    return f"{EXACT_PREFIX}{what}"


GROUP_SERIES = tuple(group_key(side) for side in (*GROUP_SIDES, MIXED))
EXACT_SERIES = tuple(exact_key(what) for what in ("observed", "predicted_self", "predicted_peers"))


def ordered(components) -> list[str]:
    """Built-in components first in their usual order, then any others (custom rewards) as they came."""
    components = list(dict.fromkeys(components))
    return [c for c in KNOWN_ORDER if c in components] + [c for c in components if c not in KNOWN_ORDER]


def components_in(rows) -> list[str]:
    """The reward components a run logged, discovered from its `avg_<component>` keys."""
    return ordered(key[len(REWARD_PREFIX):] for row in rows for key in row if key.startswith(REWARD_PREFIX))
