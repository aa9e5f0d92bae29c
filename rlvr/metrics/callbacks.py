"""Callbacks that make the run readable: reward components, zero-std groups, rollouts, and the per-step ledger."""

from __future__ import annotations

import json
import logging
import math
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from tqdm.auto import tqdm
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState, PrinterCallback, ProgressCallback
from transformers.utils import logging as transformers_logging

from rlvr.metrics.keys import (
    COUNTERS,
    DERIVED,
    EVAL_EXACT,
    EVAL_PREFIX,
    GENERATED_SAMPLES,
    KNOWN_ORDER,
    REWARD_PREFIX,
    ROLLOUT_FIELDS,
    TOKEN_RATES,
    TOTAL,
    TRAIN_RUNTIME,
    UNSCORED_PREFIX,
    ordered,
    reward_key,
    step_key,
    zero_std_key,
)
from rlvr.metrics.reward_batch import RewardBatch, RewardBatchCallback
from rlvr.runs import layout
from rlvr.runs.folder import RecordFile, start_record

METRICS = RecordFile(layout.METRICS, closing_keys=(TRAIN_RUNTIME,))  # TRL's closing row: a resume drops it
ROLLOUTS = RecordFile(layout.ROLLOUTS)


class RolloutLedger(RewardBatchCallback, ExportableState):
    """Counts generation steps, generated samples and completion tokens; saved in checkpoints so a resume continues.

    These are the compute axis: runs with different G or batch sizes compare fairly at equal generated samples.
    """

    def __init__(self):
        self.generation_step = 0
        self.generated_samples = 0
        self.generated_tokens = 0

    def on_rewards(self, args, state, control, batch: RewardBatch):
        if batch.mode != "train":
            return None
        self.generation_step += batch.round == 0
        self.generated_samples += batch.size
        self.generated_tokens += int(sum(batch.completion_lengths))
        return {key: float(getattr(self, key)) for key in COUNTERS}

    def state(self) -> dict:
        return {"args": {}, "attributes": {key: getattr(self, key) for key in COUNTERS}}


class RolloutLogCallback(RewardBatchCallback):
    """Appends every rollout to `<output_dir>/rollouts.jsonl` (resume and fresh-run handling:
    `rlvr.runs.folder.start_record`) and prints one, the first of its step, at the evaluation cadence: beside each
    held-out figure a reader sees what the policy writes, without a panel per step burying the step lines."""

    def __init__(self, path: str | None = None, print_rollouts: bool = True, console_steps: int | None = None):
        self.path = path
        self.print_rollouts = print_rollouts
        self.console_steps = console_steps  # the cadence when the run does not evaluate
        self.cadence = None

    def on_train_begin(self, args, state, control, **kwargs):
        path = Path(self.path or Path(args.output_dir) / ROLLOUTS.name)
        if state.is_world_process_zero and (note := start_record(path, state.global_step, ROLLOUTS)):
            print(f"[records] {note}", flush=True)
        evaluates = args.eval_strategy == "steps" and state.eval_steps
        self.cadence = Cadence(state, state.eval_steps if evaluates else self.console_steps)

    def on_rewards(self, args, state, control, batch: RewardBatch):
        if not state.is_world_process_zero or batch.mode != "train":
            return
        components = {name: values.tolist() for name, values in batch.components().items()}
        exact = batch.exact().tolist()
        truncated = batch.truncated or [None] * batch.size
        records = [
            {
                "step": state.global_step + 1,  # the optimizer step these rollouts are for, as metrics.jsonl numbers it
                "round": batch.round,
                "group": i // batch.num_generations,
                "question": row.get("question"),
                "answer": row.get("answer"),
                "difficulty": row.get("difficulty"),
                "task": row.get("task"),
                "completion": completion,
                "completion_tokens": length,
                "exact": exact[i],  # the extracted answer is exactly right (format aside)
                "truncated": truncated[i],  # cut off at max_completion_length: no EOS (step/truncated)
                **{name: _finite(values[i]) for name, values in components.items()},
            }
            for i, (row, completion, length) in enumerate(zip(batch.rows, batch.completions, batch.completion_lengths))
        ]
        path = Path(self.path or Path(args.output_dir) / ROLLOUTS.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
        if self.print_rollouts and records and batch.round == 0 and self.cadence.shows(state.global_step + 1):
            print(format_rollout(records[0]), flush=True)
        return


def format_rollout(record: dict) -> str:
    components = [key for key in record if key not in ROLLOUT_FIELDS]
    scores = "  ".join(f"{k}={record[k]:.2f}" for k in ordered(components) if record.get(k) is not None)
    return (
        f"── rollout · step {record['step']} ──\n"
        f"question:   {record['question']}\n"
        f"answer:     {record['answer']}\n"
        f"completion: {record['completion']!r}\n"
        f"rewards:    {scores}"
    )


class MetricsJsonlCallback(TrainerCallback):
    """Appends every logged row to a JSONL file (default `<output_dir>/metrics.jsonl`).

    Resume and fresh-run handling is `rlvr.runs.folder.start_record`, the policy every record file shares.
    """

    def __init__(self, path: str | None = None, closing: Callable[[dict], dict] | None = None):
        self.path = path
        self.closing = closing  # what the closing row adds (a run stopped early: its line; rlvr.training.stopping)

    def _file(self, args) -> Path:
        return Path(self.path or Path(args.output_dir) / METRICS.name)

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and (note := start_record(self._file(args), state.global_step, METRICS)):
            print(f"[records] {note}", flush=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row = {"step": state.global_step, "epoch": state.epoch, "time": time.time()}
        row.update({key: _finite(value) for key, value in logs.items()})
        if self.closing is not None and TRAIN_RUNTIME in logs:
            row.update(self.closing(logs))
        path = self._file(args)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class Cadence:
    """Which steps the console shows: the first step this process trains (a run's first, or its resumption's), then
    every `every` steps (None: every logged step, `logging_steps`), and the last."""

    def __init__(self, state, every: float | None):
        self.first, self.last = state.global_step + 1, state.max_steps
        self.every = max(1, int(every or state.logging_steps or 1))

    def shows(self, step: int) -> bool:
        return step in (self.first, self.last) or step % self.every == 0


# ---- the console line: one compact line per logging step that `Cadence` shows (every `console_steps`), where
# TRL/transformers print a ~60-key dict at every log (the row still goes whole to metrics.jsonl): step, generated
# samples, the reward components, zero_std, the cut-off share, generated tokens per second of generation and of step
# time, and the time per step, e.g. `step 12/200 | samples 192 | correctness 0.312 total 0.688 | zero_std 0.25 |
# cut 0.06 | tok/s generation 812 step 240 | 3.42 s/step`. `quiet_console` keeps transformers' progress bar on a
# terminal and drops its dict printing.

MAX_WIDTH = 200  # one terminal line, even with custom reward components
SHOWN = ("correctness", "format", "success", TOTAL)  # the components every line shows, when the run has them
HIDDEN = tuple(c for c in DERIVED if c not in SHOWN)  # left to metrics.jsonl (binary mirrors exact correctness)


def _write(line: str) -> None:
    tqdm.write(line)  # above a live progress bar instead of through it


def components_of(row: dict, prefix: str = "") -> list[str]:
    """The reward components in a row: the usual ones first, then custom rewards (derived ones left out)."""
    present = [key[len(prefix) + len(REWARD_PREFIX) :] for key in row if key.startswith(prefix + REWARD_PREFIX)]
    custom = [c for c in present if c not in SHOWN and c not in KNOWN_ORDER and c not in HIDDEN]
    return [c for c in SHOWN if c in present] + custom


def format_line(row: dict, step: int, max_steps: int | None, seconds_per_step: float | None, prefix: str = "") -> str:
    """One line of at most MAX_WIDTH characters for a logged row (`prefix` "eval_" for an evaluation row)."""
    head = f"step {step}/{max_steps}" if max_steps and max_steps > 0 else f"step {step}"
    parts = [f"eval {head}" if prefix else head]
    if GENERATED_SAMPLES in row:
        parts.append(f"samples {int(row[GENERATED_SAMPLES])}")
    rewards = " ".join(f"{c} {_number(row[prefix + reward_key(c)])}" for c in components_of(row, prefix))
    if rewards:
        parts.append(rewards)
    unscored = {key.rsplit("/", 1)[1]: v for key, v in row.items() if key.startswith(prefix + UNSCORED_PREFIX) and v}
    if unscored:  # completions a reward returned None or NaN for: its mean above is over the others only
        parts.append("unscored " + " ".join(f"{name} {share:.2f}" for name, share in unscored.items()))
    if (exact := row.get(EVAL_EXACT)) is not None:  # rlvr evaluate's exact match (rlvr/metrics/held_out.py)
        parts.append(f"held-out exact {exact:.3f}")
    zero_std = row.get(prefix + zero_std_key(TOTAL))
    if zero_std is not None:
        parts.append(f"zero_std {zero_std:.2f}")
    truncated = row.get(prefix + step_key("truncated"))
    if truncated is not None:
        parts.append(f"cut {truncated:.2f}")
    if rates := {key.rsplit("/", 1)[1]: row[key] for key in TOKEN_RATES if key in row}:
        parts.append("tok/s " + " ".join(f"{name} {value:.0f}" for name, value in rates.items()))
    if seconds_per_step is not None:
        parts.append(f"{seconds_per_step:.2f} s/step")
    line = " | ".join(parts)
    return line if len(line) <= MAX_WIDTH else line[: MAX_WIDTH - 3] + "..."


def _number(value) -> str:
    """A logged mean: TRL logs None for a reward with no scored completion in the window."""
    return "-" if value is None else f"{value:.3f}"


class ConsoleLineCallback(TrainerCallback):
    """Prints `format_line` for each evaluation row and for the training rows of the steps `console_steps` shows, on
    the main process; seconds per step are wall time between two printed lines."""

    def __init__(self, console_steps: int | None = None):
        self.console_steps = console_steps
        self._last = None  # (time, step) at the previous printed line
        self.cadence = None

    def on_train_begin(self, args, state, control, **kwargs):
        self._last = (time.perf_counter(), state.global_step)
        self.cadence = Cadence(state, self.console_steps)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if TRAIN_RUNTIME in logs:
            _write(f"trained {state.global_step} steps in {logs[TRAIN_RUNTIME]:.1f} s")
            return
        prefix = EVAL_PREFIX if any(key.startswith(EVAL_PREFIX) for key in logs) else ""
        if not prefix and not self.cadence.shows(state.global_step):
            return
        seconds = None
        if not prefix and self._last is not None:
            now, steps = time.perf_counter(), state.global_step - self._last[1]
            seconds = (now - self._last[0]) / steps if steps > 0 else None
            self._last = (now, state.global_step)
        _write(format_line(logs, state.global_step, state.max_steps, seconds, prefix))


class QuietProgressCallback(ProgressCallback):
    """transformers' progress bar, one line for the run: without the dict it writes above the bar at every log, and
    without the evaluation's second bar under it (whose closing moves the cursor up)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        return None

    def on_prediction_step(self, args, state, control, **kwargs):
        return None


class _DropMessage:
    """A logging filter that drops records whose message starts with one known text."""

    def __init__(self, start: str):
        self.start = start

    def filter(self, record) -> bool:
        return not record.getMessage().startswith(self.start)


def silence_known_warnings() -> None:
    """Library warnings that every run printed and no recipe can act on, silenced by their exact message:

    * DeepSpeed, on a machine without a GPU: "Setting accelerator to CPU. If you have GPU or other accelerator, we
      were unable to detect it." It is printed when DeepSpeed is imported (transformers and accelerate import it when
      installed) and states the CPU fallback, which is what a CPU run wants; on a GPU it is never printed, so a GPU
      that fails to show up still fails loudly (CUDA errors, `use_cpu` checks), not through this line.
    * transformers 5: "`is_gradient_checkpointing` is deprecated" (FutureWarning), which TRL 1.16 reads at every
      generation: TRL's call, not ours, and the attribute still works.
    """
    logging.getLogger("DeepSpeed").addFilter(_DropMessage("Setting accelerator to CPU."))
    warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)


def quiet_console(trainer) -> None:
    """Replace the default progress/printer callback's dict printing by `ConsoleLineCallback`'s line (which the
    runner adds with the other callbacks). The progress bar stays on a terminal unless `disable_tqdm`; into a file or
    a pipe (a log) it is left out, since it redraws itself with carriage returns and cursor moves there, and the step
    lines say how far the run is."""
    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    if not trainer.args.disable_tqdm and is_terminal():
        trainer.add_callback(QuietProgressCallback)


def is_terminal() -> bool:
    """Whether the progress bars' stream (stderr) is a terminal."""
    return sys.stderr.isatty()


def quiet_progress_bars() -> None:
    """transformers' own bars (loading weights) are left out when stderr is not a terminal (`quiet_console`)."""
    if not is_terminal():
        transformers_logging.disable_progress_bar()
