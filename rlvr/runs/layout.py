"""What a run folder holds, by name: the one place every file name of a run, a sweep and an evaluation is spelled.

    <output_dir>/                        a training run (recipes/<algorithm>.py --output_dir ...)
        config.yaml                      the recipe as it ran (base chain resolved, command-line overrides applied)
        run.json                         which run this folder holds: its id, start, resumes, recipe changes
        run.lock                         held while a run writes here (host, pid); cleared when it ends
        previous-runs/<run id>/          an earlier run's files, moved aside by a fresh start into this folder
        code.json                        which code trained it (rlvr.runs.code_record): sweeps share only its runs
        metrics.jsonl                    every logged row (the console shows one compact line of it per step)
        rollouts.jsonl                   every scored completion
        reward_error.json                the first failing reward call, if any
        checkpoint-<step>/               Trainer checkpoints (trainer_state.json written last)
        model.safetensors, ...           the final policy
        training_args.bin                TRL's arguments, pickled by the Trainer (read back only by an allow-list)
        train.log                        the run's console, when a sweep launched it
        recipe.yaml                      the recipe a sweep wrote and launched
        eval/after.json                  a sweep's held-out evaluation of this run (+ .rollouts.jsonl, .recipe.yaml)
        before_after/before_after.json   `rlvr before-after`
        report.md, plots/, summary.*     `rlvr report` (summary.json / .csv / .md: one row per run)
        speedrun.json                    `rlvr speedrun`: the judge's held-out evaluations and samples to the target
        speedrun/step-<S>/               the policy the judge evaluated at step S, its eval.json (+ .rollouts.jsonl)
    <sweep>/sweep.yaml, <sweep>/eval/before.json, <sweep>/<label>/...   a sweep
    <bench>/grpo/ (its before_after/ too), <bench>/eval_*.json, benchmark.json   benchmarks/tiny_main_job.py
    <speedrun>/<kernel set>-s<seed>/, <speedrun>/summary.md, summary.json       `rlvr speedrun` over seeds x kernel sets

A leaf: it imports nothing of rlvr, so the trainer's callbacks, the analysis and the sweep can all read it.
"""

from __future__ import annotations

import re
from pathlib import Path

CONFIG = "config.yaml"
RUN = "run.json"
LOCK = "run.lock"
PREVIOUS_RUNS = "previous-runs"
CODE = "code.json"
METRICS = "metrics.jsonl"
ROLLOUTS = "rollouts.jsonl"
REWARD_ERROR = "reward_error.json"
TRAINER_STATE = "trainer_state.json"
TRAINING_ARGS = "training_args.bin"
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
TRAIN_LOG = "train.log"
SWEEP_RECIPE = "recipe.yaml"
SWEEP_SPEC = "sweep.yaml"
EVAL_DIR = "eval"
BEFORE_AFTER_DIR = "before_after"
BEFORE_AFTER = "before_after.json"
REPORT = "report.md"
PLOTS_DIR = "plots"
SUMMARY_JSON, SUMMARY_CSV, SUMMARY_MD = "summary.json", "summary.csv", "summary.md"
SPEEDRUN = "speedrun.json"  # its "finished" marks a judged run done (a rerun skips it)
SPEEDRUN_DIR = "speedrun"
SPEEDRUN_EVAL = "eval.json"
DEFAULT_EVAL_ROOT = Path("runs") / "eval"  # `rlvr evaluate` without --output


def rollouts_beside(summary: Path) -> Path:
    """An evaluation's rollouts JSONL beside its summary JSON (`after.json` -> `after.rollouts.jsonl`)."""
    return summary.with_suffix(".rollouts.jsonl")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "-", text).strip("-.") or "model"


def evaluation_name(model_path: str, config: str, split: str, num_prompts: int, num_samples: int) -> str:
    """A default evaluation file name that says what it holds: which model (its path, not just its last part, so
    `runs/a/grpo` and `runs/b/grpo` differ), which recipe, which split and how many prompts x samples, e.g.
    `runs-bench-tiny-grpo.grpo.test.200x8.json`."""
    model = Path(model_path)
    try:
        model = model.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        pass
    return f"{_slug(str(model))}.{_slug(Path(config).stem)}.{split}.{num_prompts}x{num_samples}.json"


WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "adapter_model.safetensors", "adapter_model.bin")
SHARD_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
