"""Which checkpoint a run can resume from, and whether a folder's weights are whole.

transformers writes a checkpoint's weights first and `trainer_state.json` last, so a process killed mid-save leaves
a folder without (or with a torn) `trainer_state.json`, and `get_last_checkpoint` would pick it and fail.
`last_complete_checkpoint` takes the newest folder whose trainer_state.json parses and whose weights exist, and
reports the torn ones it passed over.

A full disk (or an exceeded quota) while a run writes ends it with one line naming the newest complete checkpoint,
exit 1 (`disk_full_exits`). The previous checkpoint survives a failed save: transformers writes `trainer_state.json`
last and rotates old checkpoints only after it, and `last_complete_checkpoint` passes over the torn folder
(docs/reliability.md). A full disk shows up as `OSError(ENOSPC | EDQUOT)`, torch.save's RuntimeError "file write
failed" or safetensors' "StorageFull": `is_disk_full` reads them all along the cause/context chain.
"""

from __future__ import annotations

import errno
import sys
import zipfile
from contextlib import contextmanager
from pathlib import Path

from rlvr.inputs import (
    ConfigError,
    name_inside,
    one_line,
    parse_json,
    read_allowed_pickle,
    refuse_special_file,
)
from rlvr.runs import layout
from rlvr.runs.layout import SHARD_INDEXES, WEIGHT_FILES


def checkpoint_problem(path) -> str | None:
    """Why a checkpoint folder cannot be resumed from (None when it can): a readable state and whole weights."""
    path = Path(path)
    try:
        refuse_special_file(path / layout.TRAINER_STATE, "resume_from_checkpoint")  # a FIFO would never answer
        state = parse_json((path / layout.TRAINER_STATE).read_text())
    except FileNotFoundError:
        return "no trainer_state.json"
    except (OSError, ValueError):
        return "unreadable trainer_state.json"
    if not isinstance(state, dict) or "global_step" not in state:
        return "trainer_state.json has no global_step"
    return weights_problem(path, required=True)


# What transformers `torch.load`s from a checkpoint on resume (RNG states, optimizer, scheduler, AMP scaler) and from
# a model folder (.bin weights); a checkpoint's training_args.bin is never loaded on resume.
PICKLED = ("rng_state*.pth", "optimizer.pt", "scheduler.pt", "scaler.pt", "*.bin")


def check_pickles(folder) -> None:
    """Every pickled file transformers would load from a checkpoint or model folder, opened now under torch's
    weights-only unpickler, with transformers' own allowance for numpy's RNG state (`read_allowed_pickle`: tensors
    memory-mapped, not read). One that names anything else, or is damaged, is one `ConfigError` naming the file,
    before any model loads: transformers would refuse it too, but as a traceback after the model had loaded."""
    # start-up: transformers' trainer utilities import torch; only a folder with pickles needs them
    from transformers.trainer_pt_utils import safe_globals

    folder = Path(folder)
    files = sorted({path for pattern in PICKLED for path in folder.glob(pattern) if path.name != layout.TRAINING_ARGS})
    for path in files:
        try:
            with safe_globals():
                read_allowed_pickle(path, str(path), [])
        except ConfigError as err:
            why = err.message.removeprefix(f"{path} not read: ")
            raise ConfigError(
                str(path), f"refused before the model loads (a pickle, read weights-only): {why}"
            ) from None


def check_best_checkpoint(checkpoint) -> None:
    """The `best_model_checkpoint` a checkpoint's trainer_state.json names is a checkpoint folder beside it
    (`name_inside`), or gone (transformers then drops it): transformers keeps it through checkpoint rotation and
    loads its weights at the end under `load_best_model_at_end`, so a path elsewhere is one `ConfigError` naming the
    file, before any model loads."""
    folder, path = Path(checkpoint).parent, Path(checkpoint) / layout.TRAINER_STATE
    try:
        best = parse_json(path.read_text()).get("best_model_checkpoint")
    except (OSError, ValueError, AttributeError):
        return  # `checkpoint_problem`'s to say
    if best is None or (isinstance(best, str) and not Path(best).is_dir()):
        return
    if not isinstance(best, str) or Path(best).parent.resolve() != folder.resolve():
        raise ConfigError(str(path), f"best_model_checkpoint {str(best)[:80]!r} is not a checkpoint folder of {folder}")
    name_inside(folder, Path(best).name, str(path), "best_model_checkpoint")


def last_complete_checkpoint(output_dir) -> tuple[str | None, list[tuple[str, str]]]:
    """(newest resumable checkpoint folder or None, [(torn folder, why)] for the newer ones passed over)."""
    root = Path(output_dir)
    if not root.is_dir():
        return None, []
    found = sorted(
        ((int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := layout.CHECKPOINT.match(p.name))),
        reverse=True,
    )
    skipped = []
    for _, path in found:
        problem = checkpoint_problem(path)
        if problem is None:
            return str(path), skipped
        skipped.append((str(path), problem))
    return None, skipped


def weights_problem(folder: Path, required: bool = False) -> str | None:
    """THE weights check: why a folder's weights cannot be loaded whole (None when they can): a missing shard, or a
    file empty or cut short (its size is checked against what its header describes; nothing but the headers is
    read). A checkpoint (`required`) must hold weights; a model folder without them is a problem only when it has a
    config.json. The recipe's model folder (`validation.check_model_folder`) and resume's checkpoints both ask here."""
    for index in SHARD_INDEXES:
        if (folder / index).exists():
            try:
                refuse_special_file(folder / index, "weights")
                shards = sorted(set(parse_json((folder / index).read_text())["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
                return f"{folder / index} is not a weight index ({one_line(err)})"
            try:  # a shard is a file of this folder: `../../etc/hostname` is not opened, let alone loaded
                for shard in shards:
                    name_inside(folder, shard, "weights", "shard")
            except ConfigError as err:
                return f"{folder / index} lists a shard outside {folder}: {err.message}"
            missing = [s for s in shards if not (folder / s).is_file()]
            if missing:
                return f"{folder / index} lists {missing[0]}, which is not in {folder}"
            return next((p for p in (_weight_file_problem(folder / s) for s in shards) if p), None)
    files = [folder / name for name in WEIGHT_FILES if (folder / name).exists()]
    if not files:
        if required:
            return "no model weights"
        if (folder / "config.json").exists():
            return f"{folder} has config.json but no model weights ({', '.join(WEIGHT_FILES[:2])})"
        return None
    return next((p for p in map(_weight_file_problem, files) if p), None)


def _weight_file_problem(path: Path) -> str | None:
    try:
        refuse_special_file(path, "weights")
        size = path.stat().st_size
        if size == 0:
            return f"{path} is empty"
        with path.open("rb") as f:
            head = f.read(8)
            if path.suffix == ".safetensors":
                if len(head) < 8:
                    return f"{path} is cut short ({size} bytes, less than a safetensors header)"
                length = int.from_bytes(head, "little")
                if length > size - 8:
                    return f"{path} is cut short: its header alone should be {length} bytes, the file has {size}"
                header = parse_json(f.read(length))
                end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
                if 8 + length + end > size:
                    return f"{path} is cut short: {size} bytes, its header describes {8 + length + end}"
            elif head[:2] == b"PK" and not zipfile.is_zipfile(path):  # torch.save's zip format, cut short
                return f"{path} is cut short (its zip directory is missing)"
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as err:
        return f"{path} is not a readable weights file ({one_line(err)})"
    return None


DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
DISK_FULL_TEXT = ("no space left on device", "disk quota exceeded", "storagefull", "file write failed")
DISK_FULL_STATUS = 1


def is_disk_full(err: BaseException | None) -> bool:
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in DISK_FULL_ERRNOS:
            return True
        if any(text in str(err).lower() for text in DISK_FULL_TEXT):
            return True
        err = err.__cause__ or err.__context__
    return False


def disk_full_line(err: BaseException, output_dir: str) -> str:
    where = f" writing {err.filename}" if isinstance(err, OSError) and err.filename else ""
    reason = err.strerror if isinstance(err, OSError) and err.strerror else " ".join(str(err).split())[:200]
    checkpoint, _ = last_complete_checkpoint(output_dir)
    kept = (
        f"newest complete checkpoint: {checkpoint}; free space and rerun with --resume_from_checkpoint true"
        if checkpoint
        else "no complete checkpoint was saved"
    )
    return f"error: disk: {reason}{where} (under {output_dir}); {kept}"


@contextmanager
def disk_full_exits(output_dir: str):
    """Around training and the final save: a full disk ends the process with `disk_full_line`, no traceback."""
    try:
        yield
    except Exception as err:
        if not is_disk_full(err):
            raise
        print(disk_full_line(err, output_dir), file=sys.stderr, flush=True)
        sys.exit(DISK_FULL_STATUS)
