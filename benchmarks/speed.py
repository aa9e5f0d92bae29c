"""Speed benchmark: the same recipe with speed-ups off and on, and bare TRL, interleaved, in one run; prints samples/s,
training-time ratios, and each phase's distance from its arithmetic floor.

    HF_HUB_OFFLINE=1 WANDB_MODE=disabled python benchmarks/speed.py          # tiny GRPO: none, all, bare TRL
    python benchmarks/speed.py --variants all --max_steps 30 --rounds 2       # the default vs bare TRL
    python benchmarks/speed.py --configs recipes/tiny/{grpo,dapo,rloo,ppo}.yaml --max_steps 10 --no_bare

Each run is the recipe command a user types (`python recipes/<algo>.py --config ... --speedups <variant>`), seeded
identically, so every variant generates from the same model state and scores the same loss (printed, to compare).
The contender `bare` is plain `trl.GRPOTrainer` on the same model, rows, reward functions (the plain callables, no
rlvr wrapper) and GRPOConfig fields, at the same intra-op thread count (`--cpu_threads`, default auto), with no rlvr
trainer code at all; it runs for configs whose algorithm is plain grpo. Runs alternate (A, B, bare, A, B, bare,
...) so that load from other processes hits every contender alike; the load average is printed before and after
(benchmarks/machine_load.py), with a warning when the machine was busy: such figures show direction only.

Printed per run: samples/s over the training loop's own step time (`time/total_s`, first `--warmup` steps left out),
TRL's `train_runtime` (the training time the ratios use: the same clock for rlvr and bare runs), wall time with
start-up, mean loss and reward. Then, per variant, the floor table: each phase's FLOPs per step (forward = 2 x matmul
parameters x tokens + 4 x layers x heads x head_dim x attended keys; backward = 2 x forward), its floor (FLOPs /
the best measured fp32 matmul rate, of a 1024^3 matmul and one at the model's shapes; the optimizer's floor is one
fused AdamW step over a single tensor of the model's size), its measured seconds per step (the trainer's `time/*`
accounts) and floor / measured.
Token counts are the floor's: the prompt prefix shared by every row counted once, as the shared_prefix path runs it,
and the rest of each prompt once per group of rows that share it, as group_prompts runs it.
A last row, outside the step, is training time spent between steps (logging, callbacks writing metrics and rollouts,
data loading): `train_runtime` minus the accounted steps, per step.

What each speed-up bought against this floor, and what was measured and not kept: docs/measurements/speed.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from argparse import SUPPRESS
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.machine_load import measured_load
from rlvr.analysis.loaders import read_jsonl
from rlvr.inputs import (
    ArgumentParser,
    ConfigError,
    check_writable_folder,
    cli,
    load_recipe_yaml,
    non_negative_int,
    positive_int,
)
from rlvr.runs import layout, tools
from rlvr.speedups import parse_speedups

SCRIPTS = {
    "dapo": "recipes/dapo.py",
    "rloo": "recipes/rloo.py",
    "ppo": "recipes/ppo.py",
    "reinforce": "recipes/reinforce.py",
}
BARE = "bare"
ENV = {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
COMMON = ["--print_rollouts", "false", "--save_strategy", "no", "--report_to", "none", "--logging_steps", "1"]


def script_for(config: str) -> str:
    return SCRIPTS.get(Path(config).stem, "recipes/grpo.py")


def run_flags(max_steps: int, output_dir, cpu_threads: str) -> list[str]:
    """The flags of every contender's run, rlvr or bare: its steps, its folder and its intra-op threads."""
    return ["--max_steps", str(max_steps), "--output_dir", str(output_dir), "--cpu_threads", cpu_threads]


def run_once(
    config: str, variant: str, max_steps: int, warmup: int, launcher: str, output_dir: Path, cpu_threads: str = "auto"
) -> dict:
    """One training run (a variant of `speedups`, or `bare` TRL); samples/s, train_runtime, wall time, loss, reward."""
    prefix = tools.command("accelerate launch") if launcher == "accelerate" and variant != BARE else [sys.executable]
    flags = run_flags(max_steps, output_dir, cpu_threads)
    if variant == BARE:
        command = [*prefix, __file__, "--_bare", config, *flags]
    else:
        command = [*prefix, script_for(config), "--config", config, "--speedups", variant, *flags, *COMMON]
    start = time.perf_counter()
    done = subprocess.run(
        command,
        check=False,
        env={**os.environ, **ENV},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode:  # the child's own last line, not a CalledProcessError that hides it
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise SystemExit(f"error: the {variant} run of {config} failed (exit {done.returncode}): {last}")
    rows = read_jsonl(output_dir / layout.METRICS)
    steps = [row for row in rows if "loss" in row]
    accounted = [row for row in steps if "time/total_s" in row]  # rlvr runs: the trainer's own time accounts
    timed = accounted[warmup:]
    result = {
        "train_runtime": next(row["train_runtime"] for row in rows if "train_runtime" in row),
        "wall_s": wall,
        "loss": mean(row["loss"] for row in steps),
        "reward": mean(row["reward"] for row in steps),
    }
    if timed:

        def per_step(key):  # counters are cumulative: what the timed steps added, per step
            return (timed[-1][key] - (accounted[warmup - 1][key] if warmup else 0)) / len(timed)

        result["samples_per_s"] = per_step("generated_samples") * len(timed) / sum(row["time/total_s"] for row in timed)
        keys = sorted({key for row in timed for key in row if key.startswith("time/")})
        result["per_step"] = {key: mean(row.get(key, 0.0) for row in timed) for key in keys}
        result["tokens_per_step"] = per_step("num_tokens")
        result["completion_tokens_per_step"] = per_step("generated_tokens")
        # Training time outside the accounted steps: logging, callbacks (metrics/rollout files), data loading.
        stepped = sum(r["time/total_s"] for r in accounted)
        result["outside_steps_s"] = (result["train_runtime"] - stepped) / len(accounted)
    else:
        result["samples_per_s"] = None
    return result


def bare_trl(config: str, max_steps: int, output_dir: str, cpu_threads: str) -> None:
    """The bare contender, in its own process: plain trl.GRPOTrainer with the recipe's model, rows (the train split,
    and the held-out prompts TRL evaluates every eval_steps, as the recipe's run gets them), reward callables and
    GRPOConfig fields; writes TRL's log history as metrics.jsonl."""
    import dataclasses

    import torch
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.runs.cpu_threads import cpu_threads_for
    from rlvr.training.config import load_recipe, validate
    from rlvr.training.model_loading import model_init_kwargs
    from rlvr.training.runner import held_out_prompts

    recipe = validate(load_recipe(["--config", config, *run_flags(max_steps, output_dir, cpu_threads), *COMMON]))
    training = recipe.training
    torch.set_num_threads(cpu_threads_for(recipe.args.cpu_threads))  # the same rule as the rlvr runs
    skip = {"steps_per_generation"}  # derived from generation_batch_size; TRL refuses both
    names = [f.name for f in dataclasses.fields(GRPOConfig) if f.init and f.name not in skip]
    values = {name: getattr(training, name) for name in names}
    values = {k: getattr(v, "value", v) for k, v in values.items()}
    values.update(model_init_kwargs=model_init_kwargs(recipe.model, training), reward_weights=recipe.rewards.weights)
    trainer = GRPOTrainer(
        model=recipe.model.model_name_or_path,
        reward_funcs=list(recipe.rewards.funcs),
        args=GRPOConfig(**values),
        train_dataset=recipe.dataset[recipe.args.dataset_train_split],
        eval_dataset=held_out_prompts(recipe),  # None under eval_strategy "no"; TRL refuses "steps" without one
    )
    trainer.train()
    Path(output_dir, "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in trainer.state.log_history))


def best_seconds(fn, repeats: int = 30) -> float:
    """The fastest of `repeats` calls: a floor is what the machine can do, not what it did while others ran."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def matmul_rate(m: int, k: int, n: int) -> float:
    """Measured fp32 FLOP/s of an (m, k) x (k, n) matmul (best of 30)."""
    import torch

    a, b = torch.randn(m, k), torch.randn(k, n)
    return 2 * m * k * n / best_seconds(lambda: a @ b)


def adamw_floor(params: int) -> float:
    """Seconds of one fused AdamW step over a single tensor of `params` elements (best of 30): the optimizer's floor."""
    import torch

    weight = torch.nn.Parameter(torch.zeros(params))
    weight.grad = torch.randn(params)
    optimizer = torch.optim.AdamW([weight], fused=True)
    return best_seconds(optimizer.step)


def model_shape(config: str) -> dict:
    """The recipe's model as counts the FLOP formula needs, and the prompt prefix its rows share (in tokens)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from rlvr.speedups.shared_prefix import common_prefix_length
    from rlvr.training.config import load_recipe, validate

    recipe = validate(load_recipe(["--config", config, "--dry_run", "true"]))
    path = recipe.model.model_name_or_path
    model_config = AutoConfig.from_pretrained(path)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(model_config)
    matmul_params = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    tokenizer = AutoTokenizer.from_pretrained(path)
    rows = recipe.dataset[recipe.args.dataset_train_split]
    t = recipe.training
    prompts = [
        tokenizer.apply_chat_template(rows[i]["prompt"], add_generation_prompt=True, tokenize=True)
        for i in range(t.generation_batch_size // t.num_generations)
    ]
    prompts = [list(p["input_ids"]) if isinstance(p, dict) or hasattr(p, "keys") else list(p) for p in prompts]
    text = model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    return {
        "matmul_params": matmul_params,
        "params": sum(p.numel() for p in model.parameters()),
        "attention_width": text.num_hidden_layers * text.num_attention_heads * head_dim,
        "hidden": text.hidden_size,
        "intermediate": getattr(text, "intermediate_size", 4 * text.hidden_size),
        "shared_prefix": common_prefix_length([torch.tensor(p) for p in prompts]),
        "prompt_tokens": mean(len(p) for p in prompts),
        "samples": t.generation_batch_size,
        "prompts": len(prompts),
        "beta": t.beta,
        "algorithm": t.algorithm,
    }


def step_flops(shape: dict, tokens: float, completion_tokens: float, old_policy: bool) -> dict[str, float]:
    """FLOPs of one generation step per phase, at the floor's token count (shared prefix once).

    `tokens` and `completion_tokens` are the step's real (unpadded) tokens, prompts included, and its completions."""
    rows, prefix = shape["samples"], shape["shared_prefix"]
    rest = max((tokens - completion_tokens) / rows - prefix, 0.0)  # a row's prompt after the shared prefix, mean
    # the shared prefix computed once, not per row, and each prompt's rest once per group of rows that share it
    needed = tokens - (rows - 1) * prefix - (rows - shape.get("prompts", rows)) * rest
    length = tokens / rows  # mean sequence length; a token attends to about half of it on average
    forward = needed * (2 * shape["matmul_params"] + 4 * shape["attention_width"] * length / 2)
    flops = {
        "generation": forward,
        "reference": forward if shape["beta"] else 0.0,
        "old_policy": forward if old_policy else 0.0,
        "policy_fwd_bwd": 3 * forward,
        "optimizer": 12.0 * shape["params"],
    }
    return flops


def floor_table(shape: dict, result: dict, rate: float, optimizer_floor: float) -> list[tuple]:
    """(phase, GFLOP per step, floor s, measured s per step, floor/measured) per phase, and the whole step."""
    per = result["per_step"]
    measured = {
        "generation": per.get("time/generation_s", 0.0),
        "reference": per.get("time/reference_s", 0.0),
        "old_policy": per.get("time/old_policy_s", 0.0),
        "policy_fwd_bwd": per.get("time/optimization_s", 0.0) - per.get("time/optimizer_s", 0.0),
        "optimizer": per.get("time/optimizer_s", 0.0),
    }
    flops = step_flops(
        shape, result["tokens_per_step"], result["completion_tokens_per_step"], old_policy=measured["old_policy"] > 0
    )
    rows = []
    for phase, value in flops.items():
        floor = optimizer_floor if phase == "optimizer" else value / rate
        if value or measured[phase]:
            share = floor / measured[phase] if measured[phase] else None
            rows.append((phase, value / 1e9, floor, measured[phase], share))
    other = per.get("time/total_s", 0.0) - sum(measured.values())
    rows.append(("other (scoring, bookkeeping)", 0.0, 0.0, other, None))
    total_floor = sum(r[2] for r in rows)
    rows.append(
        (
            "step",
            sum(flops.values()) / 1e9,
            total_floor,
            per.get("time/total_s", 0.0),
            total_floor / per["time/total_s"] if per.get("time/total_s") else None,
        )
    )
    if "outside_steps_s" in result:  # not in the step's floor: logging and callbacks should cost ~0
        rows.append(("outside the step (logging, callbacks)", 0.0, 0.0, result["outside_steps_s"], None))
    return rows


def print_floor(config: str, variant: str, rows: list[tuple]) -> list[tuple]:
    print(f"\n{config} speedups={variant}: per generation step")
    print(f"  {'phase':<40}{'GFLOP':>8}{'floor s':>10}{'measured s':>12}{'% of floor':>12}")
    for phase, gflop, floor, measured, share in rows:
        pct = f"{100 * share:9.1f} %" if share is not None else "        -"
        print(f"  {phase:<40}{gflop:8.2f}{floor:10.4f}{measured:12.4f}{pct:>12}")
    return rows


def floor_shower(config: str, shape: dict, rate: float, optimizer_floor: float):
    """`summarise`'s `show_floor` for one config, with that config's values bound when it is made: a lambda over the
    loop's variables would read whichever config the loop had reached by the time it is called."""
    return lambda name, merged: print_floor(config, name, floor_table(shape, merged, rate, optimizer_floor))


def summarise(results: dict[str, list[dict]], baseline: str, show_floor) -> dict:
    """Means over rounds per contender, training-time ratios to the baseline variant and to bare TRL; `show_floor`
    gets each rlvr contender's round-averaged step accounts (bare TRL has none) and returns its floor table."""
    summary = {}
    for contender, runs in results.items():
        summary[contender] = {key: mean(r[key] for r in runs) for key in ("train_runtime", "wall_s", "loss", "reward")}
        if runs[0]["samples_per_s"]:
            summary[contender]["samples_per_s"] = mean(r["samples_per_s"] for r in runs)
            per_step = {k: mean(r["per_step"].get(k, 0.0) for r in runs) for k in runs[0]["per_step"]}
            merged = {**runs[-1], "outside_steps_s": mean(r["outside_steps_s"] for r in runs), "per_step": per_step}
            summary[contender]["floor"] = show_floor(contender, merged)
    for entry in summary.values():
        entry["time_ratio_to_baseline"] = entry["train_runtime"] / summary[baseline]["train_runtime"]
        if BARE in summary:
            entry["time_ratio_to_bare"] = entry["train_runtime"] / summary[BARE]["train_runtime"]
    return summary


def check_flags(args) -> None:
    """Every flag's range before the first contender trains: a bad one is one line, not a failure after the work."""
    if args.warmup >= args.max_steps:
        raise ConfigError("--warmup", f"must be below --max_steps ({args.max_steps}): no timed step would be left")
    for variant in args.variants:
        try:
            parse_speedups(variant)
        except ValueError as err:
            raise ConfigError("--variants", f"{variant!r}: {err}") from None
    for config in args.configs:
        load_recipe_yaml(config, "--configs")
    if args.output:
        if Path(args.output).is_dir():
            raise ConfigError("--output", f"{args.output} is a folder; name the JSON report file")
        check_writable_folder(Path(args.output).absolute().parent, "--output")


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--configs", nargs="+", default=["recipes/tiny/grpo.yaml"])
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["none", "all"],
        help="`speedups` values to compare (e.g. none shared_prefix all); the first is the baseline",
    )
    parser.add_argument("--no_bare", action="store_true", help="leave out the bare TRL GRPOTrainer contender")
    parser.add_argument("--max_steps", type=positive_int, default=12)
    parser.add_argument(
        "--warmup", type=non_negative_int, default=2, help="first steps left out of samples/s and the floor table"
    )
    parser.add_argument("--rounds", type=positive_int, default=2, help="interleaved repetitions of every contender")
    parser.add_argument("--launcher", choices=["python", "accelerate"], default="python")
    parser.add_argument("--output", default=None, help="JSON report path")
    parser.add_argument(
        "--cpu_threads", default="auto", help="the recipe field, for every contender (1 on a busy machine)"
    )
    parser.add_argument("--_bare", default=None, help=SUPPRESS)
    parser.add_argument("--output_dir", default=None, help=SUPPRESS)
    args = parser.parse_args(argv)
    if args._bare:
        bare_trl(args._bare, args.max_steps, args.output_dir, args.cpu_threads)
        return {}
    check_flags(args)
    import torch

    from rlvr.runs.cpu_threads import cpu_threads_for

    torch.set_num_threads(cpu_threads_for(args.cpu_threads))
    report = {}
    with measured_load("speed") as load, tempfile.TemporaryDirectory(prefix="speed-") as scratch:
        big = matmul_rate(1024, 1024, 1024)
        print(f"fp32 matmul at {torch.get_num_threads()} thread(s): 1024^3 {big / 1e9:.1f} GFLOP/s", flush=True)
        for config in args.configs:
            shape = model_shape(config)
            own = matmul_rate(shape["samples"] * 32, shape["hidden"], shape["intermediate"])
            decode = matmul_rate(shape["samples"], shape["hidden"], shape["intermediate"])
            optimizer_floor = adamw_floor(shape["params"])
            print(
                f"{config}: {shape['params'] / 1e6:.2f}M parameters; matmul at the model's shapes "
                f"({shape['samples'] * 32}x{shape['hidden']}x{shape['intermediate']}) {own / 1e9:.1f} GFLOP/s, "
                f"decode ({shape['samples']}x{shape['hidden']}x{shape['intermediate']}) {decode / 1e9:.1f} GFLOP/s; "
                f"shared prefix {shape['shared_prefix']} of {shape['prompt_tokens']:.0f} prompt tokens",
                flush=True,
            )
            bare = not args.no_bare and shape["algorithm"] == "grpo"  # plain TRL has no other algorithm's advantages
            contenders = [*args.variants, *([BARE] if bare else [])]
            results = {contender: [] for contender in contenders}
            for round_ in range(args.rounds):
                for contender in contenders:
                    out = Path(scratch) / f"{Path(config).stem}-{contender.replace(',', '+')}-{round_}"
                    result = run_once(
                        config, contender, args.max_steps, args.warmup, args.launcher, out, args.cpu_threads
                    )
                    results[contender].append(result)
                    rate = f"{result['samples_per_s']:6.1f} samples/s" if result["samples_per_s"] else f"{'-':>17}"
                    label = "bare TRL" if contender == BARE else "speedups=" + contender
                    print(
                        f"{config} {label:<24} round {round_}: "
                        f"{rate}  train {result['train_runtime']:6.1f} s  wall {result['wall_s']:5.1f} s  "
                        f"loss {result['loss']:+.5f}  reward {result['reward']:.4f}",
                        flush=True,
                    )
            summary = summarise(results, args.variants[0], floor_shower(config, shape, max(big, own), optimizer_floor))
            report[config] = {
                "shape": shape,
                "matmul_gflops": {"1024^3": big / 1e9, "model": own / 1e9, "decode": decode / 1e9},
                "contenders": summary,
            }
    report["load"] = load
    print()
    for config, entry in report.items():
        if config == "load":
            continue
        for contender, s in entry["contenders"].items():
            cells = [
                f"train {s['train_runtime']:.1f} s",
                f"x{s['time_ratio_to_baseline']:.2f} of {args.variants[0]}'s time",
            ]
            if "time_ratio_to_bare" in s:
                cells.append(f"x{s['time_ratio_to_bare']:.2f} of bare TRL's time")
            if "samples_per_s" in s:
                cells.append(f"{s['samples_per_s']:.1f} samples/s")
            print(f"{config} {contender}: " + ", ".join(cells))
    if load["busy"]:
        print("warning: the machine was busy before the start: ratios show direction only")
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    cli(main)
