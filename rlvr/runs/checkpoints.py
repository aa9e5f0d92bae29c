"""What a run folder holds after a crash, and the one policy for every file a run appends to per step.

Checkpoints. transformers writes a checkpoint's weights first and `trainer_state.json` last, so a process killed
mid-save leaves a folder without (or with a torn) `trainer_state.json`, and `get_last_checkpoint` would pick it and
fail. `last_complete_checkpoint` takes the newest folder whose trainer_state.json parses and whose weights exist,
and reports the torn ones it passed over.

Record files (metrics.jsonl, rollouts.jsonl, anything in `RECORDS`) are append-only while training, so a resume or
a fresh run into an old folder must decide what happens to rows already there. One rule for all of them
(`start_record`):

  * resume from a checkpoint at step C: rows describing steps after C are dropped (they are about to be redone),
    and a torn last line from the crash goes with them; rows up to C stay, so every step appears exactly once;
  * fresh run (step 0) into a folder with an old file: the old file is moved aside to `<name>.<timestamp>.jsonl`,
    never mixed in and never deleted.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from rlvr.runs import layout

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", "adapter_model.bin")
SHARD_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
CHECKPOINT = layout.CHECKPOINT


@dataclass(frozen=True)
class RecordFile:
    """An append-only JSONL a run writes per step. Every record file numbers its rows alike: `step` is the optimizer
    step the row describes, 1-based (metrics.jsonl's row after step 1 and the rollouts generated for step 1 both say
    1), so one step number joins them and a resume keeps rows up to the checkpoint's step."""

    name: str
    closing_keys: tuple = ()  # rows written once at the end of training; a resume drops them (the run goes on)

    def keeps(self, row: dict, checkpoint_step: int) -> bool:
        if any(key in row for key in self.closing_keys):
            return False
        step = row.get("step")
        return isinstance(step, (int, float)) and step <= checkpoint_step


METRICS = RecordFile(layout.METRICS, closing_keys=("train_runtime",))
ROLLOUTS = RecordFile(layout.ROLLOUTS)
RECORDS = {record.name: record for record in (METRICS, ROLLOUTS)}


def checkpoint_problem(path) -> str | None:
    """Why a checkpoint folder cannot be resumed from (None when it can): a readable state and the weights."""
    path = Path(path)
    try:
        state = json.loads((path / layout.TRAINER_STATE).read_text())
    except FileNotFoundError:
        return "no trainer_state.json"
    except (OSError, ValueError):
        return "unreadable trainer_state.json"
    if not isinstance(state, dict) or "global_step" not in state:
        return "trainer_state.json has no global_step"
    for index in SHARD_INDEXES:
        if (path / index).exists():
            try:
                shards = set(json.loads((path / index).read_text())["weight_map"].values())
            except (OSError, ValueError, KeyError):
                return f"unreadable {index}"
            missing = [s for s in shards if not (path / s).exists()]
            return f"missing weight shard {missing[0]}" if missing else None
    if not any((path / name).exists() and (path / name).stat().st_size > 0 for name in WEIGHT_FILES):
        return "no model weights"
    return None


def last_complete_checkpoint(output_dir) -> tuple[str | None, list[tuple[str, str]]]:
    """(newest resumable checkpoint folder or None, [(torn folder, why)] for the newer ones passed over)."""
    root = Path(output_dir)
    if not root.is_dir():
        return None, []
    found = sorted(
        ((int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := CHECKPOINT.match(p.name))), reverse=True
    )
    skipped = []
    for _, path in found:
        problem = checkpoint_problem(path)
        if problem is None:
            return str(path), skipped
        skipped.append((str(path), problem))
    return None, skipped


def start_record(path, global_step: int, record: RecordFile | None = None) -> str | None:
    """Apply the resume / fresh-run policy to one record file at train begin; returns what was done, if anything."""
    path = Path(path)
    if not path.exists():
        return None
    record = record or RECORDS.get(path.name, RecordFile(path.name))
    if global_step == 0:
        aside = path.with_name(f"{path.stem}.{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
        path.rename(aside)
        return f"moved the previous run's {path.name} aside to {aside.name}"
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            row = None  # a torn line from the crash
        if isinstance(row, dict) and record.keeps(row, global_step):
            kept.append(line)
        else:
            dropped += 1
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)
    return f"kept {len(kept)} rows of {path.name} up to step {global_step}, dropped {dropped}" if dropped else None
