"""The speedrun judge: how many generated samples a recipe needs before its policy first scores the target on the
main job's full held-out evaluation.

    rlvr speedrun --config recipes/tiny/speedrun.yaml --output_dir runs/speedrun/record          # seeds 42 1 2 x default, avx2
    rlvr speedrun --config recipes/tiny/grpo.yaml --output_dir runs/speedrun/grpo --seeds 42 --settings default

Each run trains the recipe (`rlvr.training.runner`, as `accelerate launch recipes/<algorithm>.py` runs it) in a
process of its own per (kernel set, seed) (`rlvr.runs.cpu_kernels`); `SpeedrunJudge` evaluates it every
`--eval_every` steps with `rlvr evaluate`'s own code on the main job's full held-out set and sampling
(`MAIN_JOB_CONFIG`), and stops it at the first evaluation at or above `--target`. Samples, not seconds, are the
figure: the count of generated completions (`RolloutLedger`) is the same on any machine; seconds and the load are a
direction only. Each evaluation samples on forked random number generators, so the judge does not change the run it
judges (tests/test_speedrun_judge.py). How to read it, with the baseline and the record: docs/evaluation-and-reports.md
and results/speedrun/README.md.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

from transformers import TrainerCallback

from rlvr.analysis.evaluate import plan_evaluation, run_evaluation
from rlvr.analysis.summaries import SPEEDRUN_TARGET
from rlvr.inputs import ArgumentParser, ConfigError, check_writable_folder, cli, non_negative_float, positive_int
from rlvr.metrics.callbacks import RolloutLedger
from rlvr.metrics.keys import EXACT_MATCH
from rlvr.runs import layout
from rlvr.runs.cpu_kernels import KERNEL_SETTINGS, environment_for, setting_of
from rlvr.training import runner
from rlvr.training.config import load_recipe, validate
from rlvr.training.trainer import forked_rng

MAIN_JOB_CONFIG = "recipes/tiny/grpo.yaml"  # the main job's recipe: its held-out set and sampling judge every recipe
EVAL_SAMPLES = 8  # per held-out word, as the main job's before/after figures
EVAL_EVERY = 10  # optimizer steps between evaluations: the main job's eval_steps (640 of its samples)


def main_job_scorer(num_prompts: int | None = None):
    """A function from a policy folder to its held-out exact match, as `rlvr evaluate --model FOLDER --config
    MAIN_JOB_CONFIG --num_samples 8 --k 1 8` (seed 0) gives it: the main job's figure (`num_prompts`: the first N
    held-out words only, for tests). The recipe is read now, before any trainer exists (`plan_evaluation`)."""
    plan = plan_evaluation(MAIN_JOB_CONFIG, num_samples=EVAL_SAMPLES, ks=(1, EVAL_SAMPLES), num_prompts=num_prompts)

    def score(folder: Path) -> float:
        summary = run_evaluation(plan, str(folder), output=str(folder / layout.SPEEDRUN_EVAL), show_progress=False)
        return summary["overall"][EXACT_MATCH]

    return score


class SpeedrunJudge(TrainerCallback):
    """At the end of every `eval_every`-th optimizer step (and the last): save the policy, evaluate it on the full
    held-out set, record (step, samples, exact match, seconds, load), and stop the run at the first evaluation at or
    above `target` unless `to_end`. `result` is what `speedrun.json` holds; it is rewritten after each evaluation."""

    def __init__(self, trainer, ledger: RolloutLedger, eval_every: int, target: float, to_end: bool, score):
        self.trainer, self.ledger = trainer, ledger
        self.eval_every, self.target, self.to_end = eval_every, target, to_end
        self.score = score
        self.out = Path(trainer.args.output_dir)
        self.started = time.perf_counter()
        self.eval_s = 0.0
        self.result = {
            "eval_every": eval_every,
            "target": target,
            "to_end": to_end,
            "evaluations": [],
            "reached": None,
            "final": None,
            "finished": False,
        }

    def on_step_end(self, args, state, control, **kwargs):
        step, last = state.global_step, state.global_step >= state.max_steps
        if not last and (step % self.eval_every or self.result["reached"] is not None):
            return control  # after the target (--to_end) only the last step is evaluated
        train_s = time.perf_counter() - self.started - self.eval_s
        t0 = time.perf_counter()
        folder = self.out / layout.SPEEDRUN_DIR / f"step-{step}"
        self.trainer.save_model(str(folder))
        with forked_rng():  # the run's next steps draw what they would have drawn without this evaluation
            exact = self.score(folder)
        self.eval_s += time.perf_counter() - t0
        row = {
            "step": step,
            "samples": self.ledger.generated_samples,
            EXACT_MATCH: exact,
            "train_s": round(train_s, 1),
            "load": round(os.getloadavg()[0], 2),
        }
        self.result["evaluations"].append(row)
        self.result["eval_s"] = round(self.eval_s, 1)
        print(f"[speedrun] step {step}: {row['samples']:,} samples, held-out exact match {exact:.1%}", flush=True)
        if exact >= self.target and self.result["reached"] is None:
            self.result["reached"] = row
            if not self.to_end:
                control.should_training_stop = True
        if last or control.should_training_stop:
            self.result["final"] = row
        self.write()
        return control

    def write(self) -> None:
        (self.out / layout.SPEEDRUN).write_text(json.dumps(self.result, indent=2) + "\n")


def recipe_argv(config: str, output_dir: Path, seed: int, extra: list[str]) -> list[str]:
    return ["--config", config, "--output_dir", str(output_dir), "--seed", str(seed), *extra]


def check_recipe(config: str, output_dir: Path, seed: int, extra: list[str], reference) -> None:
    """Before any model loads: the recipe (with its overrides) is valid and trains on the main job's data from the
    main job's starting model (`reference`: MAIN_JOB_CONFIG's parsed arguments), so the held-out words the judge
    evaluates on are held out from its training too."""
    recipe = load_recipe([*recipe_argv(config, output_dir, seed, extra), "--dry_run", "true"])
    for field, mine, theirs in (
        ("model_name_or_path", recipe.model.model_name_or_path, reference.model.model_name_or_path),
        ("data", recipe.args.data, reference.args.data),
        ("dataset_name", recipe.args.dataset_name, reference.args.dataset_name),
    ):
        if mine != theirs:
            raise ConfigError(
                field,
                f"{mine!r} differs from the main job's {theirs!r} ({MAIN_JOB_CONFIG}): the judge compares recipes on "
                "its task data, held-out words and starting model",
            )
    validate(recipe)


def judge_run(
    config: str, output_dir: Path, seed: int, eval_every: int, target: float, to_end: bool, extra, score=None
) -> dict:
    """One run in this process (its kernel set is this process's): train, evaluate every `eval_every` (`score`, a
    policy folder's held-out exact match; default the main job's full evaluation), stop at the target. Writes and
    returns `speedrun.json`'s content."""
    score = score or main_job_scorer()
    recipe, trainer, checkpoint = runner.prepare(recipe_argv(config, output_dir, seed, extra))
    ledger = next(c for c in trainer.callback_handler.callbacks if isinstance(c, RolloutLedger))
    judge = SpeedrunJudge(trainer, ledger, eval_every, target, to_end, score)
    trainer.add_callback(judge)
    judge.result.update(
        config=config, seed=seed, setting=setting_of(os.environ), overrides=extra, load_start=os.getloadavg()[0]
    )
    runner.train(recipe, trainer, checkpoint)
    judge.result["finished"] = True
    judge.write()
    return judge.result


def run_folder(root: Path, setting: str, seed: int) -> Path:
    return root / f"{setting}-s{seed}"


def finished(folder: Path) -> dict | None:
    path = folder / layout.SPEEDRUN
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    return result if result.get("finished") else None


def summary(results: list[dict]) -> dict:
    """The median samples to the target over runs, a run that never reached it counting as more than any that did
    (the median is None when it falls on such a run)."""
    samples = sorted((r["reached"]["samples"] if r["reached"] else float("inf")) for r in results)
    middle = median(samples) if samples else float("inf")
    return {
        "runs": len(results),
        "reached": sum(r["reached"] is not None for r in results),
        "median_samples": None if middle == float("inf") else middle,
    }


def summary_table(results: list[dict], totals: dict) -> str:
    lines = [
        (
            "| kernel set | seed | samples to target | step | held-out exact match there | train s (load at start) "
            "| final step: held-out |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        hit, final = r["reached"], r["final"]
        reached = (
            f"{hit['samples']:,} | {hit['step']} | {hit[EXACT_MATCH]:.1%} | {hit['train_s']:.0f} ({r['load_start']:.2f})"
            if hit
            else f"not reached | - | - | {final['train_s']:.0f} ({r['load_start']:.2f})"
        )
        lines.append(f"| {r['setting']} | {r['seed']} | {reached} | {final['step']}: {final[EXACT_MATCH]:.1%} |")
    middle = totals["median_samples"]
    lines.append("")
    lines.append(
        f"Median samples to {results[0]['target']:.0%}: {'not reached' if middle is None else f'{middle:,.0f}'} "
        f"({totals['reached']} of {totals['runs']} runs reached it). Held-out: the main job's 200 words x "
        f"{EVAL_SAMPLES} samples, every {results[0]['eval_every']} steps. Seconds are training wall time on a shared "
        "CPU, evaluations excluded: a direction, not a target."
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    # no abbreviations: `--seed 3` is a recipe field the judge refuses, not `--seeds 3`
    parser = ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--config", required=True, help="the recipe to judge")
    parser.add_argument("--output_dir", required=True, help="one run folder per kernel set and seed, and the summary")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 1, 2])
    parser.add_argument("--settings", nargs="+", choices=list(KERNEL_SETTINGS), default=list(KERNEL_SETTINGS))
    parser.add_argument(
        "--eval_every", type=positive_int, default=EVAL_EVERY, help="optimizer steps between full held-out evaluations"
    )
    parser.add_argument("--target", type=non_negative_float, default=SPEEDRUN_TARGET, help="held-out exact match")
    parser.add_argument("--to_end", action="store_true", help="train to max_steps after the target (final figure)")
    parser.add_argument(
        "--in_process",
        action="store_true",
        help="run the one (seed, kernel set) in this process, whose environment must hold that kernel set",
    )
    args, extra = parser.parse_known_args(argv)  # anything else overrides the recipe, e.g. --max_steps 200
    if args.target > 1:
        raise ConfigError("--target", f"is a held-out exact match in [0, 1], got {args.target}")
    for flag in extra:
        if flag.split("=")[0] in ("--seed", "--output_dir"):
            raise ConfigError(flag, "the judge sets each run's seed and folder: use --seeds and --output_dir")
    root = Path(args.output_dir)
    check_writable_folder(root, "--output_dir")
    runs = [(setting, seed) for setting in args.settings for seed in args.seeds]
    reference = load_recipe(["--config", MAIN_JOB_CONFIG])
    for setting, seed in runs:  # every run's recipe checked before the first model loads
        check_recipe(args.config, run_folder(root, setting, seed), seed, extra, reference)
    if args.in_process:
        if len(runs) != 1:
            raise ConfigError("--in_process", f"runs one (seed, kernel set); got {len(runs)}")
        if setting_of(os.environ) != runs[0][0]:
            raise ConfigError("--in_process", f"this process's environment does not hold the {runs[0][0]} kernel set")
        setting, seed = runs[0]
        return judge_run(
            args.config, run_folder(root, setting, seed), seed, args.eval_every, args.target, args.to_end, extra
        )

    results = []
    for setting, seed in runs:
        folder = run_folder(root, setting, seed)
        if (done := finished(folder)) is None or done["to_end"] < args.to_end:
            command = [sys.executable, "-m", "rlvr.analysis.speedrun", "--in_process", "--config", args.config]
            command += ["--output_dir", str(root), "--seeds", str(seed), "--settings", setting]
            command += ["--eval_every", str(args.eval_every), "--target", str(args.target)]
            command += ["--to_end"] * args.to_end + extra
            print("$", " ".join(command), f"({setting} kernels)", flush=True)
            subprocess.run(command, env=environment_for(setting, os.environ), check=True)
            done = finished(folder)
        results.append(done)
    totals = summary(results)
    table = summary_table(results, totals)
    command = shlex.join(["rlvr", "speedrun", *(sys.argv[1:] if argv is None else argv)])
    (root / layout.SUMMARY_MD).write_text(f"`{command}`\n\n" + table)
    (root / layout.SUMMARY_JSON).write_text(json.dumps({**totals, "runs_detail": results}, indent=2) + "\n")
    print(table, end="")
    return totals


if __name__ == "__main__":
    cli(main)
