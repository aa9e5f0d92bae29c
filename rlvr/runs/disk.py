"""A full disk (or an exceeded quota) while a run writes: one line, the newest complete checkpoint named, exit 1.

The previous checkpoint survives a failed save: transformers writes `trainer_state.json` last and rotates old
checkpoints only after it, and `last_complete_checkpoint` passes over the torn folder (docs/reliability.md). A full
disk shows up as `OSError(ENOSPC | EDQUOT)`, torch.save's RuntimeError "file write failed" or safetensors'
"StorageFull": `is_disk_full` reads them all along the cause/context chain.
"""

from __future__ import annotations

import errno
import sys
from contextlib import contextmanager

from rlvr.runs.checkpoints import last_complete_checkpoint

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
