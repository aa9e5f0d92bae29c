"""Speed benchmark: the same recipe with speed-ups off and on, interleaved, in one run; prints samples/s and ratios.

    HF_HUB_OFFLINE=1 WANDB_MODE=disabled python benchmarks/speed.py                      # tiny GRPO, off vs all
    python benchmarks/speed.py --configs recipes/tiny/{grpo,dapo,rloo,ppo}.yaml --max_steps 10
    python benchmarks/speed.py --variants none threads shared_prefix all                  # each speed-up alone

Each run is the recipe command a user types (`python recipes/<algo>.py --config ... --speedups <variant>`), seeded
identically, so every variant generates from the same model state and scores the same loss (printed, to compare).
Runs alternate variant by variant (A, B, A, B, ...) so that load from other processes on a shared machine hits all
variants alike. samples/s counts generated samples over the training loop's own step time (`time/total_s` in
metrics.jsonl, first `--warmup` steps excluded); the wall time per run, start-up included, is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"dapo": "recipes/dapo.py", "rloo": "recipes/rloo.py", "ppo": "recipes/ppo.py", "reinforce": "recipes/reinforce.py"}


def script_for(config: str) -> str:
    return SCRIPTS.get(Path(config).stem, "recipes/grpo.py")


def run_once(config: str, variant: str, max_steps: int, warmup: int, launcher: str, output_dir: Path) -> dict:
    """One training run; returns samples/s over the steps after warm-up, wall time, and the mean loss/reward."""
    prefix = ["accelerate", "launch"] if launcher == "accelerate" else [sys.executable]
    command = [*prefix, script_for(config), "--config", config, "--max_steps", str(max_steps), "--speedups", variant,
               "--output_dir", str(output_dir), "--print_rollouts", "false", "--save_strategy", "no",
               "--report_to", "none", "--logging_steps", "1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    steps = [row for row in rows if "time/total_s" in row]
    timed = steps[warmup:]
    samples = timed[-1]["generated_samples"] - (steps[warmup - 1]["generated_samples"] if warmup else 0)
    return {
        "samples_per_s": samples / sum(row["time/total_s"] for row in timed),
        "wall_s": wall,
        "loss": mean(row["loss"] for row in steps),
        "reward": mean(row["reward"] for row in steps),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["recipes/tiny/grpo.yaml"])
    parser.add_argument("--variants", nargs="+", default=["none", "all"],
                        help="`speedups` values to compare (e.g. none threads shared_prefix all); the first is the baseline")
    parser.add_argument("--max_steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2, help="first steps left out of samples/s")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved repetitions of every variant")
    parser.add_argument("--launcher", choices=["python", "accelerate"], default="python")
    parser.add_argument("--output", default=None, help="JSON report path")
    args = parser.parse_args(argv)
    variants = args.variants
    report = {}
    with tempfile.TemporaryDirectory(prefix="speed-") as scratch:
        for config in args.configs:
            results = {variant: [] for variant in variants}
            for round_ in range(args.rounds):
                for variant in variants:
                    out = Path(scratch) / f"{Path(config).stem}-{variant.replace(',', '+')}-{round_}"
                    result = run_once(config, variant, args.max_steps, args.warmup, args.launcher, out)
                    results[variant].append(result)
                    print(f"{config} speedups={variant:<14} round {round_}: {result['samples_per_s']:6.1f} samples/s  "
                          f"wall {result['wall_s']:5.1f} s  loss {result['loss']:+.5f}  reward {result['reward']:.4f}",
                          flush=True)
            summary = {v: {key: mean(r[key] for r in rs) for key in rs[0]} for v, rs in results.items()}
            base = summary[variants[0]]["samples_per_s"]
            for variant in variants:
                summary[variant]["ratio"] = summary[variant]["samples_per_s"] / base
            report[config] = summary
    print()
    for config, summary in report.items():
        cells = "  ".join(f"{v}: {s['samples_per_s']:.1f} samples/s (x{s['ratio']:.2f})" for v, s in summary.items())
        print(f"{config}: {cells}")
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
