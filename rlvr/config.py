"""Recipe configuration: our dataclass beside TRL's, parsed from YAML with CLI overrides, validated up front.

`TrlParser` reads `--config recipe.yaml` as defaults and lets any `--field value` override it, exactly like TRL's
own `trl/scripts/grpo.py`. Everything that can be wrong in a config (unknown keys, bad rewards, batch arithmetic,
task options) fails here with one line naming the field, before any model or tokenizer is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields

from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser

from data.generate import build_dataset, load_task_dataset
from data.spec import DataSpec
from rewards.registry import RewardSet, resolve_reward_funcs
from rlvr.errors import ConfigError, flag_in_message
from rlvr.speed import parse_speedups
from rlvr.yaml_input import load_yaml_mapping, reject_unknown_keys


@dataclass
class RecipeArguments(ScriptArguments):
    """What a recipe adds to TRL's arguments: the task data, the reward set, and where the run's records go."""

    data: dict | str | None = field(
        default=None,
        metadata={"help": "Inline data spec {size, seed, test_size, system_prompt, specs: [{name, weight, config}]}; "
                  "ignored when dataset_name (a save_to_disk folder or Hub id) is set."},
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["correctness", "format"],
        metadata={"help": "Registry names (correctness, format, penalty) or dotted paths pkg.module.fn."},
    )
    overlong_max_length: int | None = field(
        default=None, metadata={"help": "DAPO overlong penalty L_max in tokens; unset = no penalty."}
    )
    overlong_cache_length: int | None = field(
        default=None, metadata={"help": "DAPO overlong penalty L_cache: the penalty ramps over the last L_cache tokens."}
    )
    metrics_path: str | None = field(default=None, metadata={"help": "JSONL of every logged row; default <output_dir>/metrics.jsonl."})
    rollouts_path: str | None = field(default=None, metadata={"help": "JSONL of every rollout; default <output_dir>/rollouts.jsonl."})
    print_rollouts: bool = field(default=True, metadata={"help": "Print one rollout per generation step."})
    build_tiny_model: bool = field(
        default=False, metadata={"help": "Build a random-weight tiny Qwen3 at model_name_or_path if nothing is there."}
    )
    dry_run: bool = field(default=False, metadata={"help": "Validate the config, print the batch plan, load nothing."})
    memory_budget: str = field(
        default="warn",
        metadata={"help": "Before loading weights, compare the planned peak GPU memory with free memory: warn, stop, or off."},
    )
    speedups: str = field(
        default="all",
        metadata={"help": "Speed-ups that leave samples and loss unchanged (rlvr/speed.py): all, none, or a comma "
                  "list of threads, shared_prefix."},
    )


@dataclass
class Recipe:
    """A validated recipe: parsed arguments plus what validation already built (data and rewards)."""

    args: RecipeArguments
    training: GRPOConfig
    model: ModelConfig
    rewards: RewardSet
    dataset: object  # datasets.DatasetDict
    data_spec: DataSpec | None


class RecipeParser(TrlParser):
    """TrlParser whose errors are `ConfigError`s (one line, field named) instead of argparse's usage dump."""

    def error(self, message):
        raise ConfigError(flag_in_message(message), message)


def _field_named_in(message: str, dataclass_types) -> str:
    """The first config field a library error message mentions, for a one-line error that names it."""
    names = {f.name for cls in dataclass_types for f in fields(cls)}
    for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message):
        if token in names:
            return token
    return "config"


def check_config_file(argv: list[str], dataclass_types) -> None:
    """Unknown or misspelled YAML keys fail first, before the configs' own checks can hide them."""
    if "--config" not in argv or argv.index("--config") + 1 >= len(argv):
        return
    path = argv[argv.index("--config") + 1]
    raw = load_yaml_mapping(path, "--config")
    reject_unknown_keys(raw, {f.name for cls in dataclass_types for f in fields(cls)} | {"env"}, f"config field in {path}")


def parse_args(argv: list[str] | None, config_cls=GRPOConfig):
    """Parse YAML + CLI into (RecipeArguments, config_cls, ModelConfig); every failure is a `ConfigError`."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    dataclass_types = (RecipeArguments, config_cls, ModelConfig)
    check_config_file(argv, dataclass_types)
    parser = RecipeParser(dataclass_types)
    try:
        return parser.parse_args_and_config(argv)
    except ConfigError:
        raise
    except ValueError as err:
        message = " ".join(str(err).split())
        unknown = re.search(r"(?:Unknown arguments from config file|not used by the HfArgumentParser): \[?'--?(\w+)'", message)
        if unknown:
            raise ConfigError(unknown.group(1), "unknown command-line field") from None
        raise ConfigError(_field_named_in(message, dataclass_types), message) from None


def check_model_reachable(name_or_path: str, will_build: bool) -> None:
    """Offline, a model that is neither a local folder nor in the HF cache fails now, not after a Hub timeout."""
    import os

    from huggingface_hub import constants, try_to_load_from_cache

    if will_build or os.path.isdir(name_or_path) or not constants.HF_HUB_OFFLINE:
        return
    try:
        cached = try_to_load_from_cache(name_or_path, "config.json")
    except ValueError:  # HFValidationError: not even a valid repo id (e.g. a missing absolute path)
        cached = None
    if not isinstance(cached, str):
        raise ConfigError(
            "model_name_or_path", f"{name_or_path!r} is not a local folder and not in the HF cache (HF_HUB_OFFLINE=1)"
        )


def validate(args: RecipeArguments, training: GRPOConfig, model: ModelConfig) -> Recipe:
    """Checks that need more than one field; builds the data and the reward set (both cheap, no model)."""
    if not model.model_name_or_path:
        raise ConfigError("model_name_or_path", "is required")
    rewards = resolve_reward_funcs(
        args.reward_funcs, training.reward_weights, args.overlong_max_length, args.overlong_cache_length
    )
    filter_reward = getattr(training, "dynamic_sampling_reward", None)
    if filter_reward is not None and filter_reward not in rewards.names:
        raise ConfigError("dynamic_sampling_reward", f"{filter_reward!r} is not among the rewards {rewards.names}")
    if args.overlong_max_length is not None and training.max_completion_length is not None:
        if args.overlong_max_length > training.max_completion_length:
            raise ConfigError(
                "overlong_max_length",
                f"({args.overlong_max_length}) exceeds max_completion_length ({training.max_completion_length}): "
                "the penalty could never reach -1",
            )
    if args.dataset_name:
        data_spec, dataset = None, load_task_dataset(args.dataset_name)
    elif args.data is not None:
        data_spec = DataSpec.from_dict(args.data)
        dataset = build_dataset(data_spec)
    else:
        raise ConfigError("data", "set an inline data spec or dataset_name")
    split = args.dataset_train_split
    if split not in dataset:
        raise ConfigError("dataset_train_split", f"{split!r} is not a split of the data ({list(dataset)})")
    prompts_per_step = training.generation_batch_size // training.num_generations
    if len(dataset[split]) < prompts_per_step:
        raise ConfigError("data.size", f"train split has {len(dataset[split])} rows, fewer than the {prompts_per_step} prompts of one step")
    if args.memory_budget not in ("warn", "stop", "off"):
        raise ConfigError("memory_budget", f"must be warn, stop or off, got {args.memory_budget!r}")
    try:
        parse_speedups(args.speedups)
    except ValueError as err:
        raise ConfigError("speedups", str(err)) from None
    if not args.dry_run:
        check_model_reachable(model.model_name_or_path, args.build_tiny_model)
    return Recipe(args, training, model, rewards, dataset, data_spec)


def precision_warning(recipe: Recipe) -> str | None:
    """Full fine-tuning of bf16/fp16 weights with plain AdamW has no fp32 master copy: an update smaller than about
    1/256 of a weight rounds away, and at lr 5e-6 most weights never move. DeepSpeed ZeRO keeps fp32 masters; LoRA
    trains fp32 adapters."""
    import os

    dtype = str(recipe.model.dtype or "")
    deepspeed = recipe.training.deepspeed or os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true"
    if dtype in ("bfloat16", "float16") and not recipe.model.use_peft and not deepspeed:
        return (
            f"warning: dtype {dtype} with full fine-tuning and no DeepSpeed keeps no fp32 master weights, so small "
            "AdamW updates round away; launch with accelerate_configs/zero2.yaml, or set dtype float32 (bf16 autocast "
            "stays on), or use_peft true"
        )
    return None


def batch_plan(recipe: Recipe) -> str:
    """What one optimizer step and one generation step cost, in the units the loop actually uses."""
    t = recipe.training
    world = t.world_size
    completions_per_update = t.per_device_train_batch_size * t.gradient_accumulation_steps * world
    updates_per_generation = t.steps_per_generation * t.num_iterations / t.gradient_accumulation_steps
    return (
        f"generation step: {t.generation_batch_size // t.num_generations} prompts x {t.num_generations} completions "
        f"= {t.generation_batch_size} samples of <= {t.max_completion_length} tokens; "
        f"optimizer step: {completions_per_update} completions ({t.per_device_train_batch_size} per micro-batch x "
        f"{t.gradient_accumulation_steps} accumulation x {world} processes); "
        f"{updates_per_generation:g} optimizer step(s) per generation step ({t.num_iterations} pass(es) over it); "
        f"rewards {dict(zip(recipe.rewards.names, recipe.rewards.weights))}"
    )
