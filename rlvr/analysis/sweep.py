"""Ablation sweeps: one base recipe, one field varied, every value trained in turn (per seed) and compared at equal compute.

    python -m rlvr.analysis.sweep sweeps/group_size.yaml [--max_steps 2] [--out runs/sweeps] [--dry_run] [--any_field value]

The spec format is in rlvr.analysis.sweep_spec. Every variant is validated before the first one trains (a bad field
fails in seconds, naming it). Runs are sequential subprocesses of the script of the recipe's `algorithm:`
(recipes/<algorithm>.py); each writes `recipe.yaml` (the recipe it launches; the runner records what ran as
`config.yaml`) and `train.log` into its directory. Finished runs are skipped, so rerunning the command resumes a sweep;
a run that another sweep under the same --out already trained from the same recipe is linked, not trained twice
(rlvr.analysis.shared_runs). At the end the sweep report (rlvr.analysis.report) overlays all runs against generated
samples and writes summary.md/.csv/.json.

Smoke mode (`--smoke`, or a `--max_steps` override of at most SMOKE_MAX_STEPS) checks that a sweep runs end to end, not
what it measures: every run trains a few steps (2 unless --max_steps says otherwise) and the held-out evaluation
shrinks to SMOKE_EVALUATION (16 prompts x 2 samples instead of the spec's, e.g. 200 x 8), so a one-setting smoke
sweep takes about a minute on a laptop. Its runs go under runs/smoke-sweeps (unless --out is given) and every line it
prints says smoke: its numbers are not comparable to a full sweep's.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rlvr.analysis.records import load_run, load_runs, summarize, summary_table, text_table
from rlvr.analysis.report import SPEC_NAME, build_report
from rlvr.analysis.shared_runs import clear_stale_link, find_shared_run, is_linked, run_identity, share
from rlvr.analysis.sweep_spec import EVAL_DIR, Spec, Variant, load_spec, plan, render_config, select, validate_variant
from rlvr import run_layout as layout
from rlvr.cli import ArgumentParser, ConfigError, cli, positive_int

REPO = Path(__file__).resolve().parents[2]
LAUNCHERS = ("python", "accelerate", "inprocess")  # inprocess: same interpreter, no log file (tests)


def status(variant: Variant) -> str:
    """`done` (finished with this very config) or `pending`; a folder holding another config is an error. A linked
    folder (a shared run) is done when what it links to trained from the same recipe."""
    linked = is_linked(variant.run_dir)
    if not variant.config_path.exists():
        return "pending"  # never trained, or a link to a run since deleted (cleared by `clear_stale_link`)
    old = yaml.safe_load(variant.config_path.read_text()) or {}
    if linked and run_identity(old) == run_identity(variant.config):
        return "done" if load_run(variant.run_dir).finished else "pending"
    if old != variant.config:
        changed = next(k for k in {**old, **variant.config} if old.get(k) != variant.config.get(k))
        raise ConfigError(changed, f"{variant.run_dir} holds a run with {changed}={old.get(changed)!r}, the sweep "
                                   f"now asks {variant.config.get(changed)!r}: delete that folder or use another --out")
    if (variant.run_dir / layout.METRICS).exists() and load_run(variant.run_dir).finished:
        return "done"
    return "pending"


def launch(variant: Variant, spec: Spec, launcher: str) -> int:
    """Train one variant; returns the exit status. Unfinished runs resume from their last checkpoint, if any."""
    variant.run_dir.mkdir(parents=True, exist_ok=True)
    variant.config_path.write_text(render_config(variant, spec))
    # A fresh start moves earlier records aside, a resume trims them: rlvr.training.run_files.start_record, in the callbacks.
    args = ["--config", str(variant.config_path), "--resume_from_checkpoint", "true"]
    if launcher == "inprocess":
        from rlvr.training.runner import main

        main(args)
        return 0
    script = str(REPO / variant.script)
    prefix = [sys.executable] if launcher == "python" else [sys.executable, "-m", "accelerate.commands.launch"]
    with (variant.run_dir / layout.TRAIN_LOG).open("a") as log:
        log.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join([*prefix, script, *args])}\n")
        log.flush()
        return subprocess.run([*prefix, script, *args], check=False, stdout=log, stderr=subprocess.STDOUT).returncode


def eval_recipe(config: dict, spec: Spec, target: Path) -> Path:
    """The recipe evaluation reads: the run's own, with the spec's `evaluate.data` (if any) merged over its data, so
    runs trained on different data (a word-length sweep) are all measured on one held-out set."""
    recipe = copy.deepcopy(config)
    if spec.evaluate.get("data"):
        recipe["data"] = {**recipe.get("data", {}), **spec.evaluate["data"]}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return target


def evaluate_model(model: str, config: dict, spec: Spec, out_dir: Path, name: str) -> dict:
    """Held-out pass@k of one model, written to <out_dir>/eval/<name>.json (skipped when already there)."""
    from rlvr.analysis.evaluate import evaluate

    output = out_dir / EVAL_DIR / f"{name}.json"
    if output.exists():
        return json.loads(output.read_text())
    recipe = eval_recipe(config, spec, out_dir / EVAL_DIR / f"{name}.recipe.yaml")
    options = spec.evaluate
    return evaluate(str(recipe), model_path=model, num_samples=options["num_samples"], ks=tuple(options["k"]),
                    num_prompts=options["num_prompts"], output=str(output),
                    temperature=options["temperature"])  # None: each run's own; a number: one for all runs


SMOKE_MAX_STEPS = 5  # a --max_steps override this small means a smoke sweep
SMOKE_STEPS = 2  # what --smoke trains without a --max_steps
SMOKE_EVALUATION = {"num_prompts": 16, "num_samples": 2, "k": [1, 2]}
SMOKE_OUT = "runs/smoke-sweeps"


def is_smoke(overrides: dict, smoke: bool) -> bool:
    steps = overrides.get("max_steps")
    return smoke or (isinstance(steps, int) and not isinstance(steps, bool) and steps <= SMOKE_MAX_STEPS)


def run_sweep(spec_path, out=None, overrides: dict | None = None, launcher: str = "python",
              dry_run: bool = False, last_k: int = 5, only: list[str] | None = None, smoke: bool = False) -> dict:
    """Validate every variant, train the pending ones in order, evaluate them, then write the sweep report.

    Returns {"dir", "status" (label -> done/skipped/shared/failed/planned), "report", "smoke"}.
    """
    if launcher not in LAUNCHERS:
        raise ConfigError("--launcher", f"must be one of {LAUNCHERS}, got {launcher!r}")
    spec = load_spec(spec_path)
    overrides = dict(overrides or {})
    smoke = is_smoke(overrides, smoke)
    out = out or (SMOKE_OUT if smoke else "runs/sweeps")
    if smoke:
        overrides.setdefault("max_steps", SMOKE_STEPS)
        if spec.evaluate:
            spec = dataclasses.replace(spec, evaluate={**spec.evaluate, **SMOKE_EVALUATION})
        print(f"[sweep] smoke: {overrides['max_steps']} steps per run, held-out evaluation "
              f"{SMOKE_EVALUATION['num_prompts']} prompts x {SMOKE_EVALUATION['num_samples']} samples: checks that the "
              "sweep runs; its numbers are not a measurement", flush=True)
    print(f"[sweep] writing to {Path(out) / spec.name}/", flush=True)
    variants = select(plan(spec, Path(out), overrides), only)
    for variant in variants:
        validate_variant(variant, spec, "max_steps" in overrides)
    states = {v.label: status(v) for v in variants}
    sources = {v.label: find_shared_run(v, spec, Path(out)) for v in variants
               if states[v.label] == "pending" and not v.run_dir.exists()}
    sweep_dir = Path(out) / spec.name
    for v in variants:
        state = f"shares {sources[v.label][0]}" if sources.get(v.label) else states[v.label]
        print(f"[sweep] {v.label}: {v.script}, max_steps {v.config.get('max_steps')} -> {v.run_dir} ({state})",
              flush=True)
    if dry_run:
        return {"dir": sweep_dir, "status": {label: "planned" for label in states}, "report": None, "smoke": smoke}

    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / SPEC_NAME).write_text(spec.text)
    for variant in variants:
        clear_stale_link(variant)
    results = {}
    for i, variant in enumerate(variants, 1):
        if states[variant.label] == "done":
            results[variant.label] = "skipped"
            continue
        if shared := sources.get(variant.label):
            share(variant, *shared)
            results[variant.label] = "shared"
            print(f"[sweep] {variant.label}: shares {shared[0]} (the same recipe; "
                  f"{'evaluated the same way' if shared[1] else 'evaluated here'}): not trained again", flush=True)
            continue
        print(f"[sweep] {i}/{len(variants)} {variant.label}: training (log {variant.run_dir / layout.TRAIN_LOG})", flush=True)
        start = time.perf_counter()
        code = launch(variant, spec, launcher)
        results[variant.label] = "done" if code == 0 else "failed"
        print(f"[sweep] {variant.label}: {results[variant.label]} in {time.perf_counter() - start:.0f} s"
              + (f" (exit {code}; see {variant.run_dir / layout.TRAIN_LOG})" if code else ""), flush=True)
        if code:
            print(tail(variant.run_dir / layout.TRAIN_LOG), flush=True)
    if spec.evaluate:  # the base model once per sweep, then every finished run (each skipped once written)
        evaluate_model(variants[0].config["model_name_or_path"], variants[0].config, spec, sweep_dir, "before")
        for variant in variants:
            if results.get(variant.label) in ("done", "skipped", "shared"):
                if spec.evaluate.get("every_steps"):  # the curve: the run's checkpoints before its last step
                    for checkpoint in checkpoints(variant.run_dir, before_step=variant.config.get("max_steps")):
                        evaluate_model(str(checkpoint), variant.config, spec, variant.run_dir, checkpoint.name)
                after = evaluate_model(str(variant.run_dir), variant.config, spec, variant.run_dir, "after")
                print(f"[sweep] {variant.label}: held-out exact match {after['overall']['exact_match']:.3f}", flush=True)

    report = None
    if any((v.run_dir / layout.METRICS).exists() for v in variants):
        report = build_report(sweep_dir, last_k=last_k)
        print(text_table(*summary_table(summarize(load_runs([sweep_dir]), last_k))))
        print(f"[sweep] report: {report}")
    print(f"[sweep] {'smoke sweep' if smoke else 'sweep'} written to {sweep_dir}/"
          + (f" (report {report})" if report else ""), flush=True)
    return {"dir": sweep_dir, "status": results, "report": report, "smoke": smoke}


def checkpoints(run_dir: Path, before_step: int | None = None) -> list[Path]:
    """The run's complete checkpoint folders below `before_step` (the last step's weights are the run's own, which
    eval/after.json scores), in step order; torn ones from a crash are left out."""
    from rlvr.training.run_files import CHECKPOINT, checkpoint_problem

    step = lambda p: int(CHECKPOINT.match(p.name).group(1))
    found = [p for p in run_dir.iterdir() if p.is_dir() and CHECKPOINT.match(p.name) and checkpoint_problem(p) is None
             and (before_step is None or step(p) < before_step)]
    return sorted(found, key=step)


def tail(path: Path, lines: int = 5) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


def parse_overrides(extra: list[str]) -> dict:
    """`--field value` pairs (or `--field=value`) after the sweep's own flags; values read as YAML (2, true, 0.7)."""
    pairs, items = {}, list(extra)
    while items:
        flag = items.pop(0)
        if not flag.startswith("--"):
            raise ConfigError(flag, "expected --field value")
        if "=" in flag:
            key, value = flag[2:].split("=", 1)
        elif items and not items[0].startswith("--"):
            key, value = flag[2:], items.pop(0)
        else:
            raise ConfigError(flag, "needs a value")
        try:
            pairs[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"--{key}", f"cannot read {value!r} as a YAML value") from None
    return pairs


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)  # unknown flags are recipe overrides
    parser.add_argument("spec", help="sweep spec YAML (see sweeps/)")
    parser.add_argument("--out", default=None, help=f"runs go to <out>/<name>/<label>/ (default runs/sweeps; {SMOKE_OUT} "
                        "for a smoke sweep)")
    parser.add_argument("--smoke", action="store_true", help=f"check the sweep runs: {SMOKE_STEPS} steps per run (unless "
                        f"--max_steps), held-out evaluation {SMOKE_EVALUATION['num_prompts']} prompts x "
                        f"{SMOKE_EVALUATION['num_samples']} samples; also implied by --max_steps <= {SMOKE_MAX_STEPS}")
    parser.add_argument("--launcher", default="python", choices=LAUNCHERS, help="how each run starts")
    parser.add_argument("--last_k", type=positive_int, default=5, help="generation steps averaged for final_* numbers")
    parser.add_argument("--dry_run", action="store_true", help="validate every variant and print the plan")
    parser.add_argument("--only", nargs="+", default=None, help="train only these run labels (seed suffix optional)")
    args, extra = parser.parse_known_args(argv)
    result = run_sweep(args.spec, args.out, parse_overrides(extra), args.launcher, args.dry_run, args.last_k, args.only,
                       args.smoke)
    if "failed" in result["status"].values():
        failed = [label for label, state in result["status"].items() if state == "failed"]
        print(f"error: runs failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    return result


if __name__ == "__main__":
    cli(main)
