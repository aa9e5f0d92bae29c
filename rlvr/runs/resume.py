"""Resume: which run a checkpoint belongs to, and what a resume may change in the recipe (docs/reliability.md,
"One run per folder", says what a user sees).

Every run gets an id (`<UTC start>-<6 hex>`) at step 0, written to run.json and, through `RunIdentityCallback`, into
every checkpoint's trainer_state.json (written last, so a complete checkpoint names its run). A resume takes only its
own run's checkpoint, and compares the recipe with the run's config.yaml: a field that changes what is optimised is
refused unless `--allow_recipe_change true` (then recorded); fields in `RESUME_MAY_CHANGE` are noted. A field nobody
classified counts as what is optimised.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from rlvr.inputs import ConfigError, load_yaml_mapping, parse_json
from rlvr.runs import layout
from rlvr.training.config import load_recipe

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
        "eval_steps", "eval_on_start", "eval_prompts", "num_generations_eval", "divergence_guard", "min_mean_reward",
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


class RunIdentityCallback(TrainerCallback, ExportableState):
    """Puts the run id into every checkpoint's trainer_state.json (`stateful_callbacks`), written with it, last."""

    def __init__(self, run_id: str | None = None):
        self.run_id = run_id

    def state(self) -> dict:
        return {"args": {"run_id": self.run_id}, "attributes": {}}


def read_run_json(folder) -> dict | None:
    """The folder's run.json, or None (no run yet, or a folder from before run ids)."""
    try:
        run = parse_json((Path(folder) / layout.RUN).read_text())
    except (OSError, ValueError):
        return None
    return run if isinstance(run, dict) and isinstance(run.get("run_id"), str) else None


def checkpoint_run_id(checkpoint) -> str | None:
    """Which run saved a checkpoint (None: saved before run ids, or by plain TRL)."""
    try:
        state = parse_json((Path(checkpoint) / layout.TRAINER_STATE).read_text())
        entry = state["stateful_callbacks"][RunIdentityCallback.__name__]
        return (entry[0] if isinstance(entry, list) else entry)["args"]["run_id"]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


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
    old = load_yaml_mapping(config_path, "resume_from_checkpoint", "the recipe mapping the run trained with")
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


def checkpoint_step(checkpoint) -> int | None:
    """The step in a checkpoint folder's name (`checkpoint-12`: 12), None for another name."""
    match = layout.CHECKPOINT.match(Path(checkpoint).name)
    return int(match.group(1)) if match else None


def check_resume(recipe, checkpoint: str | None, processes: int) -> Resume:
    """Read only: whose checkpoint this is, and what the recipe changes against the run's own config.yaml."""
    folder = Path(recipe.training.output_dir)
    if checkpoint is None:
        return Resume(None, None)
    run = read_run_json(folder)
    if run is None and (folder / layout.RUN).exists():  # rebuilding it would accept any run's checkpoint
        raise ConfigError("resume_from_checkpoint", f"{folder / layout.RUN} is damaged (not JSON with a run_id): whose "
                          f"checkpoint {checkpoint} is cannot be checked; restore that file, or start afresh with "
                          f"--resume_from_checkpoint false (the earlier run is moved aside)")
    owner = checkpoint_run_id(checkpoint)
    adopted = owner is None and run is not None and Path(checkpoint).name in run.get("adopted_checkpoints", ())
    if run is not None and owner != run["run_id"] and not adopted:
        whose = f"belongs to run {owner}" if owner else "has no run id (saved before run ids, or by another tool)"
        raise ConfigError("resume_from_checkpoint", f"{checkpoint} {whose}, not to run {run['run_id']} that {folder} "
                          f"holds: resume a run in its own output_dir, or start this one fresh with "
                          f"--resume_from_checkpoint false")
    step, max_steps = checkpoint_step(checkpoint), recipe.training.max_steps
    if step is not None and 0 < max_steps <= step:  # the Trainer would train one step more
        raise ConfigError("max_steps", f"{checkpoint} is at step {step}, and max_steps is {max_steps}: the run is "
                          f"finished; to train further raise max_steps ({ALLOW_FLAG}), or use another output_dir")
    resume = Resume(checkpoint, owner)
    home = Path(checkpoint).parent  # the run's own folder: its config.yaml is the recipe it trained
    config_path = home / layout.CONFIG
    if not config_path.exists():
        print(f"[resume] {config_path} is missing: the recipe cannot be compared with what the run trained", flush=True)
        return resume
    old_processes = (read_run_json(home) or {}).get("processes", processes)
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


def describe_changes(changes: dict) -> str:
    return "; ".join(f"{k} {_shown(v[0])} -> {_shown(v[1])}" for k, v in changes.items())
