"""Ablation sweeps: one base recipe, one field varied, every value trained (per seed) and compared at equal compute.

    python -m rlvr.analysis.sweep sweeps/group_size.yaml [--max_steps 2] [--out runs/sweeps] [--dry_run] [--any_field value]
    python -m rlvr.analysis.sweep sweeps/group_size.yaml --jobs 2            # two runs at a time, each on its own cores
    python -m rlvr.analysis.sweep sweeps/group_size.yaml --launcher slurm    # a Slurm job array (rlvr.analysis.sweep_slurm)

The spec format is rlvr.analysis.sweep_spec's. Every variant is validated before the first one trains; each run is a
subprocess of its algorithm's script (`train_command`), one at a time or `--jobs N` at a time, each pinned to its share
of the cores (`core_slots`). Finished runs are skipped, so rerunning resumes a sweep, and a run another sweep under the
same --out trained is linked (rlvr.analysis.shared_runs). Then every finished run is evaluated and the sweep report
written (rlvr.analysis.report). Smoke mode (`--smoke`, or a `--max_steps` of at most SMOKE_MAX_STEPS) checks that a
sweep runs, not what it measures (`smoke_spec`). The whole story, with the Slurm launcher: docs/sweeps.md.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from rlvr.analysis import sweep_slurm
from rlvr.analysis.evaluate import evaluate
from rlvr.analysis.loaders import load_run, load_runs, read_evaluation
from rlvr.analysis.report import build_report
from rlvr.analysis.shared_runs import clear_stale_link, find_shared_run, is_linked, run_identity, share
from rlvr.analysis.summaries import summarize
from rlvr.analysis.sweep_spec import (
    Spec,
    Variant,
    evaluation_data,
    load_spec,
    plan,
    render_config,
    select,
    validate_variant,
)
from rlvr.analysis.tables import summary_table, text_table
from rlvr.inputs import (
    ArgumentParser,
    ConfigError,
    UniqueKeyLoader,
    check_writable_folder,
    cli,
    load_yaml_mapping,
    positive_int,
)
from rlvr.metrics.keys import EXACT_MATCH, OVERALL
from rlvr.runs import layout, tools
from rlvr.runs.checkpoints import checkpoint_problem
from rlvr.training.runner import main as train_recipe

REPO = Path(__file__).resolve().parents[2]
SUBPROCESS_LAUNCHERS = ("python", "accelerate")  # a process per run: what --jobs runs, and a Slurm task
LAUNCHERS = (*SUBPROCESS_LAUNCHERS, "inprocess", "slurm")  # inprocess: same interpreter, no log file (tests)
POLL_S = 0.5  # how often the sweep looks for a finished run while runs train side by side


def status(variant: Variant) -> str:
    """`done` (finished with this very config) or `pending`; a folder holding another config is an error. A linked
    folder (a shared run) is done when what it links to trained from the same recipe."""
    linked = is_linked(variant.run_dir)
    if not variant.config_path.exists():
        return "pending"  # never trained, or a link to a run since deleted (cleared by `clear_stale_link`)
    old = load_yaml_mapping(variant.config_path, "--out", "the recipe mapping the sweep wrote")
    if linked and run_identity(old) == run_identity(variant.config):
        return "done" if load_run(variant.run_dir).finished else "pending"
    if old != variant.config:
        changed = next(k for k in {**old, **variant.config} if old.get(k) != variant.config.get(k))
        raise ConfigError(
            changed,
            f"{variant.run_dir} holds a run with {changed}={old.get(changed)!r}, the sweep "
            f"now asks {variant.config.get(changed)!r}: delete that folder or use another --out",
        )
    if (variant.run_dir / layout.METRICS).exists() and load_run(variant.run_dir).finished:
        return "done"
    return "pending"


def train_command(variant: Variant, launcher: str, cpu_threads: int | None = None) -> list[str]:
    """The command that trains one variant, for every launcher but `inprocess` (a Slurm task runs it too). It resumes
    an unfinished run from its last complete checkpoint; `cpu_threads` (set by --jobs: the cores the run is pinned to)
    overrides the recipe's on the command line, so recipe.yaml and the run's identity stay the same."""
    prefix = [sys.executable] if launcher == "python" else tools.command("accelerate launch")
    threads = [] if cpu_threads is None else ["--cpu_threads", str(cpu_threads)]
    return [
        *prefix,
        str(REPO / variant.script),
        "--config",
        str(variant.config_path),
        "--resume_from_checkpoint",
        "true",
        *threads,
    ]


def write_recipe(variant: Variant, spec: Spec) -> None:
    """The run's folder and the recipe it trains from. A fresh start moves earlier records aside, a resume trims them
    (rlvr.runs.folder.start_record, in the callbacks)."""
    variant.run_dir.mkdir(parents=True, exist_ok=True)
    variant.config_path.write_text(render_config(variant, spec))


def core_slots(jobs: int, cores: list[int] | None = None) -> list[list[int]] | None:
    """--jobs N: the cores each of N runs side by side is pinned to, N equal disjoint shares of the cores this process
    may use (a remainder stays idle, so every run of the sweep trains at one thread count). None for one run at a
    time: it gets what the sweep has, at its recipe's cpu_threads."""
    if jobs == 1:
        return None
    if not hasattr(os, "sched_setaffinity"):
        raise ConfigError("--jobs", "pinning runs to cores needs Linux (os.sched_setaffinity); use --jobs 1 here")
    cores = sorted(os.sched_getaffinity(0)) if cores is None else cores
    share = len(cores) // jobs
    if share == 0:
        raise ConfigError(
            "--jobs", f"{jobs} runs at a time need at least {jobs} cores; this sweep may use {len(cores)}"
        )
    return [cores[i * share : (i + 1) * share] for i in range(jobs)]


def start_run(variant: Variant, spec: Spec, launcher: str, cores: list[int] | None) -> subprocess.Popen:
    """Start one run in the background, its console appended to its train.log, pinned to `cores` if given."""
    write_recipe(variant, spec)
    command = train_command(variant, launcher, None if cores is None else len(cores))
    with (variant.run_dir / layout.TRAIN_LOG).open("a") as log:
        log.write(
            f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(command)}"
            + (f" (pinned to cores {','.join(map(str, cores))})" if cores else "")
            + "\n"
        )
        log.flush()
        # Its own process group (start_new_session): a Ctrl-C at the terminal reaches the sweep only, which passes
        # one SIGTERM on (train_runs).
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    if cores is not None:  # Popen returns once the child has exec'd: a fresh interpreter, no thread of its own yet;
        os.sched_setaffinity(proc.pid, cores)  # the threads it starts later (torch's pool) inherit the mask
    return proc


def train_runs(runs: list[tuple[int, Variant]], spec: Spec, launcher: str, jobs: int, total: int) -> dict[str, int]:
    """Train (index, variant) pairs `jobs` at a time; returns label -> exit status. A failed run frees its cores for
    the next. Ctrl-C or SIGTERM to the sweep sends each running run one SIGTERM (rlvr.training.stopping: finish the
    step, save a checkpoint, stop; a second signal would stop it without one) and waits for it."""
    if launcher == "inprocess":
        for i, variant in runs:
            print(f"[sweep] {i}/{total} {variant.label}: training in this process", flush=True)
            start = time.perf_counter()
            write_recipe(variant, spec)
            train_recipe(["--config", str(variant.config_path), "--resume_from_checkpoint", "true"])
            print(f"[sweep] {variant.label}: done in {time.perf_counter() - start:.0f} s", flush=True)
        return {variant.label: 0 for _, variant in runs}
    slots = core_slots(jobs)
    if slots:  # a tiny model is built once, here, not by two runs at once into one folder
        from rlvr.recipes.tiny.model import ensure_tiny_model  # only a recipe that asks for the tiny model imports it

        for model in sorted({v.config["model_name_or_path"] for _, v in runs if v.config.get("build_tiny_model")}):
            ensure_tiny_model(model)
    queue, free, running, codes, received = list(runs), list(range(jobs)), {}, {}, []

    def interrupt(signum, frame):  # SIGTERM as Ctrl-C: a KeyboardInterrupt, the signal remembered for the exit status
        received.append(signum)
        raise KeyboardInterrupt

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        while queue or running:
            while queue and free:
                (i, variant), slot = queue.pop(0), free.pop(0)
                cores = slots[slot] if slots else None
                where = f" on cores {','.join(map(str, cores))}, {len(cores)} thread(s)" if cores else ""
                print(
                    f"[sweep] {i}/{total} {variant.label}: training{where} (log {variant.run_dir / layout.TRAIN_LOG})",
                    flush=True,
                )
                running[start_run(variant, spec, launcher, cores)] = (variant, slot, time.perf_counter())
            ended = [proc for proc in running if proc.poll() is not None]
            if not ended:
                time.sleep(POLL_S)
            for proc in ended:
                variant, slot, start = running.pop(proc)
                free.append(slot)
                codes[variant.label] = proc.returncode
                print(
                    f"[sweep] {variant.label}: {'done' if proc.returncode == 0 else 'failed'} in "
                    f"{time.perf_counter() - start:.0f} s"
                    + (
                        f" (exit {proc.returncode}; see {variant.run_dir / layout.TRAIN_LOG})"
                        if proc.returncode
                        else ""
                    ),
                    flush=True,
                )
                if proc.returncode:
                    print(tail(variant.run_dir / layout.TRAIN_LOG), flush=True)
    except KeyboardInterrupt:
        for signum in previous:
            signal.signal(signum, signal.SIG_DFL)  # a second signal ends the sweep at once
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        for proc in running:
            proc.wait()
        name = signal.Signals(received[0] if received else signal.SIGINT)
        print(
            f"stopped by {name.name}: {len(running)} running run(s) checkpointed and stopped; rerun the same command "
            "to resume them",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(128 + name)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return codes


def eval_recipe(config: dict, spec: Spec, target: Path) -> Path:
    """The recipe evaluation reads: the run's own, with the spec's `evaluate.data` (if any) merged over its data, so
    runs trained on different data (a word-length sweep) are all measured on one held-out set."""
    recipe = copy.deepcopy(config)
    if spec.evaluate.get("data"):
        recipe["data"] = evaluation_data(config, spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return target


def evaluate_model(model: str, config: dict, spec: Spec, out_dir: Path, name: str) -> dict:
    """Held-out pass@k of one model, written to <out_dir>/eval/<name>.json (skipped when already there)."""
    output = out_dir / layout.EVAL_DIR / f"{name}.json"
    if output.exists():
        return read_evaluation(output)
    recipe = eval_recipe(config, spec, out_dir / layout.EVAL_DIR / f"{name}.recipe.yaml")
    options = spec.evaluate
    return evaluate(
        str(recipe),
        model_path=model,
        num_samples=options["num_samples"],
        ks=tuple(options["k"]),
        num_prompts=options["num_prompts"],
        output=str(output),
        temperature=options["temperature"],
    )  # None: each run's own; a number: one for all runs


SMOKE_MAX_STEPS = 5  # a --max_steps override this small means a smoke sweep
SMOKE_STEPS = 2  # what --smoke trains without a --max_steps
SMOKE_EVALUATION = {"num_prompts": 16, "num_samples": 2, "k": [1, 2]}
SMOKE_OUT = "runs/smoke-sweeps"


def is_smoke(overrides: dict, smoke: bool) -> bool:
    steps = overrides.get("max_steps")
    return smoke or (isinstance(steps, int) and not isinstance(steps, bool) and steps <= SMOKE_MAX_STEPS)


def run_sweep(
    spec_path,
    out=None,
    overrides: dict | None = None,
    launcher: str = "python",
    dry_run: bool = False,
    last_k: int = 5,
    only: list[str] | None = None,
    smoke: bool = False,
    jobs: int = 1,
    report_only: bool = False,
    sbatch_file=None,
    sbatch: list[str] | None = None,
) -> dict:
    """Validate every variant, train the pending ones (`jobs` at a time, or as a Slurm job array), evaluate the
    finished ones, then write the sweep report. `report_only` trains nothing (the Slurm report job).

    Returns {"dir", "status" (label -> done/skipped/shared/failed/planned/pending/submitted/queued), "report", "smoke"}.
    """
    check_launch(launcher, jobs)
    spec = load_spec(spec_path)
    overrides = dict(overrides or {})
    smoke = is_smoke(overrides, smoke)
    out = out or (SMOKE_OUT if smoke else "runs/sweeps")
    check_writable_folder(out, "--out")  # a dry run too: the place is refused before anything trains
    if smoke:
        spec = smoke_spec(spec, overrides)
    print(f"[sweep] writing to {Path(out) / spec.name}/", flush=True)
    planned, variants, states = planned_variants(spec, Path(out), overrides, only)
    sources = {} if report_only else shared_sources(variants, states, spec, Path(out))
    sweep_dir = Path(out) / spec.name
    queued = sweep_slurm.active_tasks(sweep_dir) if launcher == "slurm" and not report_only else {}
    print_variants(variants, states, sources, queued)
    pending = pending_runs(variants, states, sources, queued)
    if launcher == "slurm" and not report_only and (dry_run or pending or queued):
        return submit_to_slurm(
            spec,
            sweep_dir,
            variants,
            pending,
            queued,
            states,
            sources,
            {
                "spec_path": spec_path,
                "out": out,
                "overrides": overrides,
                "only": only,
                "smoke": smoke,
                "last_k": last_k,
            },
            sbatch_file,
            sbatch,
            dry_run,
        )
    if dry_run:
        return {"dir": sweep_dir, "status": {label: "planned" for label in states}, "report": None, "smoke": smoke}

    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / layout.SWEEP_SPEC).write_text(spec.text)
    results = link_finished(variants, states, sources)
    codes = {}
    if report_only:
        results.update({v.label: "pending" for _, v in pending})
    else:
        codes = train_runs(pending, spec, launcher, jobs, len(variants))
        results.update({label: "done" if code == 0 else "failed" for label, code in codes.items()})
    if spec.evaluate:
        evaluate_finished(spec, variants, results, sweep_dir)
    report = write_report(sweep_dir, planned, codes, last_k)
    print(
        f"[sweep] {'smoke sweep' if smoke else 'sweep'} written to {sweep_dir}/"
        + (f" (report {report})" if report else ""),
        flush=True,
    )
    return {"dir": sweep_dir, "status": results, "report": report, "smoke": smoke}


def check_launch(launcher: str, jobs: int) -> None:
    """A launcher this command knows, `--jobs` only where runs are processes, and cores enough for `jobs`."""
    if launcher not in LAUNCHERS:
        raise ConfigError("--launcher", f"must be one of {LAUNCHERS}, got {launcher!r}")
    if jobs > 1 and launcher not in SUBPROCESS_LAUNCHERS:
        raise ConfigError(
            "--jobs",
            f"runs side by side need a process each (--launcher "
            f"{' or '.join(SUBPROCESS_LAUNCHERS)}); {launcher!r} "
            + ("runs every array task at once already" if launcher == "slurm" else "trains in this process"),
        )
    core_slots(jobs)  # too few cores: said before anything is written


def smoke_spec(spec: Spec, overrides: dict) -> Spec:
    """Smoke mode: SMOKE_STEPS per run unless `overrides` say otherwise, the evaluation shrunk, and a line that says
    its numbers are not a measurement."""
    overrides.setdefault("max_steps", SMOKE_STEPS)
    if spec.evaluate:
        spec = dataclasses.replace(spec, evaluate={**spec.evaluate, **SMOKE_EVALUATION})
    print(
        f"[sweep] smoke: {overrides['max_steps']} steps per run, held-out evaluation "
        f"{SMOKE_EVALUATION['num_prompts']} prompts x {SMOKE_EVALUATION['num_samples']} samples: checks that the "
        "sweep runs; its numbers are not a measurement",
        flush=True,
    )
    return spec


def planned_variants(spec: Spec, out: Path, overrides: dict, only: list[str] | None) -> tuple[list, list, dict]:
    """(every variant, the `only` ones, label -> state): the selected ones validated before the first one trains."""
    planned = plan(spec, out, overrides)
    variants = select(planned, only)
    for variant in variants:
        validate_variant(variant, spec, "max_steps" in overrides)
    return planned, variants, {v.label: status(v) for v in variants}


def pending_runs(variants: list[Variant], states: dict, sources: dict, queued: dict) -> list[tuple[int, Variant]]:
    """(task number, variant) of the runs left to train: pending, shared with no other sweep, not queued on Slurm."""
    return [
        (i, v)
        for i, v in enumerate(variants, 1)
        if states[v.label] == "pending" and not sources.get(v.label) and v.label not in queued
    ]


def shared_sources(variants: list[Variant], states: dict, spec: Spec, out: Path) -> dict:
    """label -> the run another sweep under `out` trained from the same recipe, for each pending, unstarted one."""
    return {
        v.label: find_shared_run(v, spec, out)
        for v in variants
        if states[v.label] == "pending" and not v.run_dir.exists()
    }


def print_variants(variants: list[Variant], states: dict, sources: dict, queued: dict) -> None:
    """One line a variant: its script, steps, folder and state (shared, queued on Slurm, or its own)."""
    for v in variants:
        state = (
            f"shares {sources[v.label][0]}"
            if sources.get(v.label)
            else f"queued on Slurm as {queued[v.label]}"
            if v.label in queued
            else states[v.label]
        )
        print(
            f"[sweep] {v.label}: {v.script}, max_steps {v.config.get('max_steps')} -> {v.run_dir} ({state})", flush=True
        )


def evaluate_finished(spec: Spec, variants: list[Variant], results: dict, sweep_dir: Path) -> None:
    """The base model once per sweep, then every finished run (each skipped once written), and with `every_steps`
    its checkpoints before its last step (the curve)."""
    evaluate_model(variants[0].config["model_name_or_path"], variants[0].config, spec, sweep_dir, "before")
    for variant in variants:
        if results.get(variant.label) in ("done", "skipped", "shared"):
            if spec.evaluate.get("every_steps"):
                for checkpoint in checkpoints(variant.run_dir, before_step=variant.config.get("max_steps")):
                    evaluate_model(str(checkpoint), variant.config, spec, variant.run_dir, checkpoint.name)
            after = evaluate_model(str(variant.run_dir), variant.config, spec, variant.run_dir, "after")
            print(f"[sweep] {variant.label}: held-out exact match {after[OVERALL][EXACT_MATCH]:.3f}", flush=True)


def link_finished(variants: list[Variant], states: dict, sources: dict) -> dict[str, str]:
    """Before anything trains: stale links cleared, runs another sweep trained linked. Returns label -> skipped
    (finished here already) or shared, for those."""
    results = {}
    for variant in variants:
        clear_stale_link(variant)
    for variant in variants:
        if states[variant.label] == "done":
            results[variant.label] = "skipped"
        elif shared := sources.get(variant.label):
            share(variant, *shared)
            results[variant.label] = "shared"
            print(
                f"[sweep] {variant.label}: shares {shared[0]} (the same recipe; "
                f"{'evaluated the same way' if shared[1] else 'evaluated here'}): not trained again",
                flush=True,
            )
    return results


def submit_to_slurm(
    spec: Spec,
    sweep_dir: Path,
    variants: list[Variant],
    pending: list[tuple[int, Variant]],
    queued: dict[str, str],
    states: dict,
    sources: dict,
    command: dict,
    sbatch_file,
    sbatch: list[str] | None,
    dry_run: bool,
) -> dict:
    """--launcher slurm: the pending runs as one job array, each task the command the local launcher runs, and a
    report job after it and after the tasks still queued from an earlier submission (rlvr.analysis.sweep_slurm)."""
    tasks = [(variant, train_command(variant, "python")) for _, variant in pending]
    waiting_on = sorted({job.split("_")[0] for job in queued.values()})
    report = report_command(**command)
    if dry_run:
        sweep_slurm.submit(spec.name, sweep_dir, tasks, report, sbatch_file, sbatch, waiting_on, dry_run=True)
        return {
            "dir": sweep_dir,
            "status": {label: "planned" for label in states},
            "report": None,
            "smoke": command["smoke"],
        }
    sweep_slurm.file_options(sbatch_file or sweep_slurm.SBATCH_FILE)  # a missing options file: said before writing
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / layout.SWEEP_SPEC).write_text(spec.text)
    results = {**link_finished(variants, states, sources), **{label: "queued" for label in queued}}
    if not tasks:
        print(
            f"[sweep] slurm: nothing to submit; {len(queued)} run(s) still queued or running, and the report job "
            "submitted with them writes the report",
            flush=True,
        )
        return {"dir": sweep_dir, "status": results, "report": None, "smoke": command["smoke"]}
    for variant, _ in tasks:
        write_recipe(variant, spec)
    sweep_slurm.submit(spec.name, sweep_dir, tasks, report, sbatch_file, sbatch, waiting_on)
    results.update({variant.label: "submitted" for variant, _ in tasks})
    return {"dir": sweep_dir, "status": results, "report": None, "smoke": command["smoke"]}


def report_command(spec_path, out, overrides: dict, only: list[str] | None, smoke: bool, last_k: int) -> list[str]:
    """The sweep command again, with --report_only: what the Slurm report job runs (the same plan, nothing trained)."""
    as_yaml = lambda value: yaml.safe_dump(value, default_flow_style=True, width=1 << 30).removesuffix("...\n").strip()
    argv = [
        sys.executable,
        "-m",
        "rlvr.analysis.sweep",
        str(spec_path),
        "--out",
        str(out),
        "--report_only",
        "--last_k",
        str(last_k),
        *(["--smoke"] if smoke else []),
    ]
    argv += [f"--{key}={as_yaml(value)}" for key, value in overrides.items()]
    return argv + (["--only", *only] if only else [])


def write_report(sweep_dir: Path, planned: list[Variant], codes: dict[str, int], last_k: int) -> Path | None:
    """The sweep report over the finished runs in the sweep folder, with a section naming the runs left out (planned
    but not trained, or stopped before the end) and why; None while no run has finished."""
    runs = {v.label: v.run_dir for v in planned}
    for path in sorted(sweep_dir.iterdir()):
        if (path / layout.METRICS).exists():
            runs.setdefault(path.name, path)
    finished = [label for label, path in runs.items() if (path / layout.METRICS).exists() and load_run(path).finished]
    left_out = {label: why_left_out(path, codes.get(label)) for label, path in runs.items() if label not in finished}
    for label, why in left_out.items():
        print(f"[sweep] {label}: left out of the report: {why}", flush=True)
    if not finished:
        return None
    report = build_report(sweep_dir, last_k=last_k, only=finished if left_out else None)
    if left_out:
        with report.open("a") as page:
            page.write(
                "\n## Runs left out\n\nNot finished, so not in the tables and curves above. Rerunning the sweep "
                "command trains them; an unfinished run resumes from its last complete checkpoint, if its "
                "recipe saves checkpoints.\n\n"
                + "\n".join(f"- **{label}**: {why}" for label, why in left_out.items())
                + "\n"
            )
    print(
        text_table(*summary_table(summarize([run for run in load_runs([sweep_dir]) if run.label in finished], last_k)))
    )
    print(f"[sweep] report: {report}")
    return report


def why_left_out(run_dir: Path, code: int | None) -> str:
    """`not trained`, or `stopped after step N`, with this sweep's exit status when it failed here, and the log."""
    if (run_dir / layout.METRICS).exists():
        rows = load_run(run_dir).rows
        why = f"stopped after step {rows[-1].get('step') if rows else 0}"
    else:
        why = "not trained"
    if code:
        why += f", failed in this sweep (exit {code})"
    log = run_dir / layout.TRAIN_LOG
    return why + (f"; log `{log}`" if log.exists() else "")


def checkpoints(run_dir: Path, before_step: int | None = None) -> list[Path]:
    """The run's complete checkpoint folders below `before_step` (the last step's weights are the run's own, which
    eval/after.json scores), in step order; torn ones from a crash are left out."""
    step = lambda p: int(layout.CHECKPOINT.match(p.name).group(1))
    found = [
        p
        for p in run_dir.iterdir()
        if p.is_dir()
        and layout.CHECKPOINT.match(p.name)
        and checkpoint_problem(p) is None
        and (before_step is None or step(p) < before_step)
    ]
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
            pairs[key] = yaml.load(value, Loader=UniqueKeyLoader)  # a SafeLoader with nesting bounded
        except yaml.YAMLError:
            raise ConfigError(f"--{key}", f"cannot read {value[:80]!r} as a YAML value") from None
    return pairs


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__, allow_abbrev=False)  # unknown flags are recipe overrides
    parser.add_argument("spec", help="sweep spec YAML (see sweeps/)")
    parser.add_argument(
        "--out",
        default=None,
        help=f"runs go to <out>/<name>/<label>/ (default runs/sweeps; {SMOKE_OUT} for a smoke sweep)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"check the sweep runs: {SMOKE_STEPS} steps per run (unless "
        f"--max_steps), held-out evaluation {SMOKE_EVALUATION['num_prompts']} prompts x "
        f"{SMOKE_EVALUATION['num_samples']} samples; also implied by --max_steps <= {SMOKE_MAX_STEPS}",
    )
    parser.add_argument(
        "--launcher",
        default="python",
        choices=LAUNCHERS,
        help="how each run starts (slurm: one job array, see rlvr.analysis.sweep_slurm)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        help="runs trained side by side, each pinned to an equal share of this machine's cores at that many threads",
    )
    parser.add_argument("--last_k", type=positive_int, default=5, help="generation steps averaged for final_* numbers")
    parser.add_argument("--dry_run", action="store_true", help="validate every variant and print the plan")
    parser.add_argument("--only", nargs="+", default=None, help="train only these run labels (seed suffix optional)")
    parser.add_argument(
        "--report_only",
        action="store_true",
        help="train nothing: evaluate the finished runs and write the report (the Slurm launcher's last job)",
    )
    parser.add_argument(
        "--sbatch_file",
        default=None,
        help=f"slurm: the #SBATCH options of every task (default {sweep_slurm.SBATCH_FILE.relative_to(REPO)})",
    )
    parser.add_argument(
        "--sbatch",
        action="append",
        default=None,
        metavar="OPTION",
        help="slurm: one more sbatch option, winning over the file (--sbatch=--partition=gpu)",
    )
    args, extra = parser.parse_known_args(argv)
    result = run_sweep(
        args.spec,
        args.out,
        parse_overrides(extra),
        args.launcher,
        args.dry_run,
        args.last_k,
        args.only,
        args.smoke,
        args.jobs,
        args.report_only,
        args.sbatch_file,
        args.sbatch,
    )
    if "failed" in result["status"].values():
        failed = [label for label, state in result["status"].items() if state == "failed"]
        print(f"error: runs failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)
    return result


if __name__ == "__main__":
    cli(main)
