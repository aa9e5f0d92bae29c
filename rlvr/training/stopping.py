"""How a run stops before max_steps, all in one place: preemption (SIGTERM, SIGINT), divergence and the sample budget
(below). docs/reliability.md, "Preemption and divergence", says what a user sees; docs/algorithms.md the budget.

Preemption. The handler only records the signal (stopping inside it could tear an optimizer step or a file write).
At the end of the current optimizer step (`on_step_end`) the callback asks the Trainer to save a checkpoint
(`control.should_save`, whatever `save_strategy` says) and to stop; the Trainer saves it right after through its
ordinary checkpoint path (weights, optimizer, scheduler, RNG, the stateful callbacks), and the record files were
written up to that step. With several processes the ranks all-reduce the flag (a max) at every step end, so all stop
after the same step. Exit status 128 + the signal; a second signal ends the process at once (the default action).
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
from rlvr.metrics.keys import DERIVED, GRAD_NORM, LOSS, STOPPED_EARLY, TOTAL, TRAIN_RUNTIME, reward_key
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


def closing_note(logs: dict, callbacks) -> dict:
    """What the closing row (train_runtime) of a run the callbacks stopped early adds: its stop line. TRL closes a
    stopped run as it closes a finished one; with this the records tell them apart (`Run.finished`)."""
    stop = early_stop(callbacks) if TRAIN_RUNTIME in logs else None
    return {STOPPED_EARLY: stop.line} if stop else {}


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


# ---- divergence: a run whose loss or grad norm turns NaN/inf (`divergence_guard`, on by default), or whose mean
# reward stays below `min_mean_reward` for `min_mean_reward_patience` logged rows, stops unsaved (docs/reliability.md).
# The Trainer logs a step after its optimizer step and saves right after logging it, so the guard, tripping at step S
# in `on_log`, cancels S's checkpoint and the runner skips the final save: the newest complete checkpoint is the last
# good one. So that no save step escapes the check, the guard has every step about to be saved logged. The bad row
# stays in metrics.jsonl (non-finite values as null); a resume trims it with the rest (`folder.start_record`).

NON_FINITE_KEYS = (LOSS, GRAD_NORM)
DIVERGED_STATUS = 1


def check_divergence_fields(args, reward_names) -> None:
    """The reward trigger's component must be one the run logs as `avg_<component>`."""
    components = (*DERIVED, *reward_names)
    if args.min_mean_reward_component not in components:
        raise ConfigError(
            "min_mean_reward_component",
            f"must be one of {', '.join(components)}, got {args.min_mean_reward_component!r}",
        )


class DivergenceGuard(TrainerCallback):
    """See the module docstring. `stop` is set (an `EarlyStop`) when the guard trips."""

    def __init__(
        self, non_finite: bool = True, min_mean_reward: float | None = None, component: str = TOTAL, patience: int = 1
    ):
        self.non_finite = non_finite
        self.min_mean_reward = min_mean_reward
        self.key = reward_key(component)
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
                return (
                    f"{self.key} is {value:.4g}, below min_mean_reward {self.min_mean_reward:g} for "
                    f"{self.below} logged step(s)"
                )
        return None

    def on_log(self, args, state, control, logs=None, **kwargs):
        problem = self.problem(logs or {}) if self.stop is None else None
        if not any_rank(problem is not None, args.device):
            return

        control.should_save = False  # this step's weights are the bad ones: never written
        control.should_training_stop = True
        checkpoint, _ = last_complete_checkpoint(args.output_dir)
        kept = (
            f"newest complete checkpoint: {checkpoint}; resume with --resume_from_checkpoint true"
            if checkpoint
            else "no checkpoint was saved before it"
        )
        self.stop = EarlyStop(
            f"error: diverged at step {state.global_step}: {problem or 'on another rank'}; "
            f"step {state.global_step} was not saved; {kept}",
            DIVERGED_STATUS,
        )


# ---- the sample budget (`max_generated_samples`, docs/algorithms.md): runs compared at equal generation compute.
# DAPO's resampling generated 1.9x GRPO's samples in the same 140 steps; a cosine over samples generated / budget ends
# at the budget however many steps that takes (`rlvr.training.trainer.SampleScheduleMixin`).


class SampleBudgetCallback(TrainerCallback):
    """Stops training once the ledger (`rlvr.metrics.callbacks.RolloutLedger`) has counted `budget` generated samples.
    A finished run, not an early stop: the final policy is saved."""

    def __init__(self, ledger, budget: int):
        self.ledger, self.budget = ledger, budget

    def on_step_end(self, args, state, control, **kwargs):
        if self.ledger.generated_samples >= self.budget and not control.should_training_stop:
            control.should_training_stop = True
            if state.is_world_process_zero and state.global_step < state.max_steps:
                print(
                    f"[budget] {self.ledger.generated_samples} generated samples >= max_generated_samples "
                    f"{self.budget}: stopping at step {state.global_step} of max_steps {state.max_steps}",
                    flush=True,
                )
        return control
