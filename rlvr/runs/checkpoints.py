"""Which checkpoint a run can resume from, and whether a folder's weights are whole.

transformers writes a checkpoint's weights first and `trainer_state.json` last, so a process killed mid-save leaves
a folder without (or with a torn) `trainer_state.json`, and `get_last_checkpoint` would pick it and fail.
`last_complete_checkpoint` takes the newest folder whose trainer_state.json parses and whose weights exist, and
reports the torn ones it passed over.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.runs import layout
from rlvr.runs.layout import SHARD_INDEXES, WEIGHT_FILES

CHECKPOINT = layout.CHECKPOINT


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


