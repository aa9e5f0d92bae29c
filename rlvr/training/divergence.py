"""Divergence guard: a run whose loss or grad norm turns NaN/inf, or whose mean reward collapses, stops unsaved.

Two triggers, checked on every logged row (`on_log`):

  * `divergence_guard: true` (the default): `loss` or `grad_norm` is NaN or infinite. A non-finite grad norm means
    the optimizer step just applied NaN/inf gradients, and a non-finite loss means the weights (or the numerics of
    this batch) are already broken: nothing after this point is worth keeping. (transformers' `logging_nan_inf_filter`,
    on by default, logs a NaN step's loss as the running mean; its grad norm still shows the NaN.)
  * `min_mean_reward: X` (opt-in; `min_mean_reward_component: total` or the name of a reward, e.g. correctness):
    the step's mean reward `avg_<component>` is below X for `min_mean_reward_patience` logged rows in a row.

What "stopped before the bad update is saved" means exactly. The Trainer logs a step after its optimizer step, and
saves a checkpoint right after logging it. When the guard trips at step S, it cancels step S's checkpoint
(`control.should_save = False`), stops training, and the runner skips the final `save_model`: the weights produced
by step S (and any later ones) are never written, so the newest complete checkpoint on disk is the one saved before
step S, and `--resume_from_checkpoint true` restarts from it. That checkpoint was trained by steps whose logged loss
and grad norm were finite; for the reward trigger, it holds the weights before the row that completed the patience
window (steps of the window before it may have been saved, if they were save steps).

A step is checked only if it is logged. So that no save step escapes the check when `logging_steps` is larger than
`save_steps`, the guard asks the Trainer to log every step that is about to be saved (one extra metrics row at such
steps, nothing else changes).

The row of the bad step stays in metrics.jsonl (non-finite values are written as null): the record shows why the run
stopped. A resume trims it with every other row after the checkpoint (`rlvr.runs.checkpoints.start_record`).
"""

from __future__ import annotations

import math

from transformers import TrainerCallback

from rlvr.inputs import ConfigError
from rlvr.runs.stopping import EarlyStop, any_rank

NON_FINITE_KEYS = ("loss", "grad_norm")
DIVERGED_STATUS = 1


def check_divergence_fields(args, reward_names) -> None:
    """The reward trigger's component must be one the run logs as `avg_<component>`."""
    components = ("total", "binary", "penalty", *reward_names)
    if args.min_mean_reward_component not in components:
        raise ConfigError("min_mean_reward_component", f"must be one of {', '.join(components)}, got "
                                                       f"{args.min_mean_reward_component!r}")


class DivergenceGuard(TrainerCallback):
    """See the module docstring. `stop` is set (an `EarlyStop`) when the guard trips."""

    def __init__(self, non_finite: bool = True, min_mean_reward: float | None = None, component: str = "total",
                 patience: int = 1):
        self.non_finite = non_finite
        self.min_mean_reward = min_mean_reward
        self.key = f"avg_{component}"
        self.patience = patience
        self.below = 0
        self.stop: EarlyStop | None = None

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_save:  # check every step that will be saved, whatever logging_steps says
            control.should_log = True

    def problem(self, logs: dict) -> str | None:
        if self.non_finite:
            for key in NON_FINITE_KEYS:
                value = logs.get(key)
                if isinstance(value, (int, float)) and not math.isfinite(value):
                    return f"{key} is {value}"
        value = logs.get(self.key)
        if self.min_mean_reward is not None and isinstance(value, (int, float)):
            self.below = self.below + 1 if not value >= self.min_mean_reward else 0  # NaN counts as below
            if self.below >= self.patience:
                return (f"{self.key} is {value:.4g}, below min_mean_reward {self.min_mean_reward:g} for "
                        f"{self.below} logged step(s)")
        return None

    def on_log(self, args, state, control, logs=None, **kwargs):
        problem = self.problem(logs or {}) if self.stop is None else None
        if not any_rank(problem is not None, args.device):
            return
        from rlvr.runs.checkpoints import last_complete_checkpoint

        control.should_save = False  # this step's weights are the bad ones: never written
        control.should_training_stop = True
        checkpoint, _ = last_complete_checkpoint(args.output_dir)
        kept = f"newest complete checkpoint: {checkpoint}; resume with --resume_from_checkpoint true" if checkpoint \
            else "no checkpoint was saved before it"
        self.stop = EarlyStop(f"error: diverged at step {state.global_step}: {problem or 'on another rank'}; "
                              f"step {state.global_step} was not saved; {kept}", DIVERGED_STATUS)
