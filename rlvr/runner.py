"""The shared runner behind every recipe script: parse, validate, load, train, in numbered steps.

    accelerate launch recipes/grpo.py --config recipes/grpo.yaml [--any_field value ...]
"""

from __future__ import annotations

import os
import sys

from rlvr.config import Recipe, batch_plan, parse_args, precision_warning, validate
from rlvr.errors import ConfigError, cli


def callbacks_for(recipe: Recipe) -> list:
    from rlvr.callbacks import GroupStatsCallback, MetricsJsonlCallback, RolloutLedger, RolloutLogCallback

    return [
        GroupStatsCallback(),
        RolloutLedger(),
        RolloutLogCallback(recipe.args.rollouts_path, recipe.args.print_rollouts),
        MetricsJsonlCallback(recipe.args.metrics_path),
    ]


def build_trainer(recipe: Recipe, trainer_cls):
    """Model, tokenizer and trainer from a validated recipe (this is where weights get loaded)."""
    from trl import get_peft_config

    from rlvr.speed import apply_process_speedups, parse_speedups
    from rlvr.tiny_model import ensure_tiny_model

    args, training, model_args = recipe.args, recipe.training, recipe.model
    speedups = parse_speedups(args.speedups)
    apply_process_speedups(speedups, use_cpu=training.use_cpu or training.device.type == "cpu")
    if args.build_tiny_model:
        ensure_tiny_model(model_args.model_name_or_path)
    training.model_init_kwargs = {
        "revision": model_args.model_revision,
        "trust_remote_code": training.trust_remote_code,
        "attn_implementation": model_args.attn_implementation,
        "dtype": model_args.dtype,
        **(training.model_init_kwargs or {}),
    }
    training.reward_weights = recipe.rewards.weights
    training.restore_callback_states_from_checkpoint = True  # the rollout ledger's counters continue on resume
    trainer = trainer_cls(
        model=model_args.model_name_or_path,
        reward_funcs=recipe.rewards.funcs,
        args=training,
        train_dataset=recipe.dataset[args.dataset_train_split],
        eval_dataset=recipe.dataset.get(args.dataset_test_split) if training.eval_strategy != "no" else None,
        peft_config=get_peft_config(model_args),
        callbacks=callbacks_for(recipe),
    )
    trainer.speedups = speedups
    return trainer


def write_run_config(argv: list[str], recipe: Recipe) -> None:
    """`<output_dir>/config.yaml`: the recipe YAML with the command-line overrides applied, i.e. what actually ran."""
    from pathlib import Path

    import yaml

    config = {}
    if "--config" in argv:
        config = yaml.safe_load(Path(argv[argv.index("--config") + 1]).read_text()) or {}
    parsed = (recipe.args, recipe.training, recipe.model)
    for token in argv:
        key = token[2:].replace("-", "_") if token.startswith("--") else None
        if key and key != "config":
            value = next((getattr(d, key) for d in parsed if hasattr(d, key)), None)
            config[key] = getattr(value, "value", value)  # enums (save_strategy, ...) as their YAML string
    target = Path(recipe.training.output_dir) / "config.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    header = f"# what ran: {' '.join(['<script>', *argv])}\n"
    target.write_text(header + yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=120))


def resume_checkpoint(value, output_dir: str) -> str | None:
    """`resume_from_checkpoint: true` means the last checkpoint in output_dir (a fresh start if there is none yet)."""
    if value in (None, "", False, "false", "False"):
        return None
    if value in (True, "true", "True", "last"):
        from transformers.trainer_utils import get_last_checkpoint

        return get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
    if not os.path.isdir(value):
        raise ConfigError("resume_from_checkpoint", f"no checkpoint folder at {value!r}")
    return value


def prepare(argv: list[str] | None = None, trainer_cls=None, config_cls=None):
    """Steps 1-3: returns (recipe, trainer, checkpoint), or (recipe, None, None) for a dry run."""
    from trl import GRPOConfig

    from rlvr.tracking import configure_wandb

    # 1. Parse YAML + CLI and validate everything that can be checked without a model.
    args, training, model_args = parse_args(argv, config_cls or GRPOConfig)
    recipe = validate(args, training, model_args)
    checkpoint = resume_checkpoint(training.resume_from_checkpoint, training.output_dir)
    print(f"[plan] {batch_plan(recipe)}", flush=True)
    if warning := precision_warning(recipe):
        print(warning, flush=True)
    if args.memory_budget != "off":  # on a GPU: planned peak vs free memory, remedies in order of value
        from rlvr.memory_plan import check_memory_budget

        check_memory_budget(recipe, stop=args.memory_budget == "stop")
    if args.dry_run:
        return recipe, None, None

    # 2. Records and tracking: the config as run goes beside the metrics; wandb never prompts for a login.
    if training.process_index == 0:
        write_run_config(list(sys.argv[1:] if argv is None else argv), recipe)
    configure_wandb(training.report_to)

    # 3. Model, tokenizer, rewards and callbacks go into the trainer.
    if trainer_cls is None:
        from rlvr.trainer import RLVRGRPOTrainer as trainer_cls
    return recipe, build_trainer(recipe, trainer_cls), checkpoint


def main(argv: list[str] | None = None, trainer_cls=None, config_cls=None) -> object | None:
    """Run a recipe. Returns the trainer (None for a dry run). Raises ConfigError on bad input."""
    recipe, trainer, checkpoint = prepare(argv, trainer_cls, config_cls)
    if trainer is None:
        return None
    # 4. Train (resuming if asked), then save the final policy beside the checkpoints.
    trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model(recipe.training.output_dir)
    return trainer


def run(trainer_cls=None, config_cls=None) -> None:
    """Console entry point: bad input ends the process with one line on stderr and exit status 2."""
    cli(main, sys.argv[1:], trainer_cls=trainer_cls, config_cls=config_cls)
