"""Benchmark the tiny main job end to end: evaluate the warm start, run GRPO, evaluate the result.

    HF_HUB_OFFLINE=1 WANDB_MODE=disabled python benchmarks/tiny_main_job.py [--output_dir runs/bench-tiny]

Prints the wall time of each phase, held-out correctness before and after, generated samples per second, and the
share of GRPO's wall time spent in generation, scoring, log-prob passes and optimisation (from `metrics.jsonl`'s
`time/*` keys). Every ratio comes from this one run; CPU timings move with whatever else the machine is doing.

Then it says where the held-out figures fall against `EXPECTED`, the ranges README's "what to expect" table states
(the two must agree: tests/test_docs_commands.py checks it). The before figure is the committed model's and the same
everywhere; the after figure moves with the seed and the machine (CPU kernels), so its range spans the seeds and the
CPU kernel settings it was measured over (docs/measurements/main-job.md).
"""

from __future__ import annotations

import gc
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the repo root

# held-out exact match on 200 words x 8 samples, README's table: (low, high) for the committed recipe and any seed
EXPECTED = {"before": (0.17625, 0.17625), "after": (0.55, 0.75), "min_gain": 0.40}
# The judge's figure for the committed recipe (`rlvr speedrun --config recipes/tiny/grpo.yaml --cpu_threads 1`,
# results/speedrun/README.md): generated samples until the full held-out set first reads >= 60%, seeds 42/1/2 x both
# kernel sets: the median and the range. The speedrun line's own figure is its proxy, read on the in-training subset.
JUDGED_SAMPLES = {"median": 7040, "low": 4480, "high": 8320}

from benchmarks.machine_load import measured_load
from rlvr.analysis import before_after
from rlvr.analysis.evaluate import evaluate
from rlvr.analysis.loaders import load_run, read_jsonl
from rlvr.analysis.speedrun import MAIN_JOB_CONFIG as DEFAULT_CONFIG
from rlvr.analysis.summaries import last, speedrun, speedrun_line, time_totals
from rlvr.inputs import ArgumentParser, ConfigError, check_writable_folder, cli, positive_int
from rlvr.metrics.keys import EXACT_MATCH, GENERATED_SAMPLES, OVERALL, maj_key, mean_key, pass_key, zero_std_key
from rlvr.metrics.keys import TIME_PHASES as PHASES
from rlvr.runs import layout, tools
from rlvr.runs.cpu_threads import apply_cpu_threads
from rlvr.training import runner
from rlvr.training.config import load_recipe, validate

ZERO_STD_CORRECTNESS = zero_std_key("correctness")


def grpo_time_split(run_dir: Path) -> dict:
    """Seconds per phase summed over the run (the records' own totals), the sample count, the zero-std trajectory."""
    run = load_run(run_dir)
    return {
        "seconds": time_totals(run),
        "generated_samples": int(last(run, GENERATED_SAMPLES) or 0),
        ZERO_STD_CORRECTNESS: run.values(ZERO_STD_CORRECTNESS),
        "speedrun": speedrun(run),
    }


RUN_ENV = {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}


def run_grpo(config: str, output_dir: Path, launcher: str, extra: list[str]) -> float:
    """The main command; returns its wall time in seconds. `inprocess` (the default) runs it in this process, which
    has already imported what it needs for the evaluation: the same recipe, run folder and records as the typed
    command (tests/test_tiny_main_job.py compares them), without a second interpreter's start-up
    (docs/measurements/speed.md). `accelerate` and `python` start it as a user types it."""
    recipe_args = ["recipes/grpo.py", "--config", config, "--output_dir", str(output_dir), *extra]
    if launcher == "inprocess":
        print("$", shlex.join(["accelerate", "launch", *recipe_args]), "(run in this process)", flush=True)
        os.environ.update(RUN_ENV)
        start = time.perf_counter()
        try:
            trainer = runner.main(recipe_args[1:], "grpo")
        except SystemExit as stop:  # a run stopped early has said why; the job stops here, with the evaluation it has
            print(f"error: the GRPO run stopped with status {stop.code}", file=sys.stderr)
            sys.exit(1)
        seconds = time.perf_counter() - start
        del trainer  # the trained policy is read back from its folder by the evaluation after
        gc.collect()
        return seconds
    prefix = tools.command("accelerate launch") if launcher == "accelerate" else [sys.executable]
    command = [*prefix, *recipe_args]
    print("$", " ".join(command), flush=True)
    start = time.perf_counter()
    done = subprocess.run(command, check=False, env={**os.environ, **RUN_ENV}, cwd=Path(__file__).resolve().parents[1])
    if done.returncode != 0:  # its own output above says why; the job stops here, with the evaluation it has
        print(f"error: the GRPO run exited {done.returncode}: {shlex.join(command)}", file=sys.stderr)
        sys.exit(1)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--output_dir", default="runs/bench-tiny")
    parser.add_argument("--num_samples", type=positive_int, default=8, help="evaluation samples per held-out prompt")
    parser.add_argument("--launcher", choices=["inprocess", "accelerate", "python"], default="inprocess")
    parser.add_argument("--cpu_threads", default="auto", help="the recipe field, for the evaluations and the GRPO run")
    parser.add_argument(
        "--fail_outside_range",
        action="store_true",
        help="exit 1 when a held-out figure falls outside README's range (CI runs `make main` so)",
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to the GRPO run, e.g. --max_steps 20
    comparable = (
        args.config == DEFAULT_CONFIG
        and args.num_samples == 8
        and (extra == [] or (len(extra) == 2 and extra[0] == "--seed"))
    )  # README's command, any seed
    if args.fail_outside_range and not comparable:
        raise ConfigError(
            "--fail_outside_range",
            "README's ranges hold for its own command (any --seed) only; drop the other overrides or this flag",
        )
    extra = ["--cpu_threads", args.cpu_threads, *extra]
    out = Path(args.output_dir)
    check_writable_folder(out, "--output_dir")  # and the GRPO command's own flags, before the first evaluation:
    recipe = validate(
        load_recipe(["--config", args.config, "--output_dir", str(out / "grpo"), *extra, "--dry_run", "true"], "grpo")
    )
    apply_cpu_threads(args.cpu_threads, use_cpu=True)  # the evaluations run here, with GRPO's thread count
    start = time.perf_counter()

    def held_out(model: str | None, name: str) -> dict:
        t0 = time.perf_counter()
        summary = evaluate(
            args.config,
            model_path=model,
            num_samples=args.num_samples,
            ks=(1, args.num_samples),
            output=str(out / f"eval_{name}.json"),
        )
        summary["wall_s"] = time.perf_counter() - t0
        return summary

    with measured_load("tiny_main_job") as load:
        before = held_out(None, "before")
        grpo_s = run_grpo(args.config, out / "grpo", args.launcher, extra)
        after = held_out(str(out / "grpo"), "after")
    total_s = time.perf_counter() - start
    split = grpo_time_split(out / "grpo")

    k, maj = pass_key(args.num_samples), maj_key(args.num_samples)
    figures = (EXACT_MATCH, mean_key("correctness"), k, maj)
    report = {
        "wall_s": {"total": total_s, "eval_before": before["wall_s"], "grpo": grpo_s, "eval_after": after["wall_s"]},
        "before": {key: before[OVERALL][key] for key in figures},
        "after": {key: after[OVERALL][key] for key in figures},
        "generated_samples": split["generated_samples"],
        "samples_per_s": split["generated_samples"] / grpo_s,
        "grpo_seconds": split["seconds"],
        ZERO_STD_CORRECTNESS: split[ZERO_STD_CORRECTNESS],
        "speedrun": split["speedrun"],
        "load": load,
    }
    (out / "benchmark.json").write_text(json.dumps(report, indent=2) + "\n")
    write_comparison(out, args.config, report)  # `rlvr report runs/bench-tiny/grpo` shows it

    seconds = split["seconds"]
    print(
        f"\nwall time: {total_s:.0f} s (eval before {before['wall_s']:.0f} s, GRPO {grpo_s:.0f} s, "
        f"eval after {after['wall_s']:.0f} s)"
    )
    for name in ("before", "after"):
        r = report[name]
        print(
            f"held-out {name:6s}: exact match {r[EXACT_MATCH]:.3f}  mean correctness {r[mean_key('correctness')]:.3f}  "
            f"{k} {r[k]:.3f}  {maj} {r[maj]:.3f}"
        )
    print(f"GRPO: {split['generated_samples']} samples generated, {report['samples_per_s']:.1f} samples/s of wall time")
    print(
        "GRPO wall-time share: "
        + "  ".join(f"{p} {seconds[p] / grpo_s:.0%}" for p in PHASES)
        + f"  other {1 - seconds['total'] / grpo_s:.0%} (start-up, logging, saving)"
    )
    zero_std = [z for z in split[ZERO_STD_CORRECTNESS] if z is not None]
    window = max(1, len(zero_std) // 10)
    print(
        f"zero-std groups (correctness): {mean(zero_std[:window]):.2f} over the first {window} steps -> "
        f"{mean(zero_std[-window:]):.2f} over the last {window}"
    )
    subset = f"{recipe.args.eval_prompts or 'all'} words x {recipe.training.num_generations_eval} samples"
    print(speedrun_line(split["speedrun"], evaluation=subset))
    if args.config == DEFAULT_CONFIG:
        print(judged_line())
    verdicts = expectation(report) if comparable else []
    for line, _ in verdicts or [(NOT_COMPARED, True)]:
        print(line)
    print(f"report: {out / 'benchmark.json'}")
    if args.fail_outside_range and not all(inside for _, inside in verdicts):
        print("error: held-out exact match outside README's range (--fail_outside_range)", file=sys.stderr)
        sys.exit(1)
    return report


def write_comparison(out: Path, config: str, report: dict) -> dict:
    """The held-out before/after of this job, paired prompt by prompt as `rlvr before-after` pairs them, into the run
    folder's `before_after/` (where `rlvr report` reads a comparison), with the job's own measurement as its note."""
    summaries = {side: json.loads((out / f"eval_{side}.json").read_text()) for side in before_after.SIDES}
    rollouts = [read_jsonl(layout.rollouts_beside(out / f"eval_{side}.json")) for side in before_after.SIDES]
    wall = report["wall_s"]
    scores = " · ".join(f"{key} {report['before'][key]:.3f} -> {value:.3f}" for key, value in report["after"].items())
    note = (
        f"From `benchmark.json` (`python benchmarks/tiny_main_job.py`): held-out {scores}; GRPO "
        f"{wall['grpo']:.0f} s of {wall['total']:.0f} s wall, {report['samples_per_s']:.1f} generated samples/s."
    )
    comparison = {
        "config": config,
        "models": {side: summaries[side].get("model") for side in before_after.SIDES},
        "summaries": summaries,
        "prompts": before_after.pair_prompts(*rollouts),
        "note": note,
    }
    return before_after.save(comparison, out / "grpo" / layout.BEFORE_AFTER_DIR)


def judged_line() -> str:
    """What the judge measured for this recipe on the full held-out set (`JUDGED_SAMPLES`)."""
    judged = JUDGED_SAMPLES
    return (
        f"speedrun, judged (`rlvr speedrun`: the full held-out set, 200 words x 8 samples, every 10 steps): this recipe "
        f"reaches 60% at a median {judged['median']:,.0f} samples ({judged['low']:,}-{judged['high']:,} over seeds 42/1/2 "
        "x both kernel sets; results/speedrun/README.md)"
    )


NOT_COMPARED = "expected ranges: not compared (another recipe, sample count or override than README's command)"


def expectation(report: dict) -> list[tuple[str, bool]]:
    """Where this run's held-out exact match falls against README's ranges (`EXPECTED`): (line, inside) for each."""
    verdicts = []
    for name in ("before", "after"):
        low, high = EXPECTED[name]
        got = report[name][EXACT_MATCH]
        stated = f"{low:.1%}" if low == high else f"{low:.0%}-{high:.0%}"
        inside = low - 5e-4 <= got <= high + 5e-4
        verdicts.append(
            (f"expected {name}: {stated} (README); this run {got:.1%}: {'inside' if inside else 'OUTSIDE'}", inside)
        )
    return verdicts


if __name__ == "__main__":
    cli(main)
