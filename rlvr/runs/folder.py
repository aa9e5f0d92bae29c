"""One run per folder: claiming it (lock, run id, run.json) and what a fresh start does with an earlier run.

A run from step 0 into a folder that holds an earlier run moves every file that run wrote into
`previous-runs/<its id>/` and says so in one line; files a run does not write stay (docs/reliability.md). Record
files (metrics.jsonl, rollouts.jsonl: a `RecordFile` each, defined by their writers) are append-only, and one rule says what happens to rows already
there (`start_record`): on resume from step C, rows after C (and a torn last line) are dropped, so every step appears
once; at step 0 a file still there (a record path outside the claimed folder, or callbacks used without the runner)
moves aside by the same policy as a whole run (`move_aside`). The run's identity and what a resume may change are
rlvr/runs/resume.py.

The lock (`RunLock`): while a run writes into its folder it holds an exclusive `flock` on `<output_dir>/run.lock`,
which the kernel releases however the process ends; only the main process (global rank 0) takes it, and the other
ranks learn the outcome from rank 0 (`agree`). What a second run, or a killed one's lock file, meets:
docs/reliability.md ("No two writers").
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import os
import re
import secrets
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch.distributed as dist

from rlvr.inputs import ConfigError, check_writable_folder, parse_json
from rlvr.runs import layout
from rlvr.runs.layout import SHARD_INDEXES, WEIGHT_FILES
from rlvr.runs.resume import ALLOW_FLAG, Resume, checkpoint_step, describe_changes, read_run_json

# What a run (and the commands that describe it) writes at the top of its folder; a fresh start moves these aside.
RUN_RECORDS = (
    layout.RUN,
    layout.CONFIG,
    layout.CODE,
    layout.METRICS,
    layout.ROLLOUTS,
    layout.REWARD_ERROR,
    layout.REPORT,
    layout.PLOTS_DIR,
    layout.SUMMARY_JSON,
    layout.SUMMARY_CSV,
    layout.SUMMARY_MD,
    layout.EVAL_DIR,
    layout.BEFORE_AFTER_DIR,
    layout.SPEEDRUN,
    layout.SPEEDRUN_DIR,
)
FINAL_MODEL = (
    "config.json",
    "generation_config.json",
    layout.TRAINING_ARGS,
    "README.md",
    "chat_template.jinja",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "adapter_config.json",
    *WEIGHT_FILES,
    *SHARD_INDEXES,
)
WRITTEN_BY_A_RUN = re.compile(r"^(checkpoint-\d+|(model|pytorch_model|adapter_model)-\d+-of-\d+\.(safetensors|bin))$")
# Any of these means the folder holds a run (README.md or config.json alone could be anything).
RUN_MARKERS = (layout.RUN, layout.CONFIG, layout.METRICS, layout.ROLLOUTS, *WEIGHT_FILES, *SHARD_INDEXES)


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


# ---------------------------------------------------------------- the lock


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


# ---------------------------------------------------------------- fresh start: the earlier run moves aside


def earlier_run_files(folder) -> list[Path]:
    """The entries of `folder` an earlier run wrote (empty when the folder holds no run)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    entries = sorted(folder.iterdir())
    names = {p.name for p in entries}
    if not (names & set(RUN_MARKERS) or any(layout.CHECKPOINT.match(n) for n in names)):
        return []
    return [p for p in entries if p.name in RUN_RECORDS or p.name in FINAL_MODEL or WRITTEN_BY_A_RUN.match(p.name)]


def move_aside(folder: Path, files: list[Path], name: str) -> Path:
    """THE fresh-start policy, for a whole earlier run and for a lone record file alike: the files move into
    `previous-runs/<name>/` beside them (`<name>.2`, ... when taken), never deleted, never mixed with the new run."""
    target = folder / layout.PREVIOUS_RUNS / name
    for i in range(2, 1000):
        if not target.exists():
            break
        target = folder / layout.PREVIOUS_RUNS / f"{name}.{i}"
    target.mkdir(parents=True)
    for path in files:
        path.rename(target / path.name)
    return target


def unnamed() -> str:
    return f"unnamed-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"


def move_earlier_run_aside(folder) -> str | None:
    """Move an earlier run's files into `previous-runs/<its id>/`; one line saying what moved where, or None."""
    folder = Path(folder)
    files = earlier_run_files(folder)
    if not files:
        return None
    old = read_run_json(folder)
    name = old["run_id"] if old else unnamed()
    target = move_aside(folder, files, name)
    checkpoints = sorted((p.name for p in files if layout.CHECKPOINT.match(p.name)), key=lambda n: int(n.split("-")[1]))
    parts = [*checkpoints, *(["the final model"] if any(p.name in WEIGHT_FILES for p in files) else []), "records"]
    return f"[run] {folder} held an earlier run ({name}: {', '.join(parts)}): moved to {target}/"


# ---------------------------------------------------------------- resume: the same run, the same recipe


# ---------------------------------------------------------------- the whole claim


@dataclass
class RunFolder:
    """The folder a run holds: its id and its lock (released by `release`, at exit at the latest)."""

    path: Path
    run_id: str
    lock: RunLock | None

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()


def refuse_if_in_use(recipe) -> None:
    """A second run into a folder a live run holds fails at once, before anything else is checked."""
    error = None
    if recipe.training.process_index == 0:
        try:
            check_writable_folder(recipe.training.output_dir, "output_dir")  # a folder the lock can be made in
            line = RunLock(recipe.training.output_dir).in_use()
            error = ConfigError("output_dir", line) if line else None
        except ConfigError as err:
            error = err
    agree(error, recipe.training)


def check_model_outside(recipe, resume: Resume) -> None:
    """A fresh start moves the folder's earlier run aside: the model to train must not be part of it."""
    folder = Path(recipe.training.output_dir).resolve()
    model = Path(os.path.expanduser(recipe.model.model_name_or_path or ""))
    if (
        resume.checkpoint is None
        and model.exists()
        and earlier_run_files(folder)
        and (model.resolve() == folder or folder in model.resolve().parents)
    ):
        raise ConfigError(
            "model_name_or_path",
            f"{recipe.model.model_name_or_path} is inside output_dir "
            f"{recipe.training.output_dir}, whose earlier run a fresh start moves to "
            f"{layout.PREVIOUS_RUNS}/: copy the model elsewhere, or train into another output_dir",
        )


def claim(recipe, resume: Resume, processes: int) -> RunFolder:
    """Rank 0: take the lock, move an earlier run aside (fresh start), write run.json; every rank: the run id."""
    training = recipe.training
    folder = Path(training.output_dir)
    if resume.checkpoint is None:
        run_id = new_run_id()
    else:  # the checkpoint's run; a checkpoint from before run ids continues the folder's (or a new) id
        run_id = resume.run_id or (read_run_json(folder) or {}).get("run_id") or new_run_id()
    lock, error, lines = None, None, []
    if training.process_index == 0:
        try:
            lock = RunLock(folder)
            if note := lock.acquire(run_id):
                lines.append(note)
            if resume.checkpoint is None and (note := move_earlier_run_aside(folder)):
                lines.append(note)
            lines += write_run_json(folder, run_id, resume, processes)
        except ConfigError as err:
            error = err
            if lock is not None:
                lock.release()
            lock = None
        for line in lines:
            print(line, flush=True)
    agree(error, training)
    return RunFolder(folder, broadcast(run_id), lock)


def write_run_json(folder: Path, run_id: str, resume: Resume, processes: int) -> list[str]:
    """run.json: the id, start, host and processes; each resume appends its step and what it changed."""
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    run = read_run_json(folder) if resume.checkpoint else None
    lines = []
    if run is None or run["run_id"] != run_id:
        run = {"run_id": run_id, "started": now, "host": socket.gethostname(), "processes": processes, "resumes": []}
    if resume.checkpoint:
        step = checkpoint_step(resume.checkpoint)
        entry = {"at": now, "checkpoint": str(resume.checkpoint), "step": step, "processes": processes}
        if resume.run_id is None:  # saved before run ids: this run adopts it (check_resume accepts it from now on)
            run.setdefault("adopted_checkpoints", []).append(Path(resume.checkpoint).name)
        if resume.refused:
            entry["recipe_changes"] = {k: list(v[:2]) for k, v in resume.refused.items()}
            lines.append(
                f"[resume] recipe changed at step {step} ({ALLOW_FLAG}; recorded in {folder / layout.RUN}): "
                f"{describe_changes(resume.refused)}"
            )
        if resume.noted:
            entry["noted_changes"] = {k: list(v) for k, v in resume.noted.items()}
            lines.append(
                f"[resume] changed, {', '.join(sorted({resume.may_change[k] for k in resume.noted}))} only: "
                f"{describe_changes(resume.noted)}"
            )
        run.setdefault("resumes", []).append(entry)
    tmp = folder / (layout.RUN + ".tmp")
    tmp.write_text(json.dumps(run, indent=2, default=str) + "\n")
    os.replace(tmp, folder / layout.RUN)
    return lines


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


def start_record(path, global_step: int, record: RecordFile) -> str | None:
    """Apply the resume / fresh-run policy to one record file at train begin; returns what was done, if anything."""
    path = Path(path)
    if not path.exists():
        return None
    if global_step == 0:
        target = move_aside(path.parent, [path], unnamed())  # a record outside a claimed folder, or no claim
        return f"moved the previous run's {path.name} aside to {target}/"
    kept, dropped = [], 0
    for line in path.read_text().splitlines():
        try:
            row = parse_json(line)
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
