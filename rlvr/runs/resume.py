"""Resume: which run a checkpoint belongs to, and what a resume may change in the recipe (docs/reliability.md,
"One run per folder", says what a user sees).

Every run gets an id (`<UTC start>-<6 hex>`) at step 0, written to run.json and, through `RunIdentityCallback`, into
every checkpoint's trainer_state.json (written last, so a complete checkpoint names its run). A resume takes only its
own run's checkpoint, and compares the recipe with the run's config.yaml: a field that changes what is optimised is
refused unless `--allow_recipe_change true` (then recorded); fields a resume may change are noted. A field nobody
classified counts as what is optimised. The run folder parses no recipe: training hands it the values and the table
of what may change (`RecipeFields`, built by `rlvr.training.config.resume_fields`, where the fields live).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from rlvr.inputs import ConfigError, name_inside, parse_json, refuse_special_file
from rlvr.runs import layout

ALLOW_FLAG = "--allow_recipe_change true"


class RunIdentityCallback(TrainerCallback, ExportableState):
    """Puts the run id into every checkpoint's trainer_state.json (`stateful_callbacks`), written with it, last."""

    def __init__(self, run_id: str | None = None):
        self.run_id = run_id

    def state(self) -> dict:
        return {"args": {"run_id": self.run_id}, "attributes": {}}


class IntervalsOfThisCommand(TrainerCallback):
    """A resume's logging, evaluation and save intervals are this command's. transformers restores them from the
    checkpoint's trainer_state.json (`logging_steps`, `eval_steps`, `save_steps`), so a resume that changes them
    (a change `check_resume` accepts and records) would be recorded and ignored. At train begin the state takes
    them from the arguments, as a fresh start computes them (`TrainerState.compute_steps`)."""

    def on_train_begin(self, args, state, control, **kwargs):
        state.compute_steps(args, state.max_steps)


def read_run_json(folder) -> dict | None:
    """The folder's run.json, or None (no run yet, or a folder from before run ids)."""
    try:
        refuse_special_file(Path(folder) / layout.RUN, "run.json")  # a FIFO would never answer: damaged
        run = parse_json((Path(folder) / layout.RUN).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(run, dict) or not isinstance(run.get("run_id"), str):
        return None
    try:  # the id names the folder an earlier run is moved to (previous-runs/<run id>/): a name, not a path
        name_inside(layout.PREVIOUS_RUNS, run["run_id"], "run_id", "run id")
    except ConfigError:
        return None
    return run


def checkpoint_run_id(checkpoint) -> str | None:
    """Which run saved a checkpoint (None: saved before run ids, or by plain TRL)."""
    try:
        refuse_special_file(Path(checkpoint) / layout.TRAINER_STATE, layout.TRAINER_STATE)
        state = parse_json((Path(checkpoint) / layout.TRAINER_STATE).read_text())
        entry = state["stateful_callbacks"][RunIdentityCallback.__name__]
        return (entry[0] if isinstance(entry, list) else entry)["args"]["run_id"]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


@dataclass(frozen=True)
class RecipeFields:
    """What training hands `check_resume` to compare the run's recipe with this command's."""

    current: Callable[[], dict]  # this command's recipe: field -> value, every default filled in, derived ones too
    of_config: Callable[[Path, int], dict]  # the same for the run's config.yaml, read with the run's processes
    may_change: Mapping[str, str]  # field -> why a resume may change it (noted, not refused)
    derived: Mapping[str, tuple[str, ...]]  # quantity -> the fields it is made of (a change is refused under one)


@dataclass
class Resume:
    """What `check_resume` decided: the run the checkpoint continues and what changed in the recipe."""

    checkpoint: str | None
    run_id: str | None  # the run this continues (None: a fresh start, or a checkpoint from before run ids)
    refused: dict = field(default_factory=dict)  # field -> (run's value, this command's)
    noted: dict = field(default_factory=dict)
    may_change: Mapping[str, str] = field(default_factory=dict)  # why each noted field may change (`RecipeFields`)
    finished: bool = False  # the checkpoint is at max_steps: the same command has nothing to do


def _same(a, b) -> bool:
    return a == b or json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def compare_recipes(old: dict, new: dict, fields: RecipeFields) -> tuple[dict, dict]:
    """(refused, noted): each field -> (old, new); a derived quantity is refused under the first input that moved."""
    refused, noted = {}, {}
    for key in dict.fromkeys([*old, *new]):
        if key == "processes" or key in fields.derived or _same(old.get(key), new.get(key)):
            continue
        (noted if key in fields.may_change else refused)[key] = (old.get(key), new.get(key))
    for name, inputs in fields.derived.items():
        if not _same(old.get(name), new.get(name)):
            moved = next((k for k in inputs if not _same(old.get(k), new.get(k))), inputs[0])
            refused.setdefault(moved, (old.get(moved), new.get(moved)))
            noted.pop(moved, None)
            refused[moved] = (*refused[moved][:2], f"{name} {old.get(name):g} -> {new.get(name):g}")
    return refused, noted


def _shown(value) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def checkpoint_step(checkpoint) -> int | None:
    """The step in a checkpoint folder's name (`checkpoint-12`: 12), None for another name."""
    match = layout.CHECKPOINT.match(Path(checkpoint).name)
    return int(match.group(1)) if match else None


def check_resume(recipe, checkpoint: str | None, processes: int, fields: RecipeFields) -> Resume:
    """Read only: whose checkpoint this is, and what the recipe changes against the run's own config.yaml."""
    folder = Path(recipe.training.output_dir)
    if checkpoint is None:
        return Resume(None, None)
    run = read_run_json(folder)
    if run is None and (folder / layout.RUN).exists():  # rebuilding it would accept any run's checkpoint
        raise ConfigError(
            "resume_from_checkpoint",
            f"{folder / layout.RUN} is damaged (not JSON with a run_id that is a name): whose "
            f"checkpoint {checkpoint} is cannot be checked; restore that file, or start afresh with "
            f"--resume_from_checkpoint false (the earlier run is moved aside)",
        )
    owner = checkpoint_run_id(checkpoint)
    adopted = owner is None and run is not None and Path(checkpoint).name in run.get("adopted_checkpoints", ())
    if run is not None and owner != run["run_id"] and not adopted:
        whose = f"belongs to run {owner}" if owner else "has no run id (saved before run ids, or by another tool)"
        raise ConfigError(
            "resume_from_checkpoint",
            f"{checkpoint} {whose}, not to run {run['run_id']} that {folder} "
            f"holds: resume a run in its own output_dir, or start this one fresh with "
            f"--resume_from_checkpoint false",
        )
    step, max_steps = checkpoint_step(checkpoint), recipe.training.max_steps
    if step is not None and 0 < max_steps < step:  # the Trainer would train one step more
        raise ConfigError(
            "max_steps",
            f"{checkpoint} is at step {step}, past max_steps {max_steps}: the run trained further than "
            f"this command asks; to train further raise max_steps ({ALLOW_FLAG}), or use another output_dir",
        )
    finished = step is not None and step == max_steps  # the same command again (a requeue): nothing to do
    resume = Resume(checkpoint, owner, may_change=fields.may_change, finished=finished)
    home = Path(checkpoint).parent  # the run's own folder: its config.yaml is the recipe it trained
    config_path = home / layout.CONFIG
    if not config_path.exists():
        print(f"[resume] {config_path} is missing: the recipe cannot be compared with what the run trained", flush=True)
        return resume
    old_processes = (read_run_json(home) or {}).get("processes", processes)
    resume.refused, resume.noted = compare_recipes(
        fields.of_config(config_path, old_processes), fields.current(), fields
    )
    if resume.refused and not recipe.args.allow_recipe_change:
        key, (before, after, *why) = next(iter(resume.refused.items()))
        more = [k for k in resume.refused if k != key]
        also = f" (also changed: {', '.join(more[:5])}{', ...' if len(more) > 5 else ''})" if more else ""
        raise ConfigError(
            key,
            f"the run in {home} trained with {_shown(before)} ({config_path}), this resume asks "
            f"{_shown(after)}{f' ({why[0]})' if why else ''}{also}: that changes what is "
            f"optimised; use another output_dir for a new run, or pass {ALLOW_FLAG} to continue "
            f"with the change recorded in {home / layout.RUN}",
        )
    return resume


def describe_changes(changes: dict) -> str:
    return "; ".join(f"{k} {_shown(v[0])} -> {_shown(v[1])}" for k, v in changes.items())
