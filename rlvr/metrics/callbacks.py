"""Callbacks that make the run readable: reward components, zero-std groups, rollouts, and the per-step ledger."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from transformers.trainer_callback import ExportableState

from rlvr.metrics.components import group_summary
from rlvr.metrics.keys import COUNTERS, ordered
from rlvr.metrics.reward_batch import RewardBatch, RewardBatchCallback
from rlvr.metrics.step_metrics import compute_step_metrics


class GroupStatsCallback(RewardBatchCallback):
    """`avg_<component>` and `zero_std_frac/<component>` for total, each reward, binary and penalty, every step, plus
    every registered `step/*` metric (`rlvr/metrics/step_metrics.py`)."""

    def on_rewards(self, args, state, control, batch: RewardBatch):
        summary = group_summary(batch.rewards_per_func, batch.names, batch.weights, batch.num_generations)
        return {**summary, **compute_step_metrics(batch)}


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
    """Prints one rollout per generation step and appends every rollout to `<output_dir>/rollouts.jsonl`."""

    def __init__(self, path: str | None = None, print_rollouts: bool = True):
        self.path = path
        self.print_rollouts = print_rollouts

    def on_rewards(self, args, state, control, batch: RewardBatch):
        if not state.is_world_process_zero or batch.mode != "train":
            return None
        components = {name: values.tolist() for name, values in batch.components().items()}
        records = [
            {
                "step": state.global_step,
                "round": batch.round,
                "group": i // batch.num_generations,
                "question": row.get("question"),
                "answer": row.get("answer"),
                "difficulty": row.get("difficulty"),
                "completion": completion,
                "completion_tokens": length,
                **{name: _finite(values[i]) for name, values in components.items()},
            }
            for i, (row, completion, length) in enumerate(zip(batch.rows, batch.completions, batch.completion_lengths))
        ]
        path = Path(self.path or Path(args.output_dir) / "rollouts.jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
        if self.print_rollouts and records and batch.round == 0:
            print(format_rollout(records[0]), flush=True)
        return None


ROLLOUT_FIELDS = ("step", "round", "group", "question", "answer", "difficulty", "completion", "completion_tokens")


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


class MetricsJsonlCallback(RewardBatchCallback):
    """Appends every logged row to a JSONL file (default `<output_dir>/metrics.jsonl`).

    On resume the rows logged after the checkpoint's step are dropped before appending, so the file never holds a
    step twice; a fresh run into a folder with an old file moves that file aside instead of overwriting it.
    """

    def __init__(self, path: str | None = None):
        self.path = path

    def _file(self, args) -> Path:
        return Path(self.path or Path(args.output_dir) / "metrics.jsonl")

    def on_train_begin(self, args, state, control, **kwargs):
        path = self._file(args)
        if not state.is_world_process_zero or not path.exists():
            return
        if state.global_step == 0:
            path.rename(path.with_name(f"{path.stem}.{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}"))
            return
        kept = [line for line in path.read_text().splitlines() if _row_step(line) <= state.global_step]
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in kept))
        tmp.replace(path)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        row = {"step": state.global_step, "epoch": state.epoch, "time": time.time()}
        row.update({key: _finite(value) for key, value in logs.items()})
        path = self._file(args)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def _row_step(line: str) -> float:
    try:
        return json.loads(line).get("step", math.inf)
    except ValueError:
        return math.inf  # a torn last line from a crash is dropped


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
