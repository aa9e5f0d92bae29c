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

from collections.abc import Callable

# The components the trainer derives from the reward columns (`rlvr.metrics.reward_batch.reward_components`)
TOTAL, BINARY, PENALTY = "total", "binary", "penalty"
DERIVED = (TOTAL, BINARY, PENALTY)

REWARD_PREFIX = "avg_"  # avg_<component>: batch mean of the component
ZERO_STD_PREFIX = "zero_std_frac/"  # zero_std_frac/<component>: fraction of prompt groups with no contrast on it
ZERO_STD_SIDE_PREFIX = "zero_std_side/"  # zero_std_side/<side>: groups flat on total, by side (rlvr.metrics.readings)
# A prompt group's side by its completions' success (`rlvr.metrics.reward_batch.group_side`), and the other two
# reasons a group is flat on total: every completion cut off, or one text G times.
ALL_WRONG, ALL_CORRECT, MIXED, ALL_TRUNCATED, IDENTICAL = (
    "all_wrong",
    "all_correct",
    "mixed",
    "all_truncated",
    "identical",
)
GROUP_SIDES = (ALL_WRONG, ALL_CORRECT)
ZERO_STD_SIDES = (*GROUP_SIDES, ALL_TRUNCATED, IDENTICAL)
GROUP_PREFIX = "groups/"  # groups/<side>: from rollouts.jsonl, every prompt group by its side (rlvr.analysis.zero_std)
EXACT_PREFIX = "zero_std_exact/"  # zero_std_exact/<what>: groups flat on exact match, observed and predicted
STEP_PREFIX = "step/"  # step/<name>: a registered per-step metric (rlvr/metrics/step_metrics.py)
UNSCORED_PREFIX = f"{STEP_PREFIX}unscored/"  # step/unscored/<reward>: share it returned None or NaN for (`unscored`)
CURRICULUM_PREFIX = "curriculum/"  # curriculum/{level, weight/<v>, pass_rate/<v>}: rlvr/training/curriculum.py
KNOWN_ORDER = ("correctness", "format", "success", BINARY, TOTAL, PENALTY)  # how the built-in components are listed

# An evaluation summary's figures (`rlvr.metrics.scoring.summarize`, what `rlvr evaluate` writes): exact match, the
# mean of each component (mean_<component>), and per k pass@<k> and maj@<k>; every table of pass@k shows maj@k
# beside it.
EXACT_MATCH, MEAN_PREFIX = "exact_match", "mean_"
PASS_PREFIX, MAJ_PREFIX = "pass@", "maj@"
PER_K = (PASS_PREFIX, MAJ_PREFIX)
# The summary's two blocks of those figures: {OVERALL: figures, BY_LENGTH: {word length: figures}}; each block also
# counts its prompts and samples.
OVERALL, BY_LENGTH = "overall", "by_length"
PROMPTS, SAMPLES = "prompts", "samples"

# A scored completion's fields besides its reward components: in rollouts.jsonl's rows (rlvr.metrics.callbacks) after
# the step, round and group, in `rlvr evaluate`'s records (rlvr.metrics.scoring) after the prompt id and sample number.
COMPLETION_FIELDS = (
    "question",
    "answer",
    "difficulty",
    "task",
    "completion",
    "completion_tokens",
    "exact",
    "truncated",
)
ROLLOUT_FIELDS = ("step", "round", "group", *COMPLETION_FIELDS)
RECORD_FIELDS = ("prompt_id", "sample", *COMPLETION_FIELDS)

# Cumulative counters (the compute axis): a log window keeps their last value instead of averaging them.
COUNTERS = GENERATION_STEP, GENERATED_SAMPLES, GENERATED_TOKENS = (
    "generation_step",
    "generated_samples",
    "generated_tokens",
)
TIME_PHASES = ("generation", "scoring", "logprobs", "optimization")  # time/<phase>_s, then time/total_s
STOPPED_EARLY = "stopped_early"  # in the closing row of a run stopped before its end (a signal, the divergence guard)
TIME_TOTAL, GENERATION_SHARE = "time/total_s", "time/generation_share"  # the step's time, generation's share of it
# A CUDA run's peaks since the previous logged row, this process's (rlvr/training/cuda_memory.py): what the tensors
# held, and what the caching allocator reserved for them (the figure a card's free memory must cover)
PEAK_ALLOCATED, PEAK_RESERVED = "memory/peak_allocated_gib", "memory/peak_reserved_gib"

# TRL's own keys that the readers (plots, report, doctor) read.
LOSS, KL, ENTROPY, GRAD_NORM, LEARNING_RATE, REWARD = "loss", "kl", "entropy", "grad_norm", "learning_rate", "reward"
CLIPPED_RATIO, MEAN_LENGTH = "completions/clipped_ratio", "completions/mean_length"
TRL_ZERO_STD = "frac_reward_zero_std"  # isclose(std, 0) on the total: see above
TRL_REWARD_PREFIX = "rewards/"  # rewards/<function>/{mean,std}: TRL's per reward function
# TRL's key would contradict the exact `zero_std_frac/total` under the name users look for (it misses flat groups whose
# float32 std is not ~0, and reads 0 or 1 under `scale_rewards: batch`): the trainer logs it under this name instead.
TRL_ZERO_STD_RELABELLED = "trl/frac_reward_zero_std_isclose"
TRAIN_RUNTIME = "train_runtime"  # the closing row's
REWARD_STD = "reward_std"  # std of the total reward over the whole batch (not per group)

# Generated completion tokens per second of a log window's generation time and of its whole step time (time/total_s)
TOKEN_RATES = {"tokens_per_s/generation": "generation", "tokens_per_s/step": "total"}  # rate key -> its time/<phase>_s

# TRL's own readings of off-policy training, read (not written) here. With use_vllm, TRL corrects the vLLM/trainer
# mismatch by default (vllm_importance_sampling_correction, sequence_mask, clip 3.0) and logs the ratio (min, mean,
# max; per sequence in the sequence modes, masked ones as 0) and |trainer - vLLM| log-prob per token (mean, max).
# When a batch is reused (num_iterations > 1) the PPO clip acts: the share of tokens it clipped, per direction.
IS_RATIO = "sampling/importance_sampling_ratio/"
LOGP_DIFF = "sampling/sampling_logp_difference/"
CLIP_RATIO = "clip_ratio/region_mean"  # beside clip_ratio/{low_mean,high_mean,low_min,high_max}
OFF_POLICY_SERIES = (f"{IS_RATIO}mean", f"{IS_RATIO}min", f"{LOGP_DIFF}mean", f"{LOGP_DIFF}max", CLIP_RATIO)


# Wall-clock and memory readings: the only values two runs of the same recipe and seed may differ in (the machine,
# not the math).
TIMING = (
    "time",
    "memory/",
    "step_time",
    "tokens_per_s/",
    TRAIN_RUNTIME,
    "train_samples_per_second",
    "train_steps_per_second",
    "eval_runtime",
    "eval_samples_per_second",
    "eval_steps_per_second",
)


def is_timing(key: str) -> bool:
    return key.startswith(TIMING)


def time_key(phase: str) -> str:
    return f"time/{phase}_s"


# Held-out evaluation during training (rlvr/metrics/held_out.py): `rlvr evaluate`'s figures, logged in TRL's
# evaluation rows, whose keys TRL prefixes with EVAL_PREFIX (wandb and TensorBoard show them as eval/<key>).
EVAL_PREFIX = "eval_"
HELD_OUT_LENGTH_PREFIX = f"{EXACT_MATCH}/"  # exact_match/<word length>, after the HELD_OUT figures


def builder(prefix: str) -> Callable[[object], str]:
    """The builder of one family of keys, `<prefix><name>`: `reward_key("total")` is "avg_total"."""
    return f"{prefix}{{}}".format


# Keys with a parameter, one builder per family (the prefix constants above are what readers match on).
reward_key, mean_key, zero_std_key, zero_std_side_key = map(
    builder, (REWARD_PREFIX, MEAN_PREFIX, ZERO_STD_PREFIX, ZERO_STD_SIDE_PREFIX)
)
step_key, group_key, exact_key, eval_key = map(builder, (STEP_PREFIX, GROUP_PREFIX, EXACT_PREFIX, EVAL_PREFIX))
pass_key, maj_key, held_out_length_key = map(builder, (PASS_PREFIX, MAJ_PREFIX, HELD_OUT_LENGTH_PREFIX))

HELD_OUT = (EXACT_MATCH, mean_key("correctness"), pass_key(1))  # then exact_match/<word length>
EVAL_EXACT = eval_key(EXACT_MATCH)  # the one the doctor, the plots and the console read

GROUP_SERIES = tuple(group_key(side) for side in (*GROUP_SIDES, MIXED))
EXACT_SERIES = tuple(exact_key(what) for what in ("observed", "predicted_self", "predicted_peers"))


def trl_reward_key(function: str, statistic: str = "mean") -> str:
    """TRL's key of one reward function's batch mean (or std), `rewards/<function>/<statistic>`; a `function` with
    `*` in it makes the pattern the doctor matches a plain TRL run's reward names with."""
    return f"{TRL_REWARD_PREFIX}{function}/{statistic}"


def ordered(components) -> list[str]:
    """Built-in components first in their usual order, then any others (custom rewards) as they came."""
    components = list(dict.fromkeys(components))
    return [c for c in KNOWN_ORDER if c in components] + [c for c in components if c not in KNOWN_ORDER]


def components_in(rows) -> list[str]:
    """The reward components a run logged, discovered from its `avg_<component>` keys."""
    return ordered(key[len(REWARD_PREFIX) :] for row in rows for key in row if key.startswith(REWARD_PREFIX))
