"""Every numeric and enum field a recipe sets, with its allowed range, in one table checked before anything loads.

Why a table of our own: TRL and transformers check a few fields in `__post_init__`, others only deep inside the
trainer after the model has loaded (`loss_type`, `scale_rewards`, `temperature`), and many never (`beta: -1`,
`top_p: 2`, `max_steps: 0` trains one step). Some fail with a `ZeroDivisionError` at parse time
(`num_generations: 0`). So the raw values are checked here, right after argparse and *before* the config dataclasses
run their `__post_init__` (`check_values`), and the built configs are checked again with the rules that need more
than one field (`check_recipe`). Each problem is one `ConfigError` naming the field.

Types come from the dataclass annotations (a YAML `reward_weights: '1.0'` is a string, not a list of numbers);
ranges and choices come from `RULES`. Fields a config class does not have are skipped, so one table serves GRPO,
DAPO, PPO and the single-rollout configs alike.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import types
import typing
from dataclasses import dataclass, fields
from pathlib import Path

from transformers import TrainingArguments
from trl import GRPOConfig

from rlvr.inputs import ConfigError, check_writable_folder, one_line, parse_json
from rlvr.runs.checkpoints import check_pickles, weights_problem
from rlvr.runs.tracking import check_trackers


@dataclass(frozen=True)
class Num:
    """A number within bounds; `also` lists special values allowed outside them (max_steps: -1 = use epochs)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    also: tuple = ()

    def problem(self, value) -> str | None:
        if value in self.also and not isinstance(value, bool):
            return None
        if not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        bounds = [
            f"{op} {b:.10g}"
            for op, b in ((">=", self.ge), (">", self.gt), ("<=", self.le), ("<", self.lt))
            if b is not None
        ]
        ok = (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
        )
        if ok:
            return None
        extra = f" (or {', '.join(map(str, self.also))})" if self.also else ""
        return f"must be {' and '.join(bounds)}{extra}, got {value!r}"


@dataclass(frozen=True)
class OneOf:
    choices: tuple

    def __init__(self, *choices):
        object.__setattr__(self, "choices", choices)

    def problem(self, value) -> str | None:
        if value in self.choices and type(value) in {type(c) for c in self.choices}:
            return None
        shown = ", ".join(str(c) for c in self.choices)
        return f"must be one of {shown}, got {value!r}"


POSITIVE_INT = Num(ge=1)
NON_NEGATIVE = Num(ge=0)
POSITIVE = Num(gt=0)
FRACTION = Num(ge=0, le=1)

RULES: dict[str, Num | OneOf] = {
    # batch arithmetic (TRL divides by several of these at parse time)
    "num_generations": POSITIVE_INT,  # GRPO's own ">= 2" is TRL's check; REINFORCE/PPO accept 1
    "num_generations_eval": POSITIVE_INT,
    "generation_batch_size": POSITIVE_INT,
    "steps_per_generation": POSITIVE_INT,
    "per_device_train_batch_size": POSITIVE_INT,
    "per_device_eval_batch_size": POSITIVE_INT,
    "gradient_accumulation_steps": POSITIVE_INT,
    "num_iterations": POSITIVE_INT,
    "max_completion_length": POSITIVE_INT,
    "max_steps": Num(ge=1, also=(-1,)),
    "generation_chunk_size": POSITIVE_INT,  # sequences sampled at once on a GPU (unset: sized by the planner)
    "max_generated_samples": POSITIVE_INT,  # -1: train num_train_epochs instead; 0 would silently train one step
    "num_train_epochs": POSITIVE,
    "logging_steps": POSITIVE,
    "save_steps": POSITIVE,
    "eval_steps": POSITIVE,
    "eval_prompts": POSITIVE_INT,
    "console_steps": POSITIVE_INT,
    "save_total_limit": POSITIVE_INT,
    "seed": Num(ge=0, le=2**32 - 1),  # numpy's and so accelerate's set_seed range
    "data_seed": Num(ge=0, le=2**32 - 1),
    "warmup_steps": NON_NEGATIVE,
    "warmup_ratio": FRACTION,
    "dataloader_num_workers": NON_NEGATIVE,
    # optimizer
    "learning_rate": POSITIVE,
    "weight_decay": NON_NEGATIVE,
    "max_grad_norm": NON_NEGATIVE,
    "adam_beta1": Num(ge=0, lt=1),
    "adam_beta2": Num(ge=0, lt=1),
    "adam_epsilon": POSITIVE,
    # sampling
    "temperature": POSITIVE,
    "top_p": Num(gt=0, le=1),
    "top_k": NON_NEGATIVE,  # 0 = off
    "min_p": FRACTION,
    "repetition_penalty": POSITIVE,
    # loss
    "beta": NON_NEGATIVE,
    "epsilon": NON_NEGATIVE,
    "epsilon_high": NON_NEGATIVE,
    "delta": POSITIVE,
    "loss_type": OneOf("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "cispo", "sapo", "vespo"),
    "scale_rewards": OneOf("group", "batch", "none", True, False),
    "importance_sampling_level": OneOf("token", "sequence"),
    "multi_objective_aggregation": OneOf("sum_then_normalize", "normalize_then_sum"),
    "sapo_temperature_neg": POSITIVE,
    "sapo_temperature_pos": POSITIVE,
    "top_entropy_quantile": FRACTION,
    "entropy_coef": Num(),  # TRL subtracts coef x mean entropy: > 0 a bonus, < 0 entropy minimisation (sharpening)
    "ref_model_mixup_alpha": FRACTION,
    "ref_model_sync_steps": POSITIVE_INT,
    "vllm_mode": OneOf("server", "colocate"),
    "vllm_gpu_memory_utilization": Num(gt=0, le=1),
    "vllm_importance_sampling_mode": OneOf("sequence_mask", "sequence_truncate", "token_mask", "token_truncate"),
    "vllm_tensor_parallel_size": POSITIVE_INT,
    # RLVRConfig's advantage and entropy terms (rlvr/training/trainer.py)
    "success_bonus": NON_NEGATIVE,
    "failed_entropy_coef": NON_NEGATIVE,
    "late_entropy_coef": Num(),
    "late_entropy_step": NON_NEGATIVE,
    # DAPO (rlvr/training/dapo.py)
    "max_resample_rounds": NON_NEGATIVE,
    # PPO (rlvr/training/ppo.py)
    "vf_coef": NON_NEGATIVE,
    "cliprange_value": POSITIVE,
    "gamma": FRACTION,
    "lam": FRACTION,
    "value_learning_rate": POSITIVE,
    # this repo's RecipeArguments
    "overlong_max_length": POSITIVE_INT,
    "overlong_cache_length": POSITIVE_INT,
    "memory_budget": OneOf("warn", "stop", "off"),
    "min_mean_reward": Num(),  # any finite number (rewards may be negative)
    "min_mean_reward_patience": POSITIVE_INT,
    "reward_time_limit": NON_NEGATIVE,  # seconds; 0 = no limit
    # ModelConfig
    "dtype": OneOf("auto", "bfloat16", "float16", "float32"),
    "lora_r": POSITIVE_INT,
    "lora_alpha": POSITIVE,
    "lora_dropout": Num(ge=0, lt=1),
}


def _annotations(cls) -> dict:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an unresolvable forward reference: fall back to the raw annotations
        return {f.name: f.type for f in fields(cls)}


def _kinds(annotation) -> tuple[set, bool]:
    """({'int'|'float'|'bool'|'numbers'}, allows None) for the annotations whose type we check; other types -> {}."""
    args = (
        typing.get_args(annotation)
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else (annotation,)
    )
    kinds, optional = set(), type(None) in args
    for arg in args:
        if arg is bool:
            kinds.add("bool")
        elif arg is int:
            kinds.add("int")
        elif arg is float:
            kinds.add("float")
        elif typing.get_origin(arg) is list and typing.get_args(arg) in ((float,), (int,)):
            kinds.add("numbers")
        elif arg is not type(None):
            return set(), optional  # a str/enum/dict alternative: the type is not ours to police
    return kinds, optional


def _type_problem(value, kinds: set) -> str | None:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if "bool" in kinds and isinstance(value, bool):
        return None
    if "int" in kinds and isinstance(value, int) and not isinstance(value, bool):
        return None
    if "float" in kinds and is_number:
        return None
    if "numbers" in kinds and isinstance(value, (list, tuple)):
        bad = [v for v in value if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)]
        return f"must be a list of finite numbers, got {value!r}" if bad else None
    wanted = {"bool": "true or false", "int": "an integer", "float": "a number", "numbers": "a list of numbers"}
    return f"must be {' or '.join(wanted[k] for k in sorted(kinds))}, got {value!r}"


def field_types(dataclass_types) -> dict:
    hints = {}
    for cls in dataclass_types:
        hints.update({name: _kinds(annotation) for name, annotation in _annotations(cls).items()})
    return hints


def _grpo_only_fields() -> set[str]:
    return {f.name for f in fields(GRPOConfig)} - {f.name for f in fields(TrainingArguments)}


GRPO_ONLY = _grpo_only_fields()  # RULES for these apply to the GRPO family's configs only


def check_values(values: dict, dataclass_types) -> None:
    """Raw field values (argparse's namespace, before `__post_init__`): types from the annotations, ranges from RULES."""
    kinds_of = field_types(dataclass_types)
    grpo = any(isinstance(cls, type) and issubclass(cls, GRPOConfig) for cls in dataclass_types)
    for name, value in values.items():
        if not grpo and name in GRPO_ONLY:
            continue  # another trainer's config (SFT's loss_type "nll") with a field of the same name
        kinds, optional = kinds_of.get(name, (set(), True))
        if value is None:
            if kinds and not optional:
                raise ConfigError(name, "must be set, got null")
            continue
        if kinds and (problem := _type_problem(value, kinds)):
            raise ConfigError(name, problem)
        rule = RULES.get(name)
        if rule is None:
            continue
        if isinstance(rule, Num) and (isinstance(value, bool) or not isinstance(value, (int, float))):
            continue  # a non-numeric alternative of the annotation (e.g. a string schedule): not a range question
        if problem := rule.problem(value):
            raise ConfigError(name, problem)
    minimum = min(
        (getattr(cls, "min_generations", 2) for cls in dataclass_types if hasattr(cls, "num_generations")), default=2
    )
    if isinstance(values.get("num_generations"), int) and values["num_generations"] < minimum:
        raise ConfigError(
            "num_generations", f"must be >= {minimum} (a group needs a baseline), got {values['num_generations']}"
        )


def check_recipe(args, training, model) -> None:
    """The built configs: every field again (they may come from code, not argparse), then rules across fields."""
    parts = (args, training, model)
    check_values(
        {f.name: getattr(p, f.name) for p in parts for f in fields(p) if f.name in RULES}, [type(p) for p in parts]
    )
    if args.overlong_cache_length is not None and args.overlong_max_length is None:
        raise ConfigError("overlong_cache_length", "has no effect without overlong_max_length; set both or neither")
    if training.use_adaptive_entropy and training.entropy_coef < 0:
        raise ConfigError("entropy_coef", "is negative (entropy minimisation) but use_adaptive_entropy tunes a bonus")
    if training.late_entropy_coef is not None and training.use_adaptive_entropy:
        raise ConfigError("late_entropy_coef", "replaces entropy_coef, which use_adaptive_entropy tunes; use one")
    if training.success_bonus and training.algorithm == "ppo":
        raise ConfigError("success_bonus", "is added to group advantages; PPO's come from its critic (GAE)")
    if training.max_steps == -1 and training.num_train_epochs <= 0:
        raise ConfigError("max_steps", "is -1 (train by epochs) but num_train_epochs is not positive")


def check_sample_budget(training) -> None:
    """A sample budget below one generation step would stop after the first step whatever it says: refused."""
    budget, per_step = training.max_generated_samples, training.generation_batch_size
    if budget is not None and per_step and budget < per_step:
        raise ConfigError(
            "max_generated_samples",
            f"{budget} is less than one generation step ({per_step} samples = "
            f"generation_batch_size): the run would still train one step; set "
            f"at least {per_step}, or leave it unset",
        )


def flag_type(name: str, kind=float):
    """argparse `type=` for a command's flag that sets the same quantity as the recipe field `name` (`rlvr evaluate
    --top_p`): the value must pass `RULES[name]`, so a command and training share one rule, never a copy of it."""
    rule = RULES[name]

    def convert(text):
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(
                f"must be {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if problem := rule.problem(value):
            raise argparse.ArgumentTypeError(problem)
        return value

    convert.__name__ = name
    return convert


# What a Hub id looks like (`Qwen/Qwen3-0.6B`, `gpt2`): anything else that names no existing path is a typo'd path.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
MODEL_FILES = ("config.json", "adapter_config.json")
DATASET_FILES = ("dataset_dict.json", "dataset_info.json", "state.json")


def _hub_shaped(value: str) -> bool:
    return bool(HUB_ID.match(value)) and ".." not in value and "--" not in value and not value.endswith(".")


def check_model_path(value: str, field: str, may_build: bool = False) -> None:
    """A model field is a folder holding a saved model (config.json, or a LoRA adapter's adapter_config.json), or a
    Hub id. An empty folder, a file, or a path-shaped name that does not exist fails here, not as a transformers
    traceback after start-up. `may_build`: `build_tiny_model` will build into an empty or missing folder."""
    path = Path(os.path.expanduser(value))
    if path.is_dir():
        if may_build and not any(path.iterdir()):
            return
        check_model_folder(value, field)
        return
    if path.exists():
        raise ConfigError(field, f"{value} is a file; give a model folder (with config.json) or a Hub id")
    if not may_build and not _hub_shaped(value):
        raise ConfigError(field, f"no model folder at {value!r}, and it is not a Hub id (owner/name)")


def check_model_folder(value: str, field: str) -> None:
    """A local model folder that transformers can load: its config parses and its weights are whole. A garbage
    config.json or a torn model.safetensors (a copy cut short) fails here in one line, before anything loads."""
    path = Path(os.path.expanduser(value))
    if not path.is_dir() or not any((path / name).exists() for name in MODEL_FILES):
        raise ConfigError(field, f"no model at {value!r} (a folder with config.json or adapter_config.json)")
    for name in MODEL_FILES:
        if (path / name).exists():
            try:
                config = parse_json((path / name).read_text())
            except (OSError, UnicodeDecodeError, ValueError) as err:
                raise ConfigError(field, f"{path / name} is not valid JSON ({one_line(err)})") from None
            if not isinstance(config, dict):
                raise ConfigError(field, f"{path / name} must hold a JSON object, got {type(config).__name__}")
            if name == "config.json" and not isinstance(config.get("model_type"), str):
                raise ConfigError(field, f"{path / name} has no model_type: not a transformers model config")
    if problem := weights_problem(path):
        raise ConfigError(field, problem)
    check_pickles(path)


def check_dataset_path(value: str, field: str = "dataset_name") -> None:
    """A dataset field is a `save_to_disk` folder (`rlvr data --output_dir`) or a Hub dataset id."""
    path = Path(os.path.expanduser(value))
    if path.is_dir():
        if not any((path / name).exists() for name in DATASET_FILES):
            raise ConfigError(
                field,
                f"{value} is a folder but not a saved dataset (no dataset_dict.json); write one "
                "with `python -m rlvr data --output_dir`",
            )
        return
    if path.exists():
        raise ConfigError(field, f"{value} is a file; give a save_to_disk folder or a Hub dataset id")
    if not _hub_shaped(value):
        raise ConfigError(field, f"no dataset folder at {value!r}, and it is not a Hub id (owner/name)")


def check_paths(args, training, model) -> None:
    """Every field that names a model or an output location is the kind of thing it needs to be, before anything
    loads: models, the PPO critic, and the places the run writes to (created on demand, so they must be creatable).
    Called last in `validate` (after the config's content is checked); `dataset_name` is checked before loading it."""
    if model.model_name_or_path:
        check_model_path(model.model_name_or_path, "model_name_or_path", may_build=args.build_tiny_model)
    if value_model := getattr(training, "value_model_name_or_path", None):
        check_model_path(value_model, "value_model_name_or_path")
    check_trackers(training.report_to, None if args.dry_run else training.output_dir)
    if not training.output_dir:
        return
    if os.path.exists(training.output_dir) and not os.path.isdir(training.output_dir):
        raise ConfigError("output_dir", f"{training.output_dir} is a file, not a folder")
    if not args.dry_run:  # a dry run writes nothing
        check_writable_folder(training.output_dir, "output_dir")
        for name in ("metrics_path", "rollouts_path"):
            if value := getattr(args, name):
                if os.path.isdir(value):
                    raise ConfigError(name, f"{value} is a folder; give the path of a .jsonl file")
                check_writable_folder(os.path.dirname(os.path.abspath(value)), name)
