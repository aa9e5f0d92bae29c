"""The run folder's lock: while a run writes into its folder it holds `<output_dir>/run.lock`.

The lock records host, pid, run id and start, and is an exclusive `flock` on the file, kept for the run's lifetime
and released by the kernel when the process ends, however it ends. A second run into the folder fails at once with
one line naming the holder. A lock file left by a killed run (its `flock` is free) is taken over with one line saying
so. Only the main process (global rank 0) takes the lock, so a run of N processes holds one lock; the other ranks
learn the outcome from rank 0 (`agree`).
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import ClassVar

import torch.distributed as dist

from rlvr.inputs import ConfigError, parse_json
from rlvr.runs import layout


def _holder(path: Path) -> dict:
    try:
        holder = parse_json(path.read_text())
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict) -> str:
    return (
        f"host {holder.get('host', '?')} pid {holder.get('pid', '?')}, run {holder.get('run_id', '?')}, "
        f"since {holder.get('since', '?')}"
    )


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError):
        return True  # another user's process, or an unreadable pid: assume it runs
    return True


class RunLock:
    """`<output_dir>/run.lock`, held by an exclusive flock for as long as this process runs the folder's run."""

    HELD: ClassVar[dict[str, RunLock]] = {}  # by folder, in this process: a process trains one run at a time

    def __init__(self, folder):
        self.folder = Path(folder)
        self.path = self.folder / layout.LOCK
        self.fd: int | None = None

    def in_use(self) -> str | None:
        """One line naming the live holder, if another process holds the lock now (read only)."""
        if str(self.folder.resolve()) in self.HELD or not self.path.exists():
            return None
        if not self.path.is_file():
            return f"{self.path} is not a file, and a run's lock must be one: remove it, or give another output_dir"
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return self._refusal(_holder(self.path))
        except OSError:  # no flock on this filesystem: the pid on this host decides
            holder = _holder(self.path)
            return self._refusal(holder) if not self._stale_without_flock(holder) else None
        finally:
            os.close(fd)
        return None

    def _refusal(self, holder: dict) -> str:
        return (
            f"{self.folder} is in use by another run ({_describe(holder)}; lock {self.path}): give this run "
            f"another output_dir, or wait for that one to end"
        )

    @staticmethod
    def _stale_without_flock(holder: dict) -> bool:
        return holder.get("host") == socket.gethostname() and not _alive(holder.get("pid"))

    def acquire(self, run_id: str) -> str | None:
        """Take the lock (a ConfigError naming the holder when another run has it); returns a line when it took over
        a stale lock file from a run that was killed."""
        key = str(self.folder.resolve())
        if key in self.HELD:  # this process prepared a run here that never trained (prepare() alone): its turn is over
            self.HELD.pop(key).release()
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ConfigError("output_dir", self._refusal(_holder(self.path))) from None
            except OSError as err:
                if err.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    os.close(fd)
                    raise
                holder = _holder(self.path)  # no flock here: host and pid decide
                if holder and not self._stale_without_flock(holder):
                    os.close(fd)
                    raise ConfigError("output_dir", self._refusal(holder)) from None
            try:
                if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                    break  # the file locked is the one at the path, not one a finishing run just unlinked
            except FileNotFoundError:
                pass
            os.close(fd)
        previous = _holder(self.path)
        record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "run_id": run_id,
            "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self.fd = fd
        self.HELD[key] = self
        if previous:
            return (
                f"[run] took over a stale lock in {self.folder} ({_describe(previous)}): that run no longer "
                f"holds it (killed, or its machine went away)"
            )
        return None

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            if os.stat(self.path).st_ino == os.fstat(self.fd).st_ino:
                self.path.unlink()
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None
        self.HELD.pop(str(self.folder.resolve()), None)


@atexit.register
def _release_all() -> None:
    for lock in list(RunLock.HELD.values()):
        lock.release()


def agree(error: ConfigError | None, training) -> None:
    """Rank 0's outcome on every rank: its ConfigError is raised there (one line) and ends the other ranks quietly
    with the same status, instead of leaving them waiting in the first collective."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        message = [None if error is None else (error.field, error.message)]
        dist.broadcast_object_list(message, src=0)
        if message[0] is not None and training.process_index != 0:
            sys.exit(2)
    if error is not None:
        raise error


def broadcast(value):
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]
    return value
