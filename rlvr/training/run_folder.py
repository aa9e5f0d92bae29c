"""One run per folder: the run's identity, its lock, what a fresh start does with an earlier run, what a resume may change.

Identity. Every run gets an id (`<UTC start>-<6 hex>`) when it starts from step 0. It is written to
`<output_dir>/run.json` and, through `RunIdentityCallback` (a stateful Trainer callback), into the
`trainer_state.json` of every checkpoint the run saves: transformers writes that file last, so a checkpoint that is
complete always says which run it belongs to. A resume continues the id of the checkpoint it loads.

Fresh start into a used folder. A run from step 0 into a folder that holds an earlier run (its run.json, config.yaml,
records, checkpoints or final model) moves every file that run wrote into `previous-runs/<its id>/` and says so in
one line: nothing is deleted, nothing is mixed, and a later `--resume_from_checkpoint true` can only find this run's
checkpoints. Files a run does not write stay (a sweep's `recipe.yaml` and `train.log`, anything of the user's).

Resume. `--resume_from_checkpoint` takes only a checkpoint of the folder's own run (the ids agree) and says so;
another run's checkpoint is refused in one line. The recipe is compared with the run's own `config.yaml`: a change
to a field that changes what is optimised is refused in one line naming the field and both values, unless
`--allow_recipe_change true` (the change is then recorded in run.json); fields in `RESUME_MAY_CHANGE` (memory,
speed, records and logging, when to save or stop early) are allowed and noted. Everything not in that table counts as what is
optimised: a field nobody classified is refused, never silently mixed.

Lock. While a run writes into its folder it holds `<output_dir>/run.lock` (host, pid, run id, start): an exclusive
`flock` on the file, kept for the run's lifetime and released by the kernel when the process ends, however it ends.
A second run into the folder fails at once with one line naming the holder. A lock file left by a killed run (its
`flock` is free) is taken over with one line saying so. Only the main process (global rank 0) takes the lock, so a
run of N processes holds one lock; the other ranks learn the outcome from rank 0 (`agree`).
"""

from __future__ import annotations

import atexit
import dataclasses
import errno
import fcntl
import json
import os
import re
import secrets
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from rlvr import run_layout as layout
from rlvr.cli import ConfigError, check_writable_folder, read_yaml
from rlvr.training.run_files import CHECKPOINT, SHARD_INDEXES, WEIGHT_FILES

# What a run (and the commands that describe it) writes at the top of its folder; a fresh start moves these aside.
RUN_RECORDS = (layout.RUN, layout.CONFIG, layout.CODE, layout.METRICS, layout.ROLLOUTS, layout.REWARD_ERROR,
               layout.REPORT, layout.PLOTS_DIR, layout.SUMMARY_JSON, layout.SUMMARY_CSV, layout.SUMMARY_MD,
               layout.EVAL_DIR, layout.BEFORE_AFTER_DIR)
FINAL_MODEL = ("config.json", "generation_config.json", "training_args.bin", "README.md", "chat_template.jinja",
               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json",
               "merges.txt", "tokenizer.model", "adapter_config.json", *WEIGHT_FILES, *SHARD_INDEXES)
WRITTEN_BY_A_RUN = re.compile(r"^(checkpoint-\d+|(model|pytorch_model|adapter_model)-\d+-of-\d+\.(safetensors|bin)|"
                              r"(metrics|rollouts)\.\d{8}-\d{6}\.jsonl)$")
# Any of these means the folder holds a run (README.md or config.json alone could be anything).
RUN_MARKERS = (layout.RUN, layout.CONFIG, layout.METRICS, layout.ROLLOUTS, *WEIGHT_FILES, *SHARD_INDEXES)

# What a resume may change without --allow_recipe_change, by why it leaves the optimisation alone. ONE table: every
# recipe field not listed (the algorithm, G, batch shape, learning rate and schedule, max_steps, rewards and weights,
# data, seed, sampling, the model and its adapters, ...) and every entry of `DERIVED` changes what is optimised.
RESUME_MAY_CHANGE = {
    "memory or speed": (
        "per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",  # see DERIVED
        "per_device_eval_batch_size", "gradient_checkpointing", "gradient_checkpointing_kwargs",
        "activation_checkpointing", "speedups", "cpu_threads", "use_cpu", "bf16", "fp16", "tf32", "bf16_full_eval",
        "fp16_full_eval", "torch_compile", "torch_compile_backend", "torch_compile_mode", "use_liger_kernel",
        "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers",
        "dataloader_prefetch_factor", "memory_budget", "vllm_gpu_memory_utilization", "ddp_timeout", "ddp_backend",
        "env",
    ),
    "records and logging": (
        "metrics_path", "rollouts_path", "print_rollouts", "report_to", "run_name", "project",
        "trackio_space_id", "logging_steps", "logging_strategy", "logging_first_step", "logging_nan_inf_filter",
        "log_level", "log_level_replica", "log_on_each_node", "log_completions", "num_completions_to_print",
        "log_unique_prompts", "disable_tqdm", "push_to_hub", "hub_model_id", "hub_strategy", "hub_private_repo",
        "hub_always_push", "hub_revision",
    ),
    "when to save, evaluate or stop early": (
        "save_strategy", "save_steps", "save_total_limit", "save_only_model", "save_on_each_node", "eval_strategy",
        "eval_steps", "eval_on_start", "num_generations_eval", "divergence_guard", "min_mean_reward",
        "min_mean_reward_component", "min_mean_reward_patience", "reward_time_limit", "build_tiny_model",
    ),
}
NOTED = {name: kind for kind, names in RESUME_MAY_CHANGE.items() for name in names}
# How this command was started and where the folder is now (a run folder may be moved), not what the run trains.
NOT_COMPARED = ("resume_from_checkpoint", "allow_recipe_change", "dry_run", "output_dir", "logging_dir")
# Quantities the micro-batch fields above combine into: changing these does change the optimisation.
DERIVED = {
    "completions per optimizer step": (("per_device_train_batch_size", "gradient_accumulation_steps", "processes"),
                                       lambda v: v["per_device_train_batch_size"] * v["gradient_accumulation_steps"]
                                       * v["processes"]),
    "optimizer steps per generation step": (("steps_per_generation", "num_iterations", "gradient_accumulation_steps"),
                                            lambda v: v["steps_per_generation"] * v["num_iterations"]
                                            / v["gradient_accumulation_steps"]),
}
ALLOW_FLAG = "--allow_recipe_change true"


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


class RunIdentityCallback(TrainerCallback, ExportableState):
    """Puts the run id into every checkpoint's trainer_state.json (`stateful_callbacks`), written with it, last."""

    def __init__(self, run_id: str | None = None):
        self.run_id = run_id

    def state(self) -> dict:
        return {"args": {"run_id": self.run_id}, "attributes": {}}


def read_run(folder) -> dict | None:
    """The folder's run.json, or None (no run yet, or a folder from before run ids)."""
    try:
        run = json.loads((Path(folder) / layout.RUN).read_text())
    except (OSError, ValueError):
        return None
    return run if isinstance(run, dict) and isinstance(run.get("run_id"), str) else None


def checkpoint_run_id(checkpoint) -> str | None:
    """Which run saved a checkpoint (None: saved before run ids, or by plain TRL)."""
    try:
        state = json.loads((Path(checkpoint) / layout.TRAINER_STATE).read_text())
        entry = state["stateful_callbacks"][RunIdentityCallback.__name__]
        return (entry[0] if isinstance(entry, list) else entry)["args"]["run_id"]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


# ---------------------------------------------------------------- the lock


def _holder(path: Path) -> dict:
    try:
        holder = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict) -> str:
    return (f"host {holder.get('host', '?')} pid {holder.get('pid', '?')}, run {holder.get('run_id', '?')}, "
            f"since {holder.get('since', '?')}")


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
        return (f"{self.folder} is in use by another run ({_describe(holder)}; lock {self.path}): give this run "
                f"another output_dir, or wait for that one to end")

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
        record = {"host": socket.gethostname(), "pid": os.getpid(), "run_id": run_id,
                  "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self.fd = fd
        self.HELD[key] = self
        if previous:
            return (f"[run] took over a stale lock in {self.folder} ({_describe(previous)}): that run no longer "
                    f"holds it (killed, or its machine went away)")
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
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        message = [None if error is None else (error.field, error.message)]
        dist.broadcast_object_list(message, src=0)
        if message[0] is not None and training.process_index != 0:
            sys.exit(2)
    if error is not None:
        raise error


# ---------------------------------------------------------------- fresh start: the earlier run moves aside


def earlier_run_files(folder) -> list[Path]:
    """The entries of `folder` an earlier run wrote (empty when the folder holds no run)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    entries = sorted(folder.iterdir())
    names = {p.name for p in entries}
    if not (names & set(RUN_MARKERS) or any(CHECKPOINT.match(n) for n in names)):
        return []
    return [p for p in entries if p.name in RUN_RECORDS or p.name in FINAL_MODEL or WRITTEN_BY_A_RUN.match(p.name)]


def move_earlier_run_aside(folder) -> str | None:
    """Move an earlier run's files into `previous-runs/<its id>/`; one line saying what moved where, or None."""
    folder = Path(folder)
    files = earlier_run_files(folder)
    if not files:
        return None
    old = read_run(folder)
    name = old["run_id"] if old else f"unnamed-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    target = folder / layout.PREVIOUS_RUNS / name
    for i in range(2, 1000):
        if not target.exists():
            break
        target = folder / layout.PREVIOUS_RUNS / f"{name}.{i}"
    target.mkdir(parents=True)
    for path in files:
        path.rename(target / path.name)
    checkpoints = sorted((p.name for p in files if CHECKPOINT.match(p.name)), key=lambda n: int(n.split("-")[1]))
    parts = [*checkpoints, *(["the final model"] if any(p.name in WEIGHT_FILES for p in files) else []), "records"]
    return f"[run] {folder} held an earlier run ({name}: {', '.join(parts)}): moved to {target}/"


# ---------------------------------------------------------------- resume: the same run, the same recipe


@dataclass
class Resume:
    """What `check_resume` decided: the run the checkpoint continues and what changed in the recipe."""

    checkpoint: str | None
    run_id: str | None  # the run this continues (None: a fresh start, or a checkpoint from before run ids)
    refused: dict = field(default_factory=dict)  # field -> (run's value, this command's)
    noted: dict = field(default_factory=dict)


def recipe_values(args, training, model, processes: int) -> dict:
    """Every field of the parsed recipe (defaults filled in), plus the `DERIVED` quantities."""
    values = {}
    for part in (args, training, model):
        values.update(part.to_dict() if hasattr(part, "to_dict") else dataclasses.asdict(part))
    for key in ("data", "curriculum"):
        if isinstance(values.get(key), str):
            try:
                values[key] = json.loads(values[key])
            except ValueError:
                pass
    for key in NOT_COMPARED:
        values.pop(key, None)
    values["processes"] = processes
    for name, (_, compute) in DERIVED.items():
        values[name] = compute(values)
    return values


def _old_recipe(config_path: Path, processes: int) -> dict:
    from rlvr.training.config import load_recipe

    old = read_yaml(config_path, "resume_from_checkpoint")
    if not isinstance(old, dict):
        raise ConfigError("resume_from_checkpoint", f"{config_path} is not a recipe mapping")
    env = old.pop("env", None)  # parsing it would set the old run's environment variables in this process
    try:
        loaded = load_recipe([], config=old, source=str(config_path))
    except ConfigError as err:
        raise ConfigError("resume_from_checkpoint", f"cannot compare with the run's {config_path} ({err}); "
                                                    f"pass {ALLOW_FLAG} to resume without the comparison") from None
    values = recipe_values(loaded.args, loaded.training, loaded.model, processes)
    values["env"] = env
    return values


def _same(a, b) -> bool:
    return a == b or json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def compare_recipes(old: dict, new: dict) -> tuple[dict, dict]:
    """(refused, noted): each field -> (old, new); a DERIVED quantity is refused under the first input that moved."""
    refused, noted = {}, {}
    for key in dict.fromkeys([*old, *new]):
        if key == "processes" or key in DERIVED or _same(old.get(key), new.get(key)):
            continue
        (noted if key in NOTED else refused)[key] = (old.get(key), new.get(key))
    for name, (inputs, _) in DERIVED.items():
        if not _same(old.get(name), new.get(name)):
            moved = next((k for k in inputs if not _same(old.get(k), new.get(k))), inputs[0])
            refused.setdefault(moved, (old.get(moved), new.get(moved)))
            noted.pop(moved, None)
            refused[moved] = (*refused[moved][:2], f"{name} {old.get(name):g} -> {new.get(name):g}")
    return refused, noted


def _shown(value) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_resume(recipe, checkpoint: str | None, processes: int) -> Resume:
    """Read only: whose checkpoint this is, and what the recipe changes against the run's own config.yaml."""
    folder = Path(recipe.training.output_dir)
    if checkpoint is None:
        return Resume(None, None)
    run = read_run(folder)
    if run is None and (folder / layout.RUN).exists():  # rebuilding it would accept any run's checkpoint
        raise ConfigError("resume_from_checkpoint", f"{folder / layout.RUN} is damaged (not JSON with a run_id): whose "
                          f"checkpoint {checkpoint} is cannot be checked; restore that file, or start afresh with "
                          f"--resume_from_checkpoint false (the earlier run is moved aside)")
    step, max_steps = _checkpoint_step(checkpoint), recipe.training.max_steps
    if step is not None and 0 < max_steps <= step:  # the Trainer would train one step more
        raise ConfigError("max_steps", f"{checkpoint} is at step {step}, and max_steps is {max_steps}: the run is "
                          f"finished; to train further raise max_steps ({ALLOW_FLAG}), or use another output_dir")
    owner = checkpoint_run_id(checkpoint)
    adopted = owner is None and run is not None and Path(checkpoint).name in run.get("adopted_checkpoints", ())
    if run is not None and owner != run["run_id"] and not adopted:
        whose = f"belongs to run {owner}" if owner else "has no run id (saved before run ids, or by another tool)"
        raise ConfigError("resume_from_checkpoint", f"{checkpoint} {whose}, not to run {run['run_id']} that {folder} "
                          f"holds: resume a run in its own output_dir, or start this one fresh with "
                          f"--resume_from_checkpoint false")
    resume = Resume(checkpoint, owner)
    home = Path(checkpoint).parent  # the run's own folder: its config.yaml is the recipe it trained
    config_path = home / layout.CONFIG
    if not config_path.exists():
        print(f"[resume] {config_path} is missing: the recipe cannot be compared with what the run trained", flush=True)
        return resume
    old_processes = (read_run(home) or {}).get("processes", processes)
    new = recipe_values(recipe.args, recipe.training, recipe.model, processes)
    new["env"] = recipe.yaml.get("env")
    resume.refused, resume.noted = compare_recipes(_old_recipe(config_path, old_processes), new)
    if resume.refused and not recipe.args.allow_recipe_change:
        key, (before, after, *why) = next(iter(resume.refused.items()))
        more = [k for k in resume.refused if k != key]
        also = f" (also changed: {', '.join(more[:5])}{', ...' if len(more) > 5 else ''})" if more else ""
        raise ConfigError(key, f"the run in {home} trained with {_shown(before)} ({config_path}), this resume asks "
                               f"{_shown(after)}{f' ({why[0]})' if why else ''}{also}: that changes what is "
                               f"optimised; use another output_dir for a new run, or pass {ALLOW_FLAG} to continue "
                               f"with the change recorded in {home / layout.RUN}")
    return resume


def _changes(changes: dict) -> str:
    return "; ".join(f"{k} {_shown(v[0])} -> {_shown(v[1])}" for k, v in changes.items())


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
    if resume.checkpoint is None and model.exists() and earlier_run_files(folder) and \
            (model.resolve() == folder or folder in model.resolve().parents):
        raise ConfigError("model_name_or_path", f"{recipe.model.model_name_or_path} is inside output_dir "
                          f"{recipe.training.output_dir}, whose earlier run a fresh start moves to "
                          f"{layout.PREVIOUS_RUNS}/: copy the model elsewhere, or train into another output_dir")


def claim(recipe, resume: Resume, processes: int) -> RunFolder:
    """Rank 0: take the lock, move an earlier run aside (fresh start), write run.json; every rank: the run id."""
    training = recipe.training
    folder = Path(training.output_dir)
    if resume.checkpoint is None:
        run_id = new_run_id()
    else:  # the checkpoint's run; a checkpoint from before run ids continues the folder's (or a new) id
        run_id = resume.run_id or (read_run(folder) or {}).get("run_id") or new_run_id()
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
    return RunFolder(folder, _broadcast(run_id), lock)


def _broadcast(value):
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]
    return value


def _checkpoint_step(checkpoint: str) -> int | None:
    match = CHECKPOINT.match(Path(checkpoint).name)
    return int(match.group(1)) if match else None


def write_run_json(folder: Path, run_id: str, resume: Resume, processes: int) -> list[str]:
    """run.json: the id, start, host and processes; each resume appends its step and what it changed."""
    now = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    run = read_run(folder) if resume.checkpoint else None
    lines = []
    if run is None or run["run_id"] != run_id:
        run = {"run_id": run_id, "started": now, "host": socket.gethostname(), "processes": processes, "resumes": []}
    if resume.checkpoint:
        step = _checkpoint_step(resume.checkpoint)
        entry = {"at": now, "checkpoint": str(resume.checkpoint), "step": step, "processes": processes}
        if resume.run_id is None:  # saved before run ids: this run adopts it (check_resume accepts it from now on)
            run.setdefault("adopted_checkpoints", []).append(Path(resume.checkpoint).name)
        if resume.refused:
            entry["recipe_changes"] = {k: list(v[:2]) for k, v in resume.refused.items()}
            lines.append(f"[resume] recipe changed at step {step} ({ALLOW_FLAG}; recorded in {folder / layout.RUN}): "
                         f"{_changes(resume.refused)}")
        if resume.noted:
            entry["noted_changes"] = {k: list(v) for k, v in resume.noted.items()}
            lines.append(f"[resume] changed, {', '.join(sorted({NOTED[k] for k in resume.noted}))} only: "
                         f"{_changes(resume.noted)}")
        run.setdefault("resumes", []).append(entry)
    tmp = folder / (layout.RUN + ".tmp")
    tmp.write_text(json.dumps(run, indent=2, default=str) + "\n")
    os.replace(tmp, folder / layout.RUN)
    return lines
