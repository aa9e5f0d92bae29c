"""Plant one known problem in each of a few short tiny runs, run `rlvr doctor` on each, and check it names it.

    HF_HUB_OFFLINE=1 WANDB_MODE=disabled python benchmarks/doctor_cases.py [--out runs/doctor-cases] [--only NAME ...]
        [--healthy runs/bench-tiny/grpo] [--markdown docs/measurements/doctor.md]

Every case is recipes/tiny/grpo.yaml (the main job: the tiny speller on 3-6 letter words) with a few fields changed,
trained for a few steps with `python recipes/grpo.py`; `plain-trl` trains the same model with a bare
`trl.GRPOTrainer` (no code of this repo in the trainer) and the doctor reads its `checkpoint-*/trainer_state.json`.
The healthy reference is the main job's own run (`python benchmarks/tiny_main_job.py` writes runs/bench-tiny/grpo):
the doctor must report no problem there. Exit status 0 when every case is named and the healthy run is clean.
"""

from __future__ import annotations

import subprocess
import sys
import time
from argparse import SUPPRESS
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from the repo root

from rlvr.analysis.doctor import diagnose
from rlvr.inputs import ArgumentParser, cli

RECIPE = ROOT / "recipes" / "tiny" / "grpo.yaml"


@dataclass
class Case:
    name: str
    planted: str  # what was changed, in words
    changes: dict  # recipe fields on top of recipes/tiny/grpo.yaml
    expect: str  # a problem line must contain this
    steps: int = 12
    extra: dict = field(default_factory=dict)


CASES = [
    Case(
        "truncated",
        "max_completion_length 12 (a 3-letter word's full answer is 22 tokens, end of text included)",
        {"max_completion_length": 12},
        "truncation:",
    ),
    Case("cold", "temperature 0.05 (near-greedy sampling)", {"temperature": 0.05}, "entropy collapse:"),
    Case(
        "g2",
        "num_generations 2 on the 0/1 success reward (32 prompts x 2 per step)",
        {"num_generations": 2, "reward_funcs": ["success"], "reward_weights": [1.0]},
        "idle groups:",
    ),
    Case(
        "lr-high",
        "learning_rate 0.5 (500x the recipe's 1e-3), constant",
        {"learning_rate": 0.5, "lr_scheduler_type": "constant"},
        "divergence|learning rate too high",
        steps=20,
    ),
    Case(
        "lr-low",
        "learning_rate 1e-9 (a millionth of the recipe's)",
        {"learning_rate": 1.0e-9},
        "learning rate does nothing",
    ),
    Case(
        "hollow",
        "a reward paying the four tags more the emptier they are (benchmarks/doctor_rewards.py)",
        {"reward_funcs": ["benchmarks.doctor_rewards.hollow_tags"], "reward_weights": [1.0]},
        "format saturated early|reward hack: step/hollow_format",
        steps=30,
    ),
    Case(
        "reused",
        "num_iterations 2 (each batch trained on twice) at learning_rate 3e-2 (30x the recipe's)",
        {"num_iterations": 2, "learning_rate": 3.0e-2},
        "off-policy steps:",
        steps=8,
    ),
]
PLAIN_TRL = Case(
    "plain-trl",
    "a bare trl.GRPOTrainer, max_completion_length 12, checkpoints only (no metrics.jsonl)",
    {"max_completion_length": 12},
    "truncation:",
    steps=6,
)


def train(case: Case, out: Path) -> Path:
    """Write the case's recipe (the main job's with `changes`) and train it; returns the run folder."""
    recipe = yaml.safe_load(RECIPE.read_text())
    run_dir = out / case.name
    recipe.update({**case.changes, "max_steps": case.steps, "output_dir": str(run_dir)})
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{case.name}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    command = [sys.executable, "recipes/grpo.py", "--config", str(path)]
    if case is PLAIN_TRL:
        command = [sys.executable, __file__, "--plain_trl_run", str(path)]
    print("$", " ".join(command), flush=True)
    log = (out / f"{case.name}.log").open("w")
    subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)
    return run_dir


def plain_trl_run(recipe_path: str) -> None:
    """The case recipe's model, data, rewards and sampling fields on a bare trl.GRPOTrainer: what a TRL user's own
    script writes (trainer_state.json in checkpoint-*/, no metrics.jsonl)."""
    from rlvr.data.generate import build_dataset
    from rlvr.data.spec import DataSpec
    from rlvr.rewards.functions import correctness, format
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.runs.cpu_threads import apply_cpu_threads

    recipe = yaml.safe_load(Path(recipe_path).read_text())
    apply_cpu_threads("auto", use_cpu=True)  # torch's default thread count oversubscribes a shared CPU many times over
    fields = (
        "learning_rate",
        "beta",
        "temperature",
        "max_completion_length",
        "num_generations",
        "generation_batch_size",
        "per_device_train_batch_size",
        "max_steps",
        "seed",
        "reward_weights",
    )
    args = GRPOConfig(
        output_dir=recipe["output_dir"],
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        report_to="none",
        save_strategy="steps",
        save_steps=max(1, recipe["max_steps"] // 2),
        **{key: recipe[key] for key in fields},
    )
    dataset = build_dataset(DataSpec.from_dict(recipe["data"]))["train"]
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(recipe["model_name_or_path"]),
        processing_class=AutoTokenizer.from_pretrained(recipe["model_name_or_path"]),
        reward_funcs=[correctness, format],
        args=args,
        train_dataset=dataset,
    )
    trainer.train()


def matches(expect: str, lines: list[str]) -> bool:
    return any(option in line for option in expect.split("|") for line in lines if "[problem]" in line)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="runs/doctor-cases")
    parser.add_argument("--only", nargs="+", default=None, help="case names")
    parser.add_argument("--healthy", default="runs/bench-tiny/grpo", help="the main job's run (tiny_main_job.py)")
    parser.add_argument("--markdown", default=None, help="also write the summary page here")
    parser.add_argument("--reuse", action="store_true", help="diagnose the runs already in --out, train none")
    parser.add_argument("--plain_trl_run", default=None, help=SUPPRESS)  # the plain-trl case's subprocess
    args = parser.parse_args(argv)
    if args.plain_trl_run:
        plain_trl_run(args.plain_trl_run)
        return 0
    out = Path(args.out)
    cases = [c for c in [*CASES, PLAIN_TRL] if not args.only or c.name in args.only]
    results = []  # (name, planted, expect, lines, named)
    for case in cases:
        start = time.perf_counter()
        run_dir = out / case.name if args.reuse else train(case, out)
        try:
            diagnosis = diagnose(run_dir)
            lines = diagnosis.lines()
        except Exception as err:  # noqa: BLE001 - a case that did not train is reported, not fatal to the others
            lines = [f"(no diagnosis: {err}; see {out / case.name}.log)"]
        named = matches(case.expect, lines)
        print(
            f"[{case.name}] {'named' if named else 'MISSED'} ({time.perf_counter() - start:.0f} s)",
            *lines,
            sep="\n  ",
            flush=True,
        )
        results.append((case.name, f"{case.planted}; {case.steps} steps", case.expect, lines, named))
    healthy = Path(args.healthy)
    if healthy.exists() and not args.only:
        diagnosis = diagnose(healthy)
        clean = not diagnosis.problems
        print(f"[healthy] {'no problem' if clean else 'FALSE ALARM'}", *diagnosis.lines(), sep="\n  ")
        results.append(
            (
                "healthy",
                f"the main job's run ({healthy}, {len(diagnosis.run.rows)} steps)",
                "(no problem line)",
                diagnosis.lines(),
                clean,
            )
        )
    if args.markdown:
        Path(args.markdown).write_text(markdown(results, argv))
    return 0 if all(r[-1] for r in results) else 1


def markdown(results, argv) -> str:
    args = list(argv if argv is not None else sys.argv[1:])
    reused = "--reuse" in args
    command = " ".join(["python benchmarks/doctor_cases.py", *(a for a in args if a != "--reuse")])
    parts = [
        "# `rlvr doctor` on planted problems",
        "",
        (
            f"Each case is recipes/tiny/grpo.yaml with one change, trained for a few steps on CPU; the doctor must "
            f"name the planted problem, and report no problem on the main job's run. Command: `{command}`"
            + (" (the runs it trained, diagnosed again with `--reuse`)." if reused else ".")
            + " The seconds and samples/s in the compute-bill lines come from 2 CPU cores shared with other jobs: "
            "they show what the doctor prints, not this recipe's speed."
        ),
        "",
        "| case | planted | expected (a problem line containing) | named |",
        "|---|---|---|---|",
    ]
    parts += [
        f"| {name} | {planted} | {' or '.join(f'`{e}`' for e in expect.split('|'))} | {'yes' if named else 'NO'} |"
        for name, planted, expect, _, named in results
    ]
    for name, _, _, lines, _ in results:
        parts += ["", f"## {name}", "", "```", *lines, "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.exit(cli(main))
