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

import os
import signal
import threading
from dataclasses import dataclass

from transformers import TrainerCallback

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
    import torch
    import torch.distributed as dist

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
