"""Preemption: on SIGTERM or SIGINT a run finishes its optimizer step, writes a complete checkpoint and exits.

Schedulers (Slurm, Kubernetes, most cloud spot instances) send SIGTERM some seconds before they kill a job; Ctrl-C
sends SIGINT. The handler only records the signal: stopping inside a signal handler could tear an optimizer step or a
file write. At the end of the current optimizer step (`on_step_end`) the callback asks the Trainer to save a checkpoint
(`control.should_save`, whatever `save_strategy` says, "no" included) and to stop; the Trainer saves it right after,
in the same step, through its ordinary checkpoint path, so the checkpoint holds the weights, optimizer, scheduler,
RNG states and the stateful callbacks (the rollout ledger's counters) of that step. The record files were written
up to that step and `start_record` trims anything later on resume, so every step appears once in every record.

With several processes the signal may reach the ranks at different steps (or only one of them). At every step end
the ranks all-reduce the flag (a max), so all of them stop after the same step and save one checkpoint together.

Exit status: 128 + the signal number (143 for SIGTERM, 130 for SIGINT), the shell's convention for "ended by that
signal", so a scheduler or a wrapper script sees an unfinished job (Slurm's `--requeue` requeues it) even though
nothing was lost. The last stderr line names the checkpoint and the resume flag. A second signal while the first is
being honoured ends the process at once (the default action): press Ctrl-C twice to stop without a checkpoint.
"""

from __future__ import annotations

import math
import os
import signal
import threading
from dataclasses import dataclass

import torch
import torch.distributed as dist
from transformers import TrainerCallback

from rlvr.inputs import ConfigError
from rlvr.runs.checkpoints import last_complete_checkpoint

SIGNALS = (signal.SIGTERM, signal.SIGINT)
RESUME_HINT = "rerun the same command with --resume_from_checkpoint true"


@dataclass(frozen=True)
class EarlyStop:
    """Why a run stopped before max_steps, what to print (one line) and the process's exit status. The runner skips
    the final `save_model` for it: the output folder's top-level weights are only ever a finished run's."""

    line: str
    status: int


def early_stop(callbacks) -> EarlyStop | None:
    """The first of the callbacks (a trainer's) that stopped the run early (preemption, divergence guard), if any."""
    for callback in callbacks:
        if isinstance(getattr(callback, "stop", None), EarlyStop):
            return callback.stop
    return None


def any_rank(flag: bool, device) -> bool:
    """True on every rank if it is True on any: an all-reduce (max) when torch.distributed runs with several ranks."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return flag
    tensor = torch.tensor([int(flag)], device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return bool(tensor.item())


class PreemptionCallback(TrainerCallback):
    """Turns SIGTERM / SIGINT into "finish this step, checkpoint, stop" (see the module docstring)."""

    def __init__(self):
        self.signal: int | None = None
        self.stop: EarlyStop | None = None
        self._stopping = False
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame):
        if self.signal is not None:  # the second signal: the default action, now
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signal = signum

    def on_train_begin(self, args, state, control, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be installed from the main thread (a notebook's worker thread: skip)
        for signum in SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def on_step_end(self, args, state, control, **kwargs):
        if not any_rank(self.signal is not None, args.device):
            return
        control.should_save = True
        control.should_training_stop = True
        self._stopping = True

    def on_save(self, args, state, control, **kwargs):
        """The checkpoint is written: only now is there one to name (the divergence guard may cancel the save)."""
        if not self._stopping:
            return
        name = signal.Signals(self.signal).name if self.signal else "a signal on another rank"
        checkpoint = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        self.stop = EarlyStop(
            f"stopped by {name} after step {state.global_step}: checkpoint {checkpoint}; {RESUME_HINT}",
            128 + (self.signal or signal.SIGTERM),
        )

    def on_train_end(self, args, state, control, **kwargs):
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)  # None: set outside Python
        self._previous.clear()


# ---- divergence
# Divergence guard: a run whose loss or grad norm turns NaN/inf, or whose mean reward collapses, stops unsaved.
#
# Two triggers, checked on every logged row (`on_log`):
#
#   * `divergence_guard: true` (the default): `loss` or `grad_norm` is NaN or infinite. A non-finite grad norm means
#     the optimizer step just applied NaN/inf gradients, and a non-finite loss means the weights (or the numerics of
#     this batch) are already broken: nothing after this point is worth keeping. (transformers' `logging_nan_inf_filter`,
#     on by default, logs a NaN step's loss as the running mean; its grad norm still shows the NaN.)
#   * `min_mean_reward: X` (opt-in; `min_mean_reward_component: total` or the name of a reward, e.g. correctness):
#     the step's mean reward `avg_<component>` is below X for `min_mean_reward_patience` logged rows in a row.
#
# What "stopped before the bad update is saved" means exactly. The Trainer logs a step after its optimizer step, and
# saves a checkpoint right after logging it. When the guard trips at step S, it cancels step S's checkpoint
# (`control.should_save = False`), stops training, and the runner skips the final `save_model`: the weights produced
# by step S (and any later ones) are never written, so the newest complete checkpoint on disk is the one saved before
# step S, and `--resume_from_checkpoint true` restarts from it. That checkpoint was trained by steps whose logged loss
# and grad norm were finite; for the reward trigger, it holds the weights before the row that completed the patience
# window (steps of the window before it may have been saved, if they were save steps).
#
# A step is checked only if it is logged. So that no save step escapes the check when `logging_steps` is larger than
# `save_steps`, the guard asks the Trainer to log every step that is about to be saved (one extra metrics row at such
# steps, nothing else changes).
#
# The row of the bad step stays in metrics.jsonl (non-finite values are written as null): the record shows why the run
# stopped. A resume trims it with every other row after the checkpoint (`rlvr.runs.checkpoints.start_record`).

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

        control.should_save = False  # this step's weights are the bad ones: never written
        control.should_training_stop = True
        checkpoint, _ = last_complete_checkpoint(args.output_dir)
        kept = f"newest complete checkpoint: {checkpoint}; resume with --resume_from_checkpoint true" if checkpoint \
            else "no checkpoint was saved before it"
        self.stop = EarlyStop(f"error: diverged at step {state.global_step}: {problem or 'on another rank'}; "
                              f"step {state.global_step} was not saved; {kept}", DIVERGED_STATUS)
