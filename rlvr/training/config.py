"""Recipe configuration: our dataclasses beside TRL's, parsed from YAML with CLI overrides, validated up front.

`load_recipe` is the one loader (a recipe may start from another with `base: other.yaml`: its fields, then this
file's on top; any `--field value` overrides both, as in TRL's `trl/scripts/grpo.py`); its `algorithm:` field picks
the config class from the registry. Everything that can be wrong in a config (unknown keys, bad rewards, batch
arithmetic, task options) fails here with one line naming the field, before any model or tokenizer is loaded.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch
from huggingface_hub import constants, try_to_load_from_cache
from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser

from rlvr.data.generate import build_dataset, load_task_dataset
from rlvr.data.spec import DataSpec
from rlvr.inputs import (
    ArgumentParser,
    ConfigError,
    flag_in_message,
    load_recipe_yaml,
    load_yaml_mapping,
    reject_unknown_keys,
)
from rlvr.metrics.keys import TOTAL
from rlvr.rewards.guard import PROBE_ROWS, probe_rewards
from rlvr.rewards.registry import RewardSet, resolve_reward_funcs
from rlvr.runs.cpu_threads import parse_cpu_threads
from rlvr.runs.resume import ALLOW_FLAG, RecipeFields
from rlvr.training import algorithms
from rlvr.training.algorithms import check_algorithm_config, config_class
from rlvr.training.model_loading import check_quantization
from rlvr.training.stopping import check_divergence_fields
from rlvr.training.validation import check_dataset_path, check_paths, check_recipe, check_sample_budget, check_values


@dataclass
class RecipeArguments(ScriptArguments):
    """What a recipe adds to TRL's arguments: the task data, the reward set, and where the run's records go."""

    data: dict | str | None = field(
        default=None,
        metadata={
            "help": "Inline data spec {size, seed, test_size, system_prompt, specs: [{name, weight, config}]}; "
            "ignored when dataset_name (a save_to_disk folder or Hub id) is set."
        },
    )
    curriculum: dict | str | None = field(
        default=None,
        metadata={
            "help": "Online curriculum {policy: threshold|informative, window, advance_above, fall_back_below, "
            "mode, floor, start_level, attribute}: prompts drawn by the data task's reasoning_gym curriculum "
            "levels, weighted by the measured pass rate per level (rlvr/training/curriculum.py)."
        },
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["correctness", "format"],
        metadata={"help": "Registry names (correctness, format, penalty) or dotted paths pkg.module.fn."},
    )
    overlong_max_length: int | None = field(
        default=None, metadata={"help": "DAPO overlong penalty L_max in tokens; unset = no penalty."}
    )
    overlong_cache_length: int | None = field(
        default=None,
        metadata={"help": "DAPO overlong penalty L_cache: the penalty ramps over the last L_cache tokens."},
    )
    metrics_path: str | None = field(
        default=None, metadata={"help": "JSONL of every logged row; default <output_dir>/metrics.jsonl."}
    )
    rollouts_path: str | None = field(
        default=None, metadata={"help": "JSONL of every rollout; default <output_dir>/rollouts.jsonl."}
    )
    eval_prompts: int | None = field(
        default=None,
        metadata={
            "help": "The first N prompts of dataset_test_split that TRL evaluates every eval_steps, scored as "
            "rlvr evaluate scores them (rlvr/metrics/held_out.py); unset = the whole split."
        },
    )
    print_rollouts: bool = field(
        default=True, metadata={"help": "Print a rollout at the first step, every eval_steps (or console_steps)."}
    )
    console_steps: int | None = field(
        default=None, metadata={"help": "Print the step line at the first step, every N and the last; unset: each log."}
    )
    build_tiny_model: bool = field(
        default=False, metadata={"help": "Build a random-weight tiny Qwen3 at model_name_or_path if nothing is there."}
    )
    dry_run: bool = field(default=False, metadata={"help": "Validate the config, print the batch plan, load nothing."})
    memory_budget: str = field(
        default="warn",
        metadata={
            "help": "Before loading weights, compare the planned peak GPU memory with free memory: warn, stop, or off."
        },
    )
    divergence_guard: bool = field(
        default=True,
        metadata={
            "help": "Stop, without saving the step, when loss or grad_norm is NaN/inf (rlvr/training/stopping.py)."
        },
    )
    min_mean_reward: float | None = field(
        default=None, metadata={"help": "Stop, without saving the step, when the mean reward stays below this."}
    )
    min_mean_reward_component: str = field(
        default=TOTAL, metadata={"help": "The mean reward min_mean_reward watches: total, or a reward's name."}
    )
    min_mean_reward_patience: int = field(
        default=1, metadata={"help": "Logged steps in a row below min_mean_reward before the run stops."}
    )
    speedups: str = field(
        default="none",
        metadata={
            "help": "CPU / tiny-model speed-ups that leave samples and loss unchanged (rlvr/speedups): none, "
            "all, or a comma list of shared_prefix, group_prompts, prefix_attention. The tiny CPU recipes "
            "set all; unmeasured on GPUs (docs/speed.md)."
        },
    )
    reward_time_limit: float = field(
        default=300.0,
        metadata={
            "help": "Seconds one call of a reward function may take (0: no limit); past it the run stops with "
            "one line naming the reward and the step, the last checkpoint intact (rewards/guard.py)."
        },
    )
    allow_recipe_change: bool = field(
        default=False,
        metadata={
            "help": "Let a resume change a field that changes what is optimised (learning rate, G, rewards, "
            "data, ...); the change is recorded in the run's run.json (rlvr/runs/folder.py)."
        },
    )
    cpu_threads: str = field(
        default="auto",
        metadata={
            "help": "Intra-op threads per process of a CPU run: auto (the cores available to the process / the "
            "local processes, whatever the load: the line says when other jobs hold the cores; wins over the "
            "OMP_NUM_THREADS=1 accelerate exports), 1 on a crowded machine, or N. See docs/speed.md."
        },
    )


@dataclass
class RLVRConfig(GRPOConfig):
    """GRPOConfig plus what every recipe of the family has: its algorithm, KL estimator and sample budget."""

    algorithm: str = field(
        default="grpo",
        metadata={
            "help": "The algorithm (rlvr/training/algorithms.py): grpo, drgrpo, dapo, rloo, reinforce, maxrl, "
            "gspo, cispo, sapo, ppo. It picks the trainer, the config class and the advantage estimator."
        },
    )
    success_bonus: float = field(
        default=0.0,
        metadata={
            "help": "Added to the advantage of every solved completion (exact answer, full format), after the "
            "algorithm's own: a push up on the policy's own right answers, solved groups included, so it sharpens "
            "where the policy is right (rejection-sampling fine-tuning inside the RL step). 0 = off. See "
            "rlvr/training/trainer.py."
        },
    )
    late_entropy_coef: float | None = field(
        default=None,
        metadata={
            "help": "From optimizer step late_entropy_step on, TRL's entropy coefficient becomes this (entropy_coef "
            "before): sharpen late, once the policy's majority answer is right more often than one sample, without "
            "spending exploration from the start (a negative value minimises entropy). None = off. See "
            "rlvr/training/trainer.py."
        },
    )
    late_entropy_step: int = field(
        default=0, metadata={"help": "The optimizer step (steps already taken) from which late_entropy_coef applies."}
    )
    failed_entropy_coef: float = field(
        default=0.0,
        metadata={
            "help": "An entropy bonus on the completions of all-wrong groups only (no completion solved), on top of "
            "TRL's entropy_coef (which acts on every token): on those tokens the coefficient is entropy_coef + "
            "failed_entropy_coef. A slip that every sample of a group makes leaves no contrast for any advantage; "
            "spreading the policy there lets a right answer be sampled. 0 = off. See rlvr/training/trainer.py."
        },
    )
    kl_estimator: str = field(
        default="k3",
        metadata={
            "help": "Estimator of KL(policy || reference) in the loss when beta > 0: k1, k2 or k3 (TRL's); "
            "see rlvr/training/trainer.py."
        },
    )
    max_generated_samples: int | None = field(
        default=None,
        metadata={
            "help": "Budget in generated samples: stop once the run has generated this many (resampling "
            "included) and run the lr schedule over samples; max_steps stays an upper bound. See "
            "rlvr/training/trainer.py."
        },
    )
    generation_chunk_size: int | None = field(
        default=None,
        metadata={
            "help": "On a GPU, sample at most this many sequences at once (the KV cache scales with it); unset: the "
            "whole generation batch when the memory planner says it fits the free memory, else the pieces the "
            "planner sizes (rlvr/training/cuda_memory.py). A CPU run samples the whole batch."
        },
    )
    eval_log_probs: bool = field(
        default=True,
        metadata={
            "help": "Each evaluation also runs TRL's two log-prob passes (reference and policy) for eval_loss, "
            "eval_kl, eval_entropy and eval_clip_ratio; false = sample and score only (the held-out figures, "
            "eval_reward and the readings stay)."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {self.kl_estimator!r}")


@dataclass
class SingleRolloutConfig(RLVRConfig):
    """RLVRConfig that accepts one rollout per prompt (REINFORCE, PPO).

    GRPO rejects `num_generations < 2` because a group of one has no baseline; REINFORCE uses none. Validation
    runs as for a group of two (every other check still applies), then G is set back to the recipe's value.
    """

    min_generations = 1  # rlvr.training.validation reads it: plain GRPO configs need 2

    def __post_init__(self):
        requested = self.num_generations
        if requested == 1:
            self.num_generations = 2
            if self.generation_batch_size is not None and self.generation_batch_size % 2:
                raise ValueError(
                    f"generation_batch_size ({self.generation_batch_size}) must be even with num_generations 1"
                )
        super().__post_init__()
        self.num_generations = requested
        if self.num_generations_eval is None:
            self.num_generations_eval = requested


@dataclass
class LoadedRecipe:
    """One read of a recipe (`base:` chain resolved, before the command line), its command line and the parsed
    dataclasses: everything downstream (validation, the run's `config.yaml`, the dry run, sweeps) reads these."""

    yaml: dict
    source: str  # where the mapping came from, for messages: the file path, or a caller's name for an in-memory recipe
    argv: list[str]
    args: RecipeArguments
    training: RLVRConfig
    model: ModelConfig


@dataclass
class Recipe:
    """A validated recipe: parsed arguments plus what validation already built (data, rewards, speed-ups)."""

    args: RecipeArguments
    training: RLVRConfig
    model: ModelConfig
    rewards: RewardSet
    dataset: object  # datasets.DatasetDict
    data_spec: DataSpec | None
    yaml: dict = field(default_factory=dict)  # the merged recipe mapping, as read once (`LoadedRecipe.yaml`)
    argv: list[str] = field(default_factory=list)  # the command line that overrode it
    speedups: frozenset = frozenset()  # `parse_speedups(args.speedups)`, parsed once here
    curriculum: object = None  # (CurriculumSpec, levels, rows per level) when the recipe has `curriculum:`
    run_folder: object = None  # rlvr.runs.folder.RunFolder once the run holds its output_dir (the runner)


class RecipeParser(TrlParser):
    """TrlParser whose errors are `ConfigError`s (one line, field named) and whose defaults come from an already-read
    recipe mapping. The field is named as in the YAML (`num_generations`, not `--num_generations`): the same key
    whichever way it was set."""

    def error(self, message):
        raise ConfigError(flag_in_message(message).removeprefix("--"), message)

    def parse_known_args(self, args=None, namespace=None):
        """Raw values are range-checked here, before the dataclasses' `__post_init__` can divide by them."""
        namespace, remaining = super().parse_known_args(args, namespace)
        check_values(vars(namespace), self.dataclass_types)
        return namespace, remaining

    def parse_recipe(self, config: dict, args: list[str], source: str):
        """`config` (the merged YAML) as defaults, `args` (the command line without --config) on top."""
        config = dict(config)
        for key, value in (config.pop("env", None) or {}).items():  # TRL's `env:` block, as its parser does
            os.environ[key] = str(value)
        reject_unknown_keys(config, {action.dest for action in self._actions}, f"config field in {source}")
        self.set_defaults_with_config(**config)
        return self.parse_args_into_dataclasses(args=args)

    def parse_args_and_config(self, args=None, **kwargs):
        """TrlParser's entry point for a parser of other dataclasses (the tiny SFT script): `--config` read once,
        `base:` resolved, the rest of the command line on top."""
        flags, rest = _launch_flags(list(sys.argv[1:] if args is None else args))
        config = load_recipe_yaml(flags.config) if flags.config is not None else {}
        return self.parse_recipe(config, rest, flags.config or "the command line")


# TRL's __post_init__ messages that describe a field in words rather than by name.
PROSE_FIELDS = {"eval batch size": "per_device_eval_batch_size", "generations per prompt": "num_generations"}


def _launch_flags(argv: list[str]):
    """The flags needed before the full parser exists (the algorithm picks the config class), read by argparse
    rather than by hand; everything else stays in `rest` for the full parser."""
    parser = ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--config", help="a recipe YAML file")
    parser.add_argument("--algorithm")
    parser.add_argument("--dry_run", nargs="?", const="true")
    flags, rest = parser.parse_known_args(argv)
    if flags.config is not None and flags.config.startswith("--"):
        raise ConfigError("--config", "needs the path of a recipe YAML file")
    for name, value in (("algorithm", flags.algorithm), ("dry_run", flags.dry_run)):
        if value is not None:
            rest += [f"--{name}", value]  # the full parser reads them too (type-checked there)
    return flags, rest


def parse_error(err: Exception, dataclass_types) -> ConfigError:
    """A dataclass parser's error (or a config's own `__post_init__` check) as one ConfigError: an unknown flag or
    YAML key names itself, anything else the field its message names."""
    message = " ".join(str(err).split()) or type(err).__name__
    unknown = re.search(
        r"(?:Unknown arguments from config file|not used by the HfArgumentParser): \[?'--?(\w+)'", message
    )
    if unknown:
        return ConfigError(unknown.group(1), "unknown command-line field")
    return ConfigError(_field_named_in(message, dataclass_types), message)


def _field_named_in(message: str, dataclass_types) -> str:
    """The first config field a library error message mentions, for a one-line error that names it."""
    names = {f.name for cls in dataclass_types for f in fields(cls)} | {"env"}
    for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message):
        if token in names:
            return token
    return next((name for phrase, name in PROSE_FIELDS.items() if phrase in message), "config")


def choose_algorithm(cli_value: str | None, config: dict, source: str, script_algorithm: str | None = None) -> str:
    """`--algorithm`, else the recipe's `algorithm:`, else the script's; a per-algorithm script (`recipes/dapo.py`)
    refuses another algorithm's recipe in one line, so a DAPO YAML is never trained silently by GRPO's trainer."""
    name = cli_value or config.get("algorithm") or script_algorithm or "grpo"
    if name not in algorithms.ALGORITHMS:  # the registry as it is now (a test extends it)
        raise ConfigError("algorithm", f"unknown algorithm {name!r}; choose one of {', '.join(algorithms.ALGORITHMS)}")
    if script_algorithm is not None and name != script_algorithm:
        raise ConfigError(
            "algorithm",
            f"{source} is a {name!r} recipe; run it with recipes/{name}.py (or recipes/train.py), not recipes/{script_algorithm}.py",
        )
    return name


def load_recipe(
    argv: list[str] | None = None,
    script_algorithm: str | None = None,
    *,
    config: dict | None = None,
    source: str = "the recipe",
) -> LoadedRecipe:
    """THE recipe loader: reads `--config PATH` once (`base:` chain resolved), then parses YAML + CLI into
    (RecipeArguments, the algorithm's config, ModelConfig). A caller holding the mapping already (a sweep) passes
    `config=` and no file is read at all. Every failure is a `ConfigError`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    flags, rest = _launch_flags(argv)
    if config is None:
        if flags.config is None:
            raise ConfigError("--config", "is required: a recipe YAML, e.g. --config recipes/grpo.yaml")
        config, source = load_recipe_yaml(flags.config), flags.config
    elif flags.config is not None:
        raise ConfigError("--config", "this recipe is given in memory; drop --config")
    if not isinstance(config.get("env", {}), dict):
        raise ConfigError("env", "must be a mapping of environment variable: value")
    algorithm = choose_algorithm(flags.algorithm, config, source, script_algorithm)
    defaults = dict(config)
    dry_run = (
        flags.dry_run.lower() in ("true", "1", "yes") if flags.dry_run is not None else config.get("dry_run") is True
    )
    if dry_run and "--use_cpu" not in rest and not torch.cuda.is_available():
        defaults["use_cpu"] = True  # a GPU recipe (bf16) still validates on a laptop: nothing is loaded anyway
    dataclass_types = (RecipeArguments, config_class(algorithm), ModelConfig)
    parser = RecipeParser(dataclass_types)
    try:
        args, training, model_args = parser.parse_recipe(defaults, rest, source)
    except ConfigError:
        raise
    except (ValueError, TypeError, ArithmeticError) as err:  # the configs' own __post_init__ checks
        raise parse_error(err, dataclass_types) from None
    training.algorithm = algorithm
    return LoadedRecipe(config, source, argv, args, training, model_args)


def check_model_reachable(name_or_path: str, will_build: bool) -> None:
    """Offline, a model that is neither a local folder nor in the HF cache fails now, not after a Hub timeout."""
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


def validate(loaded: LoadedRecipe) -> Recipe:
    """Checks that need more than one field; builds the data and the reward set (both cheap, no model) and calls
    each reward once on probe completions (`rlvr.rewards.guard`)."""
    args, training, model = loaded.args, loaded.training, loaded.model
    if not model.model_name_or_path:
        raise ConfigError("model_name_or_path", "is required")
    check_recipe(args, training, model)
    check_algorithm_config(training)
    rewards = resolve_reward_funcs(
        args.reward_funcs, training.reward_weights, args.overlong_max_length, args.overlong_cache_length
    )
    check_divergence_fields(args, rewards.names)
    filter_reward = getattr(training, "dynamic_sampling_reward", None)
    if filter_reward is not None and filter_reward not in rewards.names:
        raise ConfigError("dynamic_sampling_reward", f"{filter_reward!r} is not among the rewards {rewards.names}")
    cap = training.max_completion_length
    if args.overlong_max_length is not None and cap is not None and args.overlong_max_length > cap:
        raise ConfigError(
            "overlong_max_length",
            f"({args.overlong_max_length}) exceeds max_completion_length ({cap}): the penalty could never reach -1",
        )
    if args.dataset_name:
        check_dataset_path(args.dataset_name)
        data_spec, dataset = None, load_task_dataset(args.dataset_name)
    elif args.data is not None:
        data_spec = DataSpec.from_dict(args.data)
        dataset = build_dataset(data_spec) if args.curriculum is None else None  # a curriculum builds level pools
    else:
        raise ConfigError("data", "set an inline data spec or dataset_name")
    curriculum = None
    if args.curriculum is not None:  # the train split becomes per-level pools of the data spec's task
        # opt-in layer, imported only when named (as the speed-ups): a recipe without one loads no curriculum code
        from rlvr.training.curriculum import CurriculumSpec, build_curriculum_data, check_curriculum

        spec = CurriculumSpec.from_dict(args.curriculum)
        check_curriculum(spec, data_spec, training)
        dataset, levels, sizes = build_curriculum_data(spec, data_spec)
        curriculum = (spec, levels, sizes)
    split = args.dataset_train_split
    if split not in dataset:
        raise ConfigError("dataset_train_split", f"{split!r} is not a split of the data ({list(dataset)})")
    if training.eval_strategy != "no" and args.dataset_test_split not in dataset:
        raise ConfigError(
            "eval_strategy",
            f"evaluates the {args.dataset_test_split!r} split, which the data lacks "
            f"({list(dataset)}): set data.test_size or dataset_test_split",
        )
    probe_rewards(
        rewards, [dataset[split][i] for i in range(min(PROBE_ROWS, len(dataset[split])))], args.reward_time_limit
    )
    check_sample_budget(training)
    prompts_per_step = training.generation_batch_size // training.num_generations
    if len(dataset[split]) < prompts_per_step:
        raise ConfigError(
            "data.size",
            f"train split has {len(dataset[split])} rows, fewer than the {prompts_per_step} prompts of one step",
        )
    check_quantization(model, training, dry_run=args.dry_run)  # QLoRA: LoRA, CUDA and bitsandbytes, before loading
    speedups = frozenset()
    if args.speedups != "none":  # opt-in, as in `trainer_for`: a recipe that names none loads no speed-up code
        from rlvr.speedups import parse_speedups

        try:
            speedups = parse_speedups(args.speedups)
        except ValueError as err:
            raise ConfigError("speedups", str(err)) from None
    try:
        parse_cpu_threads(args.cpu_threads)
    except ValueError as err:
        raise ConfigError("cpu_threads", str(err)) from None
    check_paths(args, training, model)
    if not args.dry_run:
        check_model_reachable(model.model_name_or_path, args.build_tiny_model)
    return Recipe(args, training, model, rewards, dataset, data_spec, loaded.yaml, loaded.argv, speedups, curriculum)


def precision_warning(recipe: Recipe) -> str | None:
    """Full fine-tuning of bf16/fp16 weights with plain AdamW has no fp32 master copy: an update smaller than about
    1/256 of a weight rounds away, and at lr 5e-6 most weights never move. DeepSpeed ZeRO keeps fp32 masters; LoRA
    trains fp32 adapters."""
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


KL_ESTIMATORS = ("k1", "k2", "k3")


# ---- Resume (`rlvr.runs.resume.check_resume` compares; the run folder parses no recipe, `resume_fields` hands it
# these). What a resume may change without --allow_recipe_change, by why it leaves the optimisation alone. ONE table: every
# recipe field not listed (the algorithm, G, batch shape, learning rate and schedule, max_steps, rewards and weights,
# data, seed, sampling, the model and its adapters, ...) and every entry of `DERIVED` changes what is optimised.
RESUME_MAY_CHANGE = {
    "memory or speed": (
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "steps_per_generation",  # see DERIVED
        "per_device_eval_batch_size",
        "gradient_checkpointing",
        "gradient_checkpointing_kwargs",
        "activation_checkpointing",
        "speedups",
        "cpu_threads",
        "use_cpu",
        "bf16",
        "fp16",
        "tf32",
        "bf16_full_eval",
        "fp16_full_eval",
        "torch_compile",
        "torch_compile_backend",
        "torch_compile_mode",
        "use_liger_kernel",
        "dataloader_num_workers",
        "dataloader_pin_memory",
        "dataloader_persistent_workers",
        "dataloader_prefetch_factor",
        "memory_budget",
        "generation_chunk_size",
        "vllm_gpu_memory_utilization",
        "ddp_timeout",
        "ddp_backend",
        "env",
    ),
    "records and logging": (
        "metrics_path",
        "rollouts_path",
        "print_rollouts",
        "console_steps",
        "report_to",
        "run_name",
        "project",
        "trackio_space_id",
        "logging_steps",
        "logging_strategy",
        "logging_first_step",
        "logging_nan_inf_filter",
        "log_level",
        "log_level_replica",
        "log_on_each_node",
        "log_completions",
        "num_completions_to_print",
        "log_unique_prompts",
        "disable_tqdm",
        "push_to_hub",
        "hub_model_id",
        "hub_strategy",
        "hub_private_repo",
        "hub_always_push",
        "hub_revision",
    ),
    "when to save, evaluate or stop early": (
        "save_strategy",
        "save_steps",
        "save_total_limit",
        "save_only_model",
        "save_on_each_node",
        "eval_strategy",
        "eval_steps",
        "eval_on_start",
        "eval_prompts",
        "num_generations_eval",
        "eval_log_probs",
        "divergence_guard",
        "min_mean_reward",
        "min_mean_reward_component",
        "min_mean_reward_patience",
        "reward_time_limit",
        "build_tiny_model",
    ),
}
NOTED = {name: kind for kind, names in RESUME_MAY_CHANGE.items() for name in names}
# How this command was started and where the folder is now (a run folder may be moved), not what the run trains.
NOT_COMPARED = ("resume_from_checkpoint", "allow_recipe_change", "dry_run", "output_dir", "logging_dir")
# Quantities the micro-batch fields above combine into: changing these does change the optimisation.
DERIVED = {
    "completions per optimizer step": (
        ("per_device_train_batch_size", "gradient_accumulation_steps", "processes"),
        lambda v: v["per_device_train_batch_size"] * v["gradient_accumulation_steps"] * v["processes"],
    ),
    "optimizer steps per generation step": (
        ("steps_per_generation", "num_iterations", "gradient_accumulation_steps"),
        lambda v: v["steps_per_generation"] * v["num_iterations"] / v["gradient_accumulation_steps"],
    ),
}


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


def config_values(config_path: Path, processes: int) -> dict:
    """`recipe_values` of a run's config.yaml, parsed as this command's recipe is (what a resume compares with)."""
    old = load_yaml_mapping(config_path, "resume_from_checkpoint", "the recipe mapping the run trained with")
    env = old.pop("env", None)  # parsing it would set the old run's environment variables in this process
    try:
        loaded = load_recipe([], config=old, source=str(config_path))
    except ConfigError as err:
        raise ConfigError(
            "resume_from_checkpoint",
            f"cannot compare with the run's {config_path} ({err}); pass {ALLOW_FLAG} to resume without the comparison",
        ) from None
    values = recipe_values(loaded.args, loaded.training, loaded.model, processes)
    values["env"] = env
    return values


def resume_fields(recipe: Recipe, processes: int) -> RecipeFields:
    """What a resume of `recipe` on `processes` processes compares, for the run folder (`rlvr.runs.resume`)."""

    def current() -> dict:
        values = recipe_values(recipe.args, recipe.training, recipe.model, processes)
        values["env"] = recipe.yaml.get("env")
        return values

    return RecipeFields(current, config_values, NOTED, {name: inputs for name, (inputs, _) in DERIVED.items()})
