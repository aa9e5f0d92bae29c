"""Callbacks that make the run readable: reward components, zero-std groups, rollouts, and the per-step ledger."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from rlvr.metrics.keys import COUNTERS, STOPPED_EARLY, ordered
from rlvr.metrics.batch_readings import batch_readings
from rlvr.metrics.reward_batch import RewardBatch, RewardBatchCallback
from rlvr.training.preemption import early_stop
from rlvr.training.run_files import METRICS, ROLLOUTS, start_record


class GroupStatsCallback(RewardBatchCallback):
    """`avg_<component>` and `zero_std_frac/<component>` for total, each reward (success included), binary and penalty,
    every step, `zero_std_side/*`, plus every registered `step/*` metric (`rlvr/metrics/step_metrics.py`); all read
    the batch's components, computed once (`rlvr.metrics.batch_readings`). On a plain `trl.GRPOTrainer`,
    `with_readings(trainer)` feeds it; without that it stops the run after one step instead of logging nothing."""

    def on_rewards(self, args, state, control, batch: RewardBatch):
        return batch_readings(batch)


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
    """Prints one rollout per generation step and appends every rollout to `<output_dir>/rollouts.jsonl`
    (resume and fresh-run handling: `rlvr.training.run_files.start_record`)."""

    def __init__(self, path: str | None = None, print_rollouts: bool = True):
        self.path = path
        self.print_rollouts = print_rollouts

    def on_train_begin(self, args, state, control, **kwargs):
        path = Path(self.path or Path(args.output_dir) / ROLLOUTS.name)
        if state.is_world_process_zero and (note := start_record(path, state.global_step, ROLLOUTS)):
            print(f"[records] {note}", flush=True)

    def on_rewards(self, args, state, control, batch: RewardBatch):
        if not state.is_world_process_zero or batch.mode != "train":
            return None
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
        if self.print_rollouts and records and batch.round == 0:
            print(format_rollout(records[0]), flush=True)
        return None


ROLLOUT_FIELDS = ("step", "round", "group", "question", "answer", "difficulty", "task", "completion", "completion_tokens",
                  "exact", "truncated")


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

    Resume and fresh-run handling is `rlvr.training.run_files.start_record`, the policy every record file shares.
    """

    def __init__(self, path: str | None = None, stops=()):
        self.path = path
        self.stops = stops  # callbacks that may end the run early: their line goes into the closing row

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
        if "train_runtime" in logs and (stop := early_stop(self.stops)):
            row[STOPPED_EARLY] = stop.line  # TRL closes a stopped run as a finished one: this row says otherwise
        path = self._file(args)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
