"""What held-out evaluation during training costs the main job: recipes/tiny/grpo.yaml as committed (TRL's
evaluation every `eval_steps` on `eval_prompts` held-out words x `num_generations_eval`) against the same run with
`--eval_strategy no`, interleaved (with, without, then without, with, ...), the load printed around each run.

    python benchmarks/held_out_cost.py                    # 2 rounds: 4 main-job runs, ~8 minutes on a quiet 2-core CPU
    python benchmarks/held_out_cost.py --rounds 1 --max_steps 20
    python benchmarks/held_out_cost.py --log_probs 12     # one evaluation with and without TRL's log-prob passes

Two figures per pair: the extra wall time of the run that evaluates, as a share of the GRPO time of the run that
does not, and, inside the evaluating run, the seconds TRL spent evaluating (the evaluation rows' `eval_runtime`) as a
share of its training time (train_runtime minus those seconds). The second is the steadier on a busy machine (both
parts see the same load); the first is the cost a user pays. The training rows of the two runs are the same (the
evaluation samples on a forked RNG; tests/test_held_out.py), so the difference is the evaluation alone.

`--log_probs N` times one evaluation instead: the main job's trainer after two training steps, `trainer.evaluate()`
with `eval_log_probs` true (TRL's two log-prob passes for eval_loss / eval_kl / eval_entropy) and false (sample and
score only, the recipe's setting), alternating in one process for N rounds; it prints both medians and their ratio.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as `python benchmarks/held_out_cost.py`

from benchmarks.machine_load import measured_load
from rlvr.analysis.loaders import read_jsonl
from rlvr.inputs import ArgumentParser, check_writable_folder, cli, positive_int
from rlvr.runs import layout
from rlvr.training.config import load_recipe, validate


def recipe_flags(output_dir: Path) -> list[str]:
    """The main job's recipe into `output_dir`, as every run and evaluation here takes it."""
    return [
        "--config",
        str(REPO / "recipes/tiny/grpo.yaml"),
        "--output_dir",
        str(output_dir),
        "--print_rollouts",
        "false",
    ]


def train(output_dir: Path, extra: list[str]) -> dict:
    """One main-job run; its wall time and, from metrics.jsonl, train_runtime and the evaluations' seconds."""
    command = [sys.executable, "recipes/grpo.py", *recipe_flags(output_dir), *extra]
    start = time.perf_counter()
    subprocess.run(
        command,
        check=True,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"},
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    rows = read_jsonl(output_dir / layout.METRICS)
    runtime = next(row["train_runtime"] for row in rows if "train_runtime" in row)
    evaluations = [row["eval_runtime"] for row in rows if "eval_runtime" in row]
    return {"wall_s": wall, "train_runtime": runtime, "eval_s": sum(evaluations), "evaluations": len(evaluations)}


def time_log_probs(rounds: int, output_dir: Path, extra: list[str]) -> dict:
    """Median seconds of one evaluation with and without TRL's log-prob passes, alternating in one process."""
    from rlvr.training.runner import prepare

    _, trainer, _ = prepare([*recipe_flags(output_dir), "--max_steps", "2", "--report_to", "none", *extra], "grpo")
    trainer.train()
    seconds = {True: [], False: []}
    with measured_load("held_out_cost log_probs"):
        for i in range(rounds + 1):  # the first round warms up, not counted
            for passes in (True, False) if i % 2 == 0 else (False, True):
                trainer.args.eval_log_probs = passes
                start = time.perf_counter()
                trainer.evaluate()
                if i:
                    seconds[passes].append(time.perf_counter() - start)
    median = {passes: sorted(times)[len(times) // 2] for passes, times in seconds.items()}
    result = {"with_log_probs_s": median[True], "scored_only_s": median[False], "ratio": median[False] / median[True]}
    print(
        f"one evaluation: {median[True]:.3f} s with TRL's log-prob passes, {median[False]:.3f} s sampled and scored "
        f"only (x{result['ratio']:.2f}; medians of {rounds} alternating rounds, ranges "
        f"{min(seconds[True]):.3f}-{max(seconds[True]):.3f} and {min(seconds[False]):.3f}-{max(seconds[False]):.3f} s)",
        flush=True,
    )
    return result


def main(argv: list[str] | None = None) -> list[dict]:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument(
        "--rounds", type=positive_int, default=2, help="pairs of runs (with / without), order alternating"
    )
    parser.add_argument("--output_dir", default="runs/bench-held-out")
    parser.add_argument(
        "--log_probs",
        type=positive_int,
        default=None,
        metavar="N",
        help="time one evaluation with and without TRL's log-prob passes, N alternating rounds, instead of runs",
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to both runs, e.g. --max_steps 20
    check_writable_folder(args.output_dir, "--output_dir")  # and the runs' own flags, before the first one trains:
    validate(load_recipe([*recipe_flags(Path(args.output_dir) / "with-1"), *extra, "--dry_run", "true"], "grpo"))
    if args.log_probs:
        result = time_log_probs(args.log_probs, Path(args.output_dir) / "log-probs", extra)
        Path(args.output_dir, "held_out_log_probs.json").write_text(json.dumps(result, indent=2) + "\n")
        return [result]
    pairs = []
    for i in range(args.rounds):
        order = ("with", "without") if i % 2 == 0 else ("without", "with")
        pair = {}
        for kind in order:
            with measured_load(f"held_out_cost {kind} {i + 1}"):
                flags = [] if kind == "with" else ["--eval_strategy", "no"]
                pair[kind] = train(Path(args.output_dir) / f"{kind}-{i + 1}", [*flags, *extra])
        with_, without = pair["with"], pair["without"]
        pair["extra_wall_share"] = with_["train_runtime"] / without["train_runtime"] - 1
        pair["eval_share"] = with_["eval_s"] / (with_["train_runtime"] - with_["eval_s"])
        print(
            f"round {i + 1}: GRPO {without['train_runtime']:.0f} s without, {with_['train_runtime']:.0f} s with "
            f"{with_['evaluations']} evaluations ({with_['eval_s']:.0f} s): +{pair['extra_wall_share']:.1%} of the "
            f"GRPO time (wall), evaluation {pair['eval_share']:.1%} of the training time (inside the run)",
            flush=True,
        )
        pairs.append(pair)
    shares = sorted(p["extra_wall_share"] for p in pairs)
    print(
        f"held-out evaluation costs {shares[len(shares) // 2]:+.1%} of the GRPO time (median of {len(pairs)} "
        f"interleaved pairs; inside the runs {sorted(p['eval_share'] for p in pairs)[len(pairs) // 2]:.1%})"
    )
    Path(args.output_dir, "held_out_cost.json").write_text(json.dumps(pairs, indent=2) + "\n")
    return pairs


if __name__ == "__main__":
    cli(main)
