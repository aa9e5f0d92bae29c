"""The shared runner behind every recipe script: parse, validate, load, train, in numbered steps.

    accelerate launch recipes/grpo.py --config recipes/grpo.yaml [--any_field value ...]
    accelerate launch recipes/train.py --config any_recipe.yaml     # the recipe's `algorithm:` picks the trainer

A per-algorithm script passes its algorithm's name; the registry (`rlvr/training/algorithms.py`) gives the trainer
and config classes, and a recipe of another algorithm is refused in one line.

Reading one GRPO step of recipes/grpo.yaml: `recipes/grpo.py` calls `run`, this module builds the trainer (`prepare`,
`build_trainer`), and one optimizer step then runs through `STEP_FILES`, in that order; those ten files are all the
project code a step executes (tests/test_step_files.py traces a step and holds the list to it).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from functools import partial
from pathlib import Path

import yaml
from trl import get_peft_config

from rlvr.inputs import ConfigError, cli
from rlvr.metrics.callbacks import (
    ConsoleLineCallback,
    MetricsJsonlCallback,
    RolloutLedger,
    RolloutLogCallback,
    quiet_console,
    quiet_progress_bars,
    silence_known_warnings,
)
from rlvr.metrics.readings import ReadingsCallback
from rlvr.planning.plan import check_memory_budget
from rlvr.rewards.guard import guard_rewards
from rlvr.runs import layout
from rlvr.runs.checkpoints import (
    check_best_checkpoint,
    check_pickles,
    checkpoint_problem,
    disk_full_exits,
    last_complete_checkpoint,
)
from rlvr.runs.code_record import record_code
from rlvr.runs.cpu_threads import apply_cpu_threads
from rlvr.runs.folder import check_model_outside, claim, refuse_if_in_use
from rlvr.runs.resume import IntervalsOfThisCommand, RunIdentityCallback, check_resume
from rlvr.runs.tracking import configure_trackers
from rlvr.training.config import Recipe, batch_plan, load_recipe, precision_warning, resume_fields, validate
from rlvr.training.model_loading import model_init_kwargs, quantization_config
from rlvr.training.stopping import (
    DivergenceGuard,
    PreemptionCallback,
    SampleBudgetCallback,
    closing_note,
    early_stop,
)
from rlvr.training.trainer import trainer_for, trains_on_cuda

STEP_FILES = (
    "rlvr/training/trainer.py",  # RLVRTrainer: TRL's step plus its seams (rewards in, advantages, KL, sample budget)
    "rewards/guard.py",  # every reward call guarded: one named line instead of a crash, a time limit
    "rewards/functions.py",  # the reward functions and the exact-answer test
    "rlvr/metrics/readings.py",  # the scored batch gathered once over processes, and what is read off it
    "rlvr/metrics/reward_batch.py",  # RewardBatch: the reward components and flat groups
    "rlvr/metrics/step_metrics.py",  # the step/* watches (truncation, false full credit, hollow format)
    "rlvr/training/algorithms.py",  # the registry: the algorithm's advantages, flat groups zeroed
    "rlvr/metrics/callbacks.py",  # the ledger, rollouts.jsonl, metrics.jsonl and the console line
    "rlvr/metrics/keys.py",  # every metric key, named once
    "rlvr/training/stopping.py",  # at the step's end: preemption, divergence and the sample budget
)


def callbacks_for(recipe: Recipe) -> list:
    args = recipe.args
    ledger = RolloutLedger()
    budget = recipe.training.max_generated_samples
    stops = (
        PreemptionCallback(),  # SIGTERM/SIGINT: finish the step, checkpoint, stop (rlvr/training/stopping.py)
        DivergenceGuard(
            args.divergence_guard, args.min_mean_reward, args.min_mean_reward_component, args.min_mean_reward_patience
        ),
    )  # after PreemptionCallback: it sees (and may cancel) its save
    curriculum = []
    if recipe.curriculum:  # opt-in layer, imported only when named (as in `trainer_for`)
        from rlvr.training.curriculum import curriculum_callback_for

        spec, levels, sizes = recipe.curriculum
        curriculum = [curriculum_callback_for(spec, levels, recipe.training.num_generations, sizes)]
    cuda = []
    if trains_on_cuda(recipe.training):  # memory/peak_* into the row before the records and the console read it
        from rlvr.training.cuda_memory import CudaMemoryCallback

        cuda = [CudaMemoryCallback()]
    return [
        *cuda,
        ReadingsCallback(),
        ledger,
        *([SampleBudgetCallback(ledger, budget)] if budget else []),
        RolloutLogCallback(args.rollouts_path, args.print_rollouts, args.console_steps),  # at eval_steps
        # the closing row of a run the stops end early says so (`Run.finished` reads it)
        MetricsJsonlCallback(recipe.args.metrics_path, partial(closing_note, callbacks=stops)),
        *curriculum,
        *stops,
        ConsoleLineCallback(args.console_steps),  # a compact line every console_steps; metrics.jsonl has every row
        RunIdentityCallback(recipe.run_folder.run_id if recipe.run_folder else None),  # the run id, in each checkpoint
        IntervalsOfThisCommand(),  # a resume logs, evaluates and saves as this command says, not as the checkpoint did
    ]


def build_trainer(recipe: Recipe):
    """Model, tokenizer and trainer from a validated recipe (this is where weights get loaded)."""
    args, training, model_args = recipe.args, recipe.training, recipe.model
    apply_cpu_threads(
        args.cpu_threads,
        use_cpu=training.use_cpu or training.device.type == "cpu",
        echo=lambda line: print(line, flush=True),
    )
    if args.build_tiny_model:  # imported only when a recipe asks for it: a GPU recipe imports no tiny-model code
        from rlvr.recipes.tiny.model import ensure_tiny_model

        ensure_tiny_model(model_args.model_name_or_path)
    training.model_init_kwargs = model_init_kwargs(model_args, training)
    training.reward_weights = recipe.rewards.weights
    training.restore_callback_states_from_checkpoint = True  # the rollout ledger's counters continue on resume
    trainer = trainer_for(recipe)(  # the algorithm's trainer + the layers the recipe names (curriculum, speed-ups)
        model=model_args.model_name_or_path,
        reward_funcs=guard_rewards(recipe.rewards.funcs, training.output_dir, args.reward_time_limit),  # one named line
        args=training,
        train_dataset=recipe.dataset[args.dataset_train_split],
        eval_dataset=held_out_prompts(recipe),
        quantization_config=quantization_config(model_args),  # QLoRA, as trl/scripts/grpo.py passes it
        peft_config=get_peft_config(model_args),
        callbacks=callbacks_for(recipe),
    )
    quiet_console(trainer)  # the progress bar stays, the per-log dict goes (ConsoleLineCallback prints the line)
    return trainer


def held_out_prompts(recipe: Recipe):
    """What TRL evaluates every eval_steps: the first `eval_prompts` of the held-out split (all of it without)."""
    if recipe.training.eval_strategy == "no":
        return None
    split = recipe.dataset[recipe.args.dataset_test_split]
    return split.select(range(min(recipe.args.eval_prompts or len(split), len(split))))


def write_run_config(recipe: Recipe) -> None:
    """`<output_dir>/config.yaml`: the recipe YAML with the command-line overrides applied, i.e. what actually ran."""
    config = dict(recipe.yaml)  # as read once, `base:` chain resolved: the file holds every field that ran
    argv = recipe.argv
    config["algorithm"] = recipe.training.algorithm
    parsed = (recipe.args, recipe.training, recipe.model)
    for token in argv:
        key = token[2:].split("=", 1)[0].replace("-", "_") if token.startswith("--") else None  # --k v or --k=v
        if key and key != "config":
            value = next((getattr(d, key) for d in parsed if hasattr(d, key)), None)
            config[key] = getattr(value, "value", value)  # enums (save_strategy, ...) as their YAML string
    target = Path(recipe.training.output_dir) / layout.CONFIG
    target.parent.mkdir(parents=True, exist_ok=True)
    header = f"# what ran: {' '.join(['<script>', *argv])}\n"
    target.write_text(header + yaml.safe_dump(config, sort_keys=False, default_flow_style=None, width=120))


def resume_checkpoint(value, output_dir: str) -> str | None:
    """`resume_from_checkpoint: true` means the last COMPLETE checkpoint in output_dir (`rlvr.runs.checkpoints`): torn
    folders from a crash mid-save are skipped, and either case is said in one line. Whose checkpoint it is, and what
    the recipe changes, is `rlvr.runs.resume.check_resume`'s."""
    if value in (None, "", False, "false", "False"):
        return None
    if value in (True, "true", "True", "last"):
        checkpoint, torn = last_complete_checkpoint(output_dir)
        for path, why in torn:
            print(f"[resume] skipping incomplete {path} ({why})", flush=True)
        if not checkpoint:
            print(f"[resume] no complete checkpoint in {output_dir}: starting from step 0", flush=True)
        else:
            check_pickles(checkpoint)
            check_best_checkpoint(checkpoint)
        return checkpoint
    if not os.path.isdir(value):
        raise ConfigError("resume_from_checkpoint", f"no checkpoint folder at {value!r}")
    if problem := checkpoint_problem(value):
        raise ConfigError("resume_from_checkpoint", f"{value} is not a complete checkpoint: {problem}")
    check_pickles(value)
    check_best_checkpoint(value)
    return value


def hold_run_folder(recipe: Recipe):
    """One run per folder (`rlvr/runs/folder.py`), read-only part: the folder is not another live run's, the
    checkpoint is this folder's run's, and the recipe changes only what a resume may change. Returns the checks'
    outcome for `claim_run_folder`."""
    training = recipe.training
    checkpoint = resume_checkpoint(training.resume_from_checkpoint, training.output_dir)
    resume = check_resume(recipe, checkpoint, training.world_size, resume_fields(recipe, training.world_size))
    if checkpoint:
        print(f"[resume] from {checkpoint} (run {resume.run_id or 'from before run ids'})", flush=True)
    check_model_outside(recipe, resume)
    return resume


def claim_run_folder(recipe: Recipe, resume) -> None:
    """Lock the folder for this run's lifetime, move an earlier run aside on a fresh start, record the run id."""
    recipe.run_folder = claim(recipe, resume, recipe.training.world_size)


def prepare(argv: list[str] | None = None, algorithm: str | None = None):
    """Steps 1-3: returns (recipe, trainer, checkpoint), or (recipe, None, None) for a dry run.

    `algorithm` is the calling script's (None: whatever the recipe's `algorithm:` field says)."""
    # 1. Parse YAML + CLI and validate everything that can be checked without a model; a folder another live run
    #    holds is refused first, and a resume must continue this folder's run with the same recipe.
    loaded = load_recipe(argv, algorithm)
    allocator = ""
    if trains_on_cuda(loaded.training) and not loaded.args.dry_run:  # before the planner's mem_get_info starts CUDA
        from rlvr.training.cuda_memory import configure_allocator

        allocator = f"; CUDA allocator: {configure_allocator()}"
    if not loaded.args.dry_run:
        refuse_if_in_use(loaded)
    recipe = validate(loaded)
    args, training = recipe.args, recipe.training
    resume = hold_run_folder(recipe)
    checkpoint = resume.checkpoint
    if resume.finished:  # the same command on a finished run (a Slurm requeue, a script run twice): not an error
        print(
            f"[resume] {training.output_dir} is finished: {checkpoint} is at max_steps {training.max_steps}; nothing "
            f"to do, nothing written (to train further, raise max_steps with --allow_recipe_change true)",
            flush=True,
        )
        return recipe, None, None
    print(f"[plan] {batch_plan(recipe)}{allocator}", flush=True)
    if warning := precision_warning(recipe):
        print(warning, flush=True)
    if args.memory_budget != "off":  # on a GPU: planned peak vs free memory, remedies in order of value
        check_memory_budget(recipe, stop=args.memory_budget == "stop")
    if args.dry_run:
        print(
            f"[dry run] the recipe is valid; nothing loaded, nothing written (a run would write to {training.output_dir}/)",
            flush=True,
        )
        return recipe, None, None

    # 2. Records and tracking: the trackers are checked first (a missing one is one line, nothing written), then the
    #    folder becomes this run's (locked, an earlier run moved aside, run.json), and the config as run and the code
    #    that ran it go beside the metrics; wandb never prompts, TensorBoard writes into the run folder and prints how
    #    to watch it live.
    configure_trackers(training.report_to, training.output_dir)
    claim_run_folder(recipe, resume)
    try:
        if training.process_index == 0:
            print(
                f"[run] writing to {training.output_dir}/ ({layout.CONFIG}, {layout.CODE}, {layout.METRICS}, "
                f"{layout.ROLLOUTS}, checkpoints, final model) as run {recipe.run_folder.run_id}",
                flush=True,
            )
            write_run_config(recipe)
            record_code(training.output_dir)  # which code trained it: sweeps share a run only with the same code

        # 3. Model, tokenizer, rewards and callbacks go into the algorithm's trainer. Library warnings no recipe can
        #    act on are silenced by message first (rlvr/metrics/callbacks.py says which, and why each is harmless).

        silence_known_warnings()
        quiet_progress_bars()
        return recipe, build_trainer(recipe), checkpoint
    except BaseException:
        recipe.run_folder.release()
        raise


def main(argv: list[str] | None = None, algorithm: str | None = None) -> object | None:
    """Run a recipe. Returns the trainer (None for a dry run). Raises ConfigError on bad input."""
    recipe, trainer, checkpoint = prepare(argv, algorithm)
    if trainer is None:
        return None
    return train(recipe, trainer, checkpoint)


def train(recipe: Recipe, trainer, checkpoint: str | None):
    """Step 4 of `main`, for a trainer `prepare` built (a caller may add its own callbacks in between, as the speedrun
    judge does). Returns the trainer."""
    # 4. Train (resuming if requested), then save the final policy beside the checkpoints. A run stopped early
    #    (preempted, diverged) saves no final policy: it ends with its one line and exit status.
    #    A full disk ends the run with one line naming the newest complete checkpoint (rlvr/runs/checkpoints.py).

    # What is loaded by now (libraries, model, data: ~550k objects) lives to the end. Frozen, it is out of the cyclic
    # collector's walk: a full collection cost 0.23 s, about one per 70 tiny steps, and now ~0 (docs/measurements/speed.md)
    gc.freeze()
    with disk_full_exits(recipe.training.output_dir), released(recipe.run_folder):
        trainer.train(resume_from_checkpoint=checkpoint)
        if stop := early_stop(trainer.callback_handler.callbacks):
            if trainer.args.process_index == 0:
                print(stop.line, file=sys.stderr, flush=True)
            sys.exit(stop.status)
        trainer.save_model(recipe.training.output_dir)
        if trainer.accelerator.is_main_process:
            out = recipe.training.output_dir
            print(
                f"[run] saved the final model to {out}/; metrics in {recipe.args.metrics_path or f'{out}/{layout.METRICS}'}, "
                f"rollouts in {recipe.args.rollouts_path or f'{out}/{layout.ROLLOUTS}'}",
                flush=True,
            )
    return trainer


@contextlib.contextmanager
def released(run_folder):
    """The folder's lock goes when the run ends: finished, stopped early, failed or interrupted."""
    try:
        yield
    finally:
        run_folder.release()


def run(algorithm: str | None = None) -> None:
    """Console entry point of a recipe script: bad input ends the process with one line on stderr and exit status 2."""
    cli(main, sys.argv[1:], algorithm=algorithm)
