"""One run per folder, shown with real tiny runs (the fast recipe, 1-2 steps, checkpoints every step).

Run A (seed 1) finishes in a folder; run B (seed 2, a fresh start) is launched into the same folder. B must move all
of A's files (checkpoints, final model, records, run.json) into previous-runs/<A's id>/, and B's own checkpoints
carry B's id. From copies of B's folder: a resume refuses a checkpoint of another run; a resume with the same recipe
takes B's checkpoint (and a stale lock left by a killed run, with a line saying so); a changed learning rate is
refused in one line naming both values, a micro-batch change is allowed and noted, and `--allow_recipe_change true`
continues with the change recorded in run.json. A real run whose custom reward hangs holds the folder's lock (a
second run into the folder is refused at once), and stops at `reward_time_limit` naming the reward and the step,
its last checkpoint intact and the lock cleared.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FAST_RECIPE, REPO, read_jsonl, saving_every

from rlvr.inputs import cli
from rlvr.runs import layout
from rlvr.runs.checkpoints import checkpoint_problem
from rlvr.runs.resume import checkpoint_run_id, read_run_json

STEPS = [*saving_every(1), "--print_rollouts", "false", "--report_to", "none", "--config", FAST_RECIPE]


def train(out: Path, model: str, *extra: str) -> tuple[int, str, str]:
    """One in-process run of recipes/grpo.py's main through the console wrapper: (exit status, stdout, stderr)."""
    from rlvr.training.runner import main

    stdout, stderr = io.StringIO(), io.StringIO()
    status = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            cli(main, [*STEPS, "--model_name_or_path", model, "--output_dir", str(out), *extra], algorithm="grpo")
        except SystemExit as exit_info:
            status = exit_info.code
    return status, stdout.getvalue(), stderr.getvalue()


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:") or "Traceback" in line]


@pytest.fixture(scope="module")
def two_runs(tiny_model_dir, tmp_path_factory):
    """A (seed 1, checkpoints 1 and 2, final model), then B (seed 2, likewise) fresh into the same folder."""
    out = tmp_path_factory.mktemp("reused") / "run"
    status, _, err = train(out, tiny_model_dir, "--seed", "1", "--max_steps", "2")
    assert status == 0, err[-3000:]
    a_id = read_run_json(out)["run_id"]
    a_files = sorted(p.name for p in out.iterdir())
    status, b_out, err = train(out, tiny_model_dir, "--seed", "2", "--max_steps", "2")
    assert status == 0, err[-3000:]
    return {
        "out": out,
        "a_id": a_id,
        "a_files": a_files,
        "b_id": read_run_json(out)["run_id"],
        "b_stdout": b_out,
        "model": tiny_model_dir,
    }


def copy_of(two_runs, tmp_path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(two_runs["out"], target, symlinks=True)
    return target


def test_a_fresh_run_into_a_used_folder_moves_every_file_of_the_earlier_run_aside(two_runs):
    out, a_id, b_id = two_runs["out"], two_runs["a_id"], two_runs["b_id"]
    assert a_id != b_id
    archive = out / layout.PREVIOUS_RUNS / a_id
    assert (
        f"held an earlier run ({a_id}: checkpoint-1, checkpoint-2, the final model, records): moved to {archive}/"
        in two_runs["b_stdout"]
    )
    # everything A wrote is in the archive, and A's records are A's (seed 1, 2 steps), untouched
    assert sorted(p.name for p in archive.iterdir()) == [name for name in two_runs["a_files"] if name != layout.LOCK]
    assert read_run_json(archive)["run_id"] == a_id
    assert [r["step"] for r in read_jsonl(archive / layout.METRICS) if "loss" in r] == [1, 2]
    assert {checkpoint_run_id(archive / f"checkpoint-{s}") for s in (1, 2)} == {a_id}
    # the folder now holds B alone: its checkpoints, its final model, its records; no lock once it ended
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert {checkpoint_run_id(out / f"checkpoint-{s}") for s in (1, 2)} == {b_id}
    assert [r["step"] for r in read_jsonl(out / layout.METRICS) if "loss" in r] == [1, 2]
    assert (out / "model.safetensors").exists() and not (out / layout.LOCK).exists()
    assert not list(out.glob("metrics.*.jsonl"))  # moved with the rest, not beside B's records


RESUME_B = ("--seed", "2", "--max_steps", "2", "--resume_from_checkpoint", "true")  # run B's recipe, resumed


def refused_untouched(out: Path, model: str, *extra: str) -> list[str]:
    """The error lines of a run refused with exit status 2 that wrote nothing and moved nothing in `out`."""
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    status, _, err = train(out, model, *extra)
    assert status == 2
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before  # nothing written, nothing moved
    return error_lines(err)


def test_a_resume_takes_only_its_own_runs_checkpoint(two_runs, tmp_path):
    out, a_id, b_id = copy_of(two_runs, tmp_path), two_runs["a_id"], two_runs["b_id"]
    # A's checkpoint put back (what the folder held before runs had ids): newer than B's, and refused
    shutil.copytree(out / layout.PREVIOUS_RUNS / a_id / "checkpoint-2", out / "checkpoint-5")
    assert refused_untouched(out, two_runs["model"], *RESUME_B) == [
        (
            f"error: resume_from_checkpoint: {out / 'checkpoint-5'} belongs to run {a_id}, not to run {b_id} that {out} "
            "holds: resume a run in its own output_dir, or start this one fresh with --resume_from_checkpoint false"
        )
    ]
    shutil.rmtree(out / "checkpoint-5")
    # B's checkpoint at max_steps: the run is finished; the same command again says so and exits 0, writing nothing
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    status, stdout, err = train(
        out, two_runs["model"], "--seed", "2", "--max_steps", "2", "--resume_from_checkpoint", "true"
    )
    assert status == 0 and error_lines(err) == [], err[-3000:]
    assert f"[resume] {out} is finished: {out / 'checkpoint-2'} is at max_steps 2; nothing to do" in stdout
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
    # a command asking fewer steps than the checkpoint has is refused (the Trainer would train one step more)
    status, _, err = train(
        out, two_runs["model"], "--seed", "2", "--max_steps", "1", "--resume_from_checkpoint", "true"
    )
    assert status == 2 and error_lines(err) == [
        (
            f"error: max_steps: {out / 'checkpoint-2'} is at step 2, past max_steps 1: the run trained further than "
            "this command asks; to train further raise max_steps (--allow_recipe_change true), or use another "
            "output_dir"
        )
    ]
    shutil.rmtree(out / "checkpoint-2")  # as if B had been stopped after step 1

    # the same recipe resumes B's own checkpoint; a lock file left by a killed run is taken over, and said so
    (out / layout.LOCK).write_text(
        json.dumps({"host": socket.gethostname(), "pid": 999_999_999, "run_id": b_id, "since": "earlier"}) + "\n"
    )
    status, stdout, err = train(out, two_runs["model"], *RESUME_B)
    assert status == 0, err[-3000:]
    assert f"[resume] from {out / 'checkpoint-1'} (run {b_id})" in stdout
    assert f"[run] took over a stale lock in {out} (host {socket.gethostname()} pid 999999999" in stdout
    assert "[resume] changed" not in stdout and "recipe changed" not in stdout  # the same recipe: nothing to note
    assert read_run_json(out)["run_id"] == b_id and [r["step"] for r in read_run_json(out)["resumes"]] == [1]
    assert not (out / layout.LOCK).exists()
    assert [r["step"] for r in read_jsonl(out / layout.METRICS) if "loss" in r] == [1, 2]  # each step once


def test_a_changed_resume_is_refused_and_allowed_with_the_flag_recorded(two_runs, tmp_path):
    out, b_id, model = copy_of(two_runs, tmp_path), two_runs["b_id"], two_runs["model"]
    shutil.rmtree(out / "checkpoint-2")  # as if B had been stopped after step 1
    resume = RESUME_B
    before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    status, _, err = train(out, model, *resume, "--learning_rate", "0.01")
    assert status == 2 and len(error_lines(err)) == 1, err[-3000:]
    assert error_lines(err)[0].startswith(
        f"error: learning_rate: the run in {out} trained with 0.001 "
        f"({out / 'config.yaml'}), this resume asks 0.01: that changes what is "
        "optimised; use another output_dir for a new run, or pass "
        "--allow_recipe_change true"
    )
    status, _, err = train(out, model, *resume, "--num_generations", "8")
    assert status == 2 and error_lines(err)[0].startswith("error: num_generations: the run in"), err[-3000:]

    # half the micro-batch alone halves the optimizer step: refused, named by the field that moved
    status, _, err = train(out, model, *resume, "--per_device_train_batch_size", "8")
    assert status == 2 and "(completions per optimizer step 16 -> 8)" in error_lines(err)[0]
    assert error_lines(err)[0].startswith("error: per_device_train_batch_size: the run in")
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before

    # half the micro-batch with twice the accumulation (the same optimizer step) is memory only: allowed, noted
    status, stdout, err = train(
        out, model, *resume, "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "2"
    )
    assert status == 0, err[-3000:]
    assert (
        "[resume] changed, memory or speed only: per_device_train_batch_size 16 -> 8; "
        "gradient_accumulation_steps 1 -> 2"
    ) in stdout

    # with the flag, the run continues (one more step at the new learning rate) and run.json records the change
    status, stdout, err = train(
        out,
        model,
        "--seed",
        "2",
        "--max_steps",
        "3",
        "--resume_from_checkpoint",
        "true",
        "--learning_rate",
        "0.01",
        "--allow_recipe_change",
        "true",
    )
    assert status == 0, err[-3000:]
    assert "[resume] recipe changed at step 2 (--allow_recipe_change true; recorded in" in stdout
    run = read_run_json(out)
    assert run["run_id"] == b_id and run["resumes"][-1]["recipe_changes"] == {
        "learning_rate": [0.001, 0.01],
        "max_steps": [2, 3],
    }
    assert [r["step"] for r in read_jsonl(out / layout.METRICS) if "loss" in r] == [1, 2, 3]
    assert {checkpoint_run_id(out / f"checkpoint-{s}") for s in (1, 2, 3)} == {b_id}


SLEEPY = '''
import os, time

def sleepy(completions, trainer_state=None, **kwargs):
    """Fine on the probe (step 0); from step 1 on, hangs like a verifier that never answers."""
    if trainer_state is not None and trainer_state.global_step >= 1:
        open(os.environ["SLEEPY_MARKER"], "w").close()
        time.sleep(3600)
    return [0.0] * len(completions)
'''


def test_a_hanging_reward_holds_the_lock_then_stops_at_its_time_limit(tiny_model_dir, tmp_path):
    """One process trains with a reward that hangs at step 1; meanwhile a second run into the folder is refused."""
    from rlvr.training import runner  # noqa: F401 - imported before the clock starts: the second run is then quick

    (tmp_path / "sleepy_rewards.py").write_text(SLEEPY)
    out, marker = tmp_path / "run", tmp_path / "sleeping"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)]),
        "SLEEPY_MARKER": str(marker),
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
    }
    first = subprocess.Popen(
        [
            sys.executable,
            "recipes/grpo.py",
            *STEPS,
            "--model_name_or_path",
            tiny_model_dir,
            "--output_dir",
            str(out),
            "--max_steps",
            "3",
            "--reward_funcs",
            "correctness",
            "sleepy_rewards.sleepy",
            "--reward_weights",
            "1",
            "1",
            "--reward_time_limit",
            "6",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the run never reached step 1's rewards"
            time.sleep(0.05)
        status, _, err = train(out, tiny_model_dir, "--max_steps", "3")
        assert status == 2 and error_lines(err) == [line for line in err.splitlines() if line.strip()], err[-3000:]
        assert error_lines(err)[0].startswith(
            f"error: output_dir: {out} is in use by another run (host {socket.gethostname()} pid {first.pid}, run "
        )
        _, stderr = first.communicate(timeout=300)
    finally:
        first.kill()
    assert first.returncode == 2, stderr[-3000:]
    assert "Traceback" not in stderr and [line for line in stderr.splitlines() if line.startswith("error:")] == [
        (
            f"error: reward_funcs: sleepy did not return within reward_time_limit 6 s at step 1; the call is described in "
            f"{out / 'reward_error.json'} (the last checkpoint is untouched)"
        )
    ], stderr[-3000:]
    assert checkpoint_problem(out / "checkpoint-1") is None and not (out / "checkpoint-2").exists()
    assert json.loads((out / "reward_error.json").read_text())["function"] == "sleepy"
    assert not (out / layout.LOCK).exists()  # the lock went with the run
