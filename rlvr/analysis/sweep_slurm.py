"""A sweep on a Slurm cluster: its pending runs as one job array (one task a run), then a report job after them.

    rlvr sweep sweeps/group_size.yaml --launcher slurm              # submit; rerun it to resubmit what did not finish
    rlvr sweep sweeps/group_size.yaml --launcher slurm --dry_run    # print the two sbatch scripts, submit nothing

Array task i runs the command the local launcher runs for run i; a final job, `--dependency=afterany` on the array,
reruns the sweep command with `--report_only`. Each task asks for one GPU, or only CPUs for a `use_cpu: true` recipe;
every other option comes from `slurm/sweep.sbatch` or `--sbatch=...` flags. Rerunning resubmits only what is neither
finished, shared nor still queued (`active_tasks`); every submission is recorded in `<sweep>/slurm/jobs.json`. The
cluster's requirements and the whole story: docs/sweeps.md ("--launcher slurm").
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from rlvr.analysis.sweep_spec import Variant
from rlvr.inputs import ConfigError, name_inside, read_json, read_text
from rlvr.runs import layout

REPO = Path(__file__).resolve().parents[2]
SBATCH_FILE = REPO / "slurm" / "sweep.sbatch"  # the options the user edits
SLURM_DIR = "slurm"  # <sweep>/slurm/: scripts, Slurm logs, jobs.json
JOBS_FILE = "jobs.json"
GPU_OPTION = "#SBATCH --gres=gpu:1"  # a task of a recipe without `use_cpu: true`
TASK = re.compile(r"^(\d+)_(\d+|\[[^\]]*\])$")  # squeue's job ids of array tasks: 123_4, or 123_[5-7,9%2] pending


def file_options(path) -> list[str]:
    """The `#SBATCH` lines of the options file, in order (comments and blank lines dropped)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("--sbatch_file", f"no such file: {path}")
    return [
        line.strip() for line in read_text(path, "--sbatch_file").splitlines() if line.strip().startswith("#SBATCH")
    ]


def flag_options(options: list[str] | None) -> list[str]:
    """`--sbatch` values as sbatch flags: `--partition=gpu`, `partition=gpu` and `-p gpu` all work."""
    flags = []
    for option in options or []:
        try:
            parts = shlex.split(option)
        except ValueError as err:  # an unbalanced quote
            raise ConfigError("--sbatch", f"cannot split {option!r} as a shell word list: {err}") from None
        if not parts:
            raise ConfigError("--sbatch", "an empty option")
        if not parts[0].startswith("-"):
            parts[0] = "--" + parts[0]
        flags += parts
    return flags


def resource_options(variants: list[Variant]) -> list[str]:
    """One GPU per task, or none when the recipes train on CPU; one array holds one kind."""
    kinds = {bool(v.config.get("use_cpu", False)) for v in variants}
    if len(kinds) > 1:
        cpu = [v.label for v in variants if v.config.get("use_cpu")]
        raise ConfigError(
            "--launcher",
            f"the sweep mixes CPU runs ({', '.join(cpu)}) and GPU runs, and one job array "
            "asks for one kind: submit them separately with --only",
        )
    return [] if kinds == {True} else [GPU_OPTION]


def header(name: str, output: str, options: list[str]) -> list[str]:
    return ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --output={output}", *options]


def array_script(
    sweep: str, tasks: list[tuple[Variant, list[str]]], slurm_dir: Path, options: list[str], workdir: Path
) -> str:
    """The job array: task i runs run i's command from `workdir`, appending to its train.log as the local launcher does."""
    lines = header(f"sweep-{sweep}", str(slurm_dir / "%A_%a.out"), [f"#SBATCH --array=0-{len(tasks) - 1}", *options])
    lines += [
        f"# Sweep {sweep!r}: one task a run (rlvr sweep ... --launcher slurm); the command is the local launcher's.",
        "set -euo pipefail",
        f"cd {shlex.quote(str(workdir))}",
        "export WANDB_MODE=${WANDB_MODE:-offline}  # no login on compute nodes: sync later with `wandb sync`",
        'case "${SLURM_ARRAY_TASK_ID:?this script runs as a Slurm array task}" in',
    ]
    for index, (variant, command) in enumerate(tasks):
        lines.append(
            f"  {index}) RUN_DIR={shlex.quote(str(variant.run_dir))}; COMMAND=({shlex.join(command)}) ;;"
            f"  # {variant.label}"
        )
    lines += [
        '  *) echo "no run for array task $SLURM_ARRAY_TASK_ID" >&2; exit 2 ;;',
        "esac",
        'mkdir -p "$RUN_DIR"',
        (
            "echo \"=== $(date '+%Y-%m-%d %H:%M:%S') ${COMMAND[*]} (Slurm task ${SLURM_ARRAY_JOB_ID:-?}_"
            f'$SLURM_ARRAY_TASK_ID on $(hostname))" >> "$RUN_DIR/{layout.TRAIN_LOG}"'
        ),
        f'exec "${{COMMAND[@]}}" >> "$RUN_DIR/{layout.TRAIN_LOG}" 2>&1',
    ]
    return "\n".join(lines) + "\n"


def report_script(sweep: str, command: list[str], slurm_dir: Path, options: list[str], workdir: Path) -> str:
    """The job after the array: the sweep command with --report_only (evaluate what finished, write the report)."""
    lines = header(f"sweep-{sweep}-report", str(slurm_dir / "report-%j.out"), options)
    lines += [
        f"# Sweep {sweep!r}: evaluates the finished runs and writes the sweep report, naming the runs left out.",
        "set -euo pipefail",
        f"cd {shlex.quote(str(workdir))}",
        f"exec {shlex.join(command)}",
    ]
    return "\n".join(lines) + "\n"


def submissions(sweep_dir: Path) -> list[dict]:
    """The arrays jobs.json records, each checked as `submit` writes it: a Slurm job id (digits) and the labels of
    its tasks, each a run of this sweep (`name_inside`); anything else is one line naming the file."""
    path = sweep_dir / SLURM_DIR / JOBS_FILE
    entries = read_json(path, "--out", list) if path.exists() else []
    for number, entry in enumerate(entries, 1):
        array = entry.get("array") if isinstance(entry, dict) else None
        tasks = entry.get("tasks") if isinstance(entry, dict) else None
        if not isinstance(array, str) or not array.isdigit() or not isinstance(tasks, list):
            raise ConfigError(
                "--out",
                f"{path}: entry {number} is not a submission ({{array: <job id>, tasks: [labels]}}): {str(entry)[:40]}",
            )
        for label in tasks:
            try:
                name_inside(sweep_dir, label, "--out", "task label")
            except ConfigError as err:
                raise ConfigError("--out", f"{path}: entry {number}: {err.message}") from None
    return entries


def task_indices(text: str) -> list[int]:
    """`4` -> [4]; `[5-7,9%2]` (a pending range, throttled) -> [5, 6, 7, 9]."""
    indices = []
    for part in text.strip("[]").split("%")[0].split(","):
        low, _, high = part.partition("-")
        indices += range(int(low), int(high or low) + 1)
    return indices


def active_tasks(sweep_dir: Path) -> dict[str, str]:
    """label -> Slurm task id, for the runs of this sweep's earlier arrays that Slurm still lists (queued or running).
    Without squeue, or when it knows none of the jobs (long finished), none."""
    arrays = {entry["array"]: entry["tasks"] for entry in submissions(sweep_dir)}
    if not arrays or not shutil.which("squeue"):
        return {}
    done = subprocess.run(
        ["squeue", "--noheader", "--array", "--format=%i", f"--jobs={','.join(arrays)}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        return {}  # "Invalid job id specified": every job of the list has left the queue
    active = {}
    for line in done.stdout.split():
        if (match := TASK.match(line)) and match.group(1) in arrays:
            labels = arrays[match.group(1)]
            for index in task_indices(match.group(2)):
                if index < len(labels):
                    active[labels[index]] = f"{match.group(1)}_{index}"
    return active


def sbatch(script: Path, flags: list[str], dependency: str | None = None) -> str:
    """Submit one script; returns the job id (`sbatch --parsable` prints `id` or `id;cluster`)."""
    argv = [
        "sbatch",
        "--parsable",
        *([f"--dependency=afterany:{dependency}"] if dependency else []),
        *flags,
        str(script),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ConfigError("--launcher", f"`{shlex.join(argv)}` failed: {why}")
    return done.stdout.strip().split(";")[0]


def submit(
    sweep: str,
    sweep_dir: Path,
    tasks: list[tuple[Variant, list[str]]],
    report_command: list[str],
    sbatch_file=None,
    sbatch_flags: list[str] | None = None,
    waiting_on: list[str] = (),
    dry_run: bool = False,
) -> dict[str, str]:
    """Submit the array of `tasks` and the report job after it and after the arrays in `waiting_on` (still queued
    from an earlier submission); returns label -> array task id. With dry_run, prints both scripts and the sbatch
    lines and submits nothing (with no tasks, the report script alone)."""
    options = file_options(sbatch_file or SBATCH_FILE) + resource_options([variant for variant, _ in tasks])
    flags = flag_options(sbatch_flags)
    slurm_dir = (sweep_dir / SLURM_DIR).resolve()
    workdir = Path.cwd()
    scripts = {
        "array": array_script(sweep, tasks, slurm_dir, options, workdir) if tasks else None,
        "report": report_script(sweep, report_command, slurm_dir, options, workdir),
    }
    if dry_run:
        after = ":".join([*waiting_on, *(["<array job id>"] if tasks else [])])
        for kind, text in scripts.items():
            if text:
                dependency = f"--dependency=afterany:{after} " if kind == "report" and after else ""
                print(
                    f"[sweep] slurm {kind} script (sbatch --parsable {dependency}{shlex.join(flags)}"
                    f"{' ' if flags else ''}<script>):\n{text}",
                    end="",
                    flush=True,
                )
        return {}
    if not shutil.which("sbatch"):
        raise ConfigError("--launcher", "no `sbatch` on PATH: the Slurm launcher runs where Slurm's commands are")
    slurm_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = slurm_dir / f"array-{stamp}.sh"
    path.write_text(scripts["array"])
    array = sbatch(path, flags)
    path = slurm_dir / f"report-{stamp}.sh"
    path.write_text(scripts["report"])
    report = sbatch(path, flags, ":".join([*waiting_on, array]))
    record = {
        "array": array,
        "report": report,
        "tasks": [variant.label for variant, _ in tasks],
        "submitted": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (slurm_dir / JOBS_FILE).write_text(json.dumps([*submissions(sweep_dir), record], indent=1) + "\n")
    print(
        f"[sweep] slurm: array job {array} ({len(tasks)} tasks), report job {report} after it"
        + (f" and after {', '.join(waiting_on)}" if waiting_on else "")
        + f" (scripts and logs in {slurm_dir}/, job ids in {JOBS_FILE})",
        flush=True,
    )
    return {variant.label: f"{array}_{index}" for index, (variant, _) in enumerate(tasks)}
