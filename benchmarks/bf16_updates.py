"""Do bf16 weight updates land? A probe of the optimizers on Qwen3-like weights, then the tiny speller trained in bf16.

    python benchmarks/bf16_updates.py probe                       # seconds; prints a Markdown table
    python benchmarks/bf16_updates.py tiny --seeds 42 1 2         # 9 GRPO runs + held-out evaluations (resumable)
    python benchmarks/bf16_updates.py report                      # the tiny runs' table from their folders

Why: a bf16 weight stores 8 significant bits, so an update below half the spacing between neighbouring bf16 values
rounds back to the same weight, and torch's AdamW on bf16 weights (what HF's Trainer runs without DeepSpeed) keeps no
fp32 master copy. The full fine-tune recipe for a 6.9 GiB card uses torchao's 8-bit AdamW with bf16 stochastic
rounding instead (docs/memory-and-gpu.md).

- probe: one gradient stream (a fixed direction plus noise, seeded), fed to a fp32 AdamW on fp32 copies (the
  reference) and to each candidate on bf16 weights; per group of weights, the share of the reference update that is
  applied, (delta . delta_ref) / |delta_ref|^2, after 10 and 100 steps, and the fraction of weights that moved.
  torchao compiles its step with `torch.compile` (about a minute on a CPU, once per tensor shape).
- tiny: the main job's GRPO command (recipes/tiny/grpo.yaml, 140 steps, no in-training evaluation) with `--dtype
  bfloat16` for the bf16 runs, at an lr scaled so that lr / bf16 spacing of the median weight is the real recipe's
  (see `TINY_LR`); then held-out exact match on the main job's 200 words x 8 samples (the starting model: 17.6%). docs/measurements/bf16-updates.md holds the figures and the commands.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from statistics import mean

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the repo root

from rlvr.inputs import ArgumentParser, cli, positive_int

RECIPE_LR = 5.0e-6  # recipes/grpo_qwen3_0.6b_full.yaml (grpo.yaml's)
QWEN3_MEDIAN_ABS = 0.02 * math.sqrt(2) * 0.4769  # median |w| of N(0, 0.02): 0.0135
TINY_MEDIAN_ABS = 0.0258  # median |w| of models/tiny-speller's weights (all 46 tensors)


def bf16_spacing(x: float) -> float:
    """Distance between neighbouring bf16 values around |x| (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(abs(x))) - 7)


# The tiny run's lr keeps the real recipe's lr / spacing (0.082): the tiny model's median weight sits one binade above
# Qwen3's N(0, 0.02) median, so its lr is twice the recipe's.
TINY_LR = RECIPE_LR * bf16_spacing(TINY_MEDIAN_ABS) / bf16_spacing(QWEN3_MEDIAN_ABS)

TINY_CONFIG = "recipes/tiny/grpo.yaml"
OPTIMIZERS = {  # name -> (run folder prefix, recipe flags of the tiny run); the last two are the probe's candidates
    "fp32 AdamW": ("fp32", ["--dtype", "float32"]),
    "bf16 AdamW (torch)": ("bf16-adamw", ["--dtype", "bfloat16", "--optim", "adamw_torch"]),
    "bf16 AdamW8bit + stochastic rounding (torchao)": (
        "bf16-adamw8bit-sr",
        ["--dtype", "bfloat16", "--optim", "adamw_torch_8bit", "--optim_args", "bf16_stochastic_round=True"],
    ),
}


def probe_weights(seed: int = 0) -> dict[str, torch.Tensor]:
    """Qwen3-like groups: linear weights N(0, 0.02) in 4096-divisible blocks (8-bit states), and RMSNorm weights
    near 1 (too small for 8-bit states, so kept in the parameter's dtype, as torchao does)."""
    g = torch.Generator().manual_seed(seed)
    return {
        "linear N(0, 0.02)": torch.randn(512, 1024, generator=g) * 0.02,
        "norm ~1": 1.0 + 0.05 * torch.randn(1024, generator=g),
    }


def gradient(shape, step: int, direction: torch.Tensor) -> torch.Tensor:
    noise = torch.randn(shape, generator=torch.Generator().manual_seed(1000 + step))
    return direction + noise


def candidate(name: str, params: list[torch.nn.Parameter], lr: float):
    if name == "bf16 AdamW (torch)":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    from torchao.optim import AdamW8bit

    return AdamW8bit(params, lr=lr, weight_decay=0.0, bf16_stochastic_round=True)


def probe(lr: float = RECIPE_LR, checkpoints=(10, 100)) -> list[dict]:
    """Rows {optimizer, group, steps, applied, moved} for each bf16 candidate against the fp32 reference."""
    start = {k: v.bfloat16() for k, v in probe_weights().items()}  # both runs start from the same bf16 values
    directions = {k: torch.randn(v.shape, generator=torch.Generator().manual_seed(7)) for k, v in start.items()}
    reference = {k: torch.nn.Parameter(v.float()) for k, v in start.items()}
    runs = {"fp32 reference": (reference, torch.optim.AdamW(reference.values(), lr=lr, weight_decay=0.0))}
    for name in list(OPTIMIZERS)[1:]:
        params = {k: torch.nn.Parameter(v.clone()) for k, v in start.items()}
        runs[name] = (params, candidate(name, list(params.values()), lr))
    rows = []
    for step in range(1, max(checkpoints) + 1):
        for params, optimizer in runs.values():
            for key, p in params.items():
                p.grad = gradient(p.shape, step, directions[key]).to(p.dtype)
            optimizer.step()
        if step in checkpoints:
            for name, (params, _) in list(runs.items())[1:]:
                for key, p in params.items():
                    delta_ref = reference[key].detach() - start[key].float()
                    delta = p.detach().float() - start[key].float()
                    applied = float((delta * delta_ref).sum() / (delta_ref * delta_ref).sum())
                    moved = float((p.detach() != start[key]).float().mean())
                    rows.append({"optimizer": name, "group": key, "steps": step, "applied": applied, "moved": moved})
    return rows


def probe_table(rows: list[dict]) -> str:
    lines = ["| optimizer | weights | steps | reference update applied | weights moved |", "|---|---|---|---|---|"]
    lines += [
        f"| {r['optimizer']} | {r['group']} | {r['steps']} | {r['applied']:.1%} | {r['moved']:.1%} |" for r in rows
    ]
    return "\n".join(lines)


def run_name(optimizer: str, seed: int) -> str:
    return f"{OPTIMIZERS[optimizer][0]}-s{seed}"


def tiny(seeds: list[int], out: Path, lr: float, max_steps: int | None) -> None:
    """Each optimizer x seed: the main job's GRPO command with the optimizer's flags, then the held-out evaluation of
    the trained policy as the main job's (200 words x 8 samples). A run with its eval_after.json is skipped."""
    from rlvr.analysis.evaluate import evaluate  # the evaluation's imports only for this part

    repo = Path(__file__).resolve().parents[1]
    torch.set_num_threads(1)
    for seed in seeds:
        for optimizer, (_, flags) in OPTIMIZERS.items():
            folder = out / run_name(optimizer, seed)
            if (folder / "eval_after.json").exists():
                print(f"[bf16_updates] {folder}: done, skipped", flush=True)
                continue
            steps = ["--max_steps", str(max_steps)] if max_steps else []
            command = [sys.executable, "recipes/grpo.py", "--config", TINY_CONFIG, "--output_dir", str(folder / "grpo")]
            command += [*flags, "--learning_rate", str(lr), "--seed", str(seed), "--eval_strategy", "no", *steps]
            command += ["--cpu_threads", "1"]  # one thread: the runs share a busy machine; the same for all nine
            print("[bf16_updates] $", " ".join(command), flush=True)
            subprocess.run(command, check=True, cwd=repo, stdout=subprocess.DEVNULL)
            summary = evaluate(
                TINY_CONFIG,
                model_path=str(folder / "grpo"),
                num_samples=8,
                ks=(1, 8),
                output=str(folder / "eval_after.json"),
            )
            print(f"[bf16_updates] {folder}: held-out exact match {summary['overall']['exact_match']:.1%}", flush=True)


def report(out: Path, seeds: list[int]) -> str:
    """Held-out exact match per optimizer and seed, from each run's benchmark.json ('-' for a run not finished)."""
    lines = [
        "| optimizer | " + " | ".join(f"seed {s}" for s in seeds) + " | mean |",
        "|---|" + "---|" * (len(seeds) + 1),
    ]
    for optimizer in OPTIMIZERS:
        figures = []
        for seed in seeds:
            path = out / run_name(optimizer, seed) / "eval_after.json"
            figures.append(json.loads(path.read_text())["overall"]["exact_match"] if path.exists() else None)
        done = [f for f in figures if f is not None]
        cells = [f"{f:.1%}" if f is not None else "-" for f in figures]
        average = f"{mean(done):.1%}" if done else "-"
        lines.append(f"| {optimizer} | " + " | ".join(cells) + f" | {average} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("part", choices=["probe", "tiny", "report"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("runs/bf16-updates"))
    parser.add_argument("--max_steps", type=positive_int, help="override the recipe's 140 steps (a shorter check)")
    args = parser.parse_args(argv)
    if args.part == "probe":
        print(f"lr {RECIPE_LR:g}; fp32 AdamW on fp32 copies is the reference")
        print(probe_table(probe()))
    elif args.part == "tiny":
        print(
            f"lr {TINY_LR:g} (recipe lr {RECIPE_LR:g} x spacing at |w| {TINY_MEDIAN_ABS} / at {QWEN3_MEDIAN_ABS:.4f})"
        )
        tiny(args.seeds, args.out, TINY_LR, args.max_steps)
        print(report(args.out, args.seeds))
    else:
        print(report(args.out, args.seeds))


if __name__ == "__main__":
    cli(main)
