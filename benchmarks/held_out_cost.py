"""What held-out evaluation during training costs the main job: recipes/tiny/grpo.yaml as committed (TRL's
evaluation every `eval_steps` on `eval_prompts` held-out words x `num_generations_eval`) against the same run with
`--eval_strategy no`, interleaved (with, without, then without, with, ...), the load printed around each run.

    python benchmarks/held_out_cost.py                    # 2 rounds: 4 main-job runs, ~8 minutes on a quiet 2-core CPU
    python benchmarks/held_out_cost.py --rounds 1 --max_steps 20

Two figures per pair: the extra wall time of the run that evaluates, as a share of the GRPO time of the run that
does not, and, inside the evaluating run, the seconds TRL spent evaluating (the evaluation rows' `eval_runtime`) as a
share of its training time (train_runtime minus those seconds). The second is the steadier on a busy machine (both
parts see the same load); the first is the cost a user pays. The training rows of the two runs are the same (the
evaluation samples on a forked RNG; tests/test_held_out.py), so the difference is the evaluation alone.
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
from rlvr.inputs import ArgumentParser, check_writable_folder, cli, positive_int
from rlvr.training.config import load_recipe, validate


def train(output_dir: Path, extra: list[str]) -> dict:
    """One main-job run; its wall time and, from metrics.jsonl, train_runtime and the evaluations' seconds."""
    command = [
        sys.executable,
        "recipes/grpo.py",
        "--config",
        "recipes/tiny/grpo.yaml",
        "--output_dir",
        str(output_dir),
        "--print_rollouts",
        "false",
        *extra,
    ]
    start = time.perf_counter()
    subprocess.run(
        command,
        check=True,
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"},
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in (output_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    runtime = next(row["train_runtime"] for row in rows if "train_runtime" in row)
    evaluations = [row["eval_runtime"] for row in rows if "eval_runtime" in row]
    return {"wall_s": wall, "train_runtime": runtime, "eval_s": sum(evaluations), "evaluations": len(evaluations)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=positive_int, default=2, help="pairs of runs (with / without), order alternating"
    )
    parser.add_argument("--output_dir", default="runs/bench-held-out")
    args, extra = parser.parse_known_args(argv)  # anything else goes to both runs, e.g. --max_steps 20
    check_writable_folder(args.output_dir, "--output_dir")  # and the runs' own flags, before the first one trains:
    validate(
        load_recipe(
            [
                "--config",
                str(REPO / "recipes/tiny/grpo.yaml"),
                "--output_dir",
                str(Path(args.output_dir) / "with-1"),
                *extra,
                "--dry_run",
                "true",
            ],
            "grpo",
        )
    )
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
