"""Crash and resume: a tiny run is SIGKILLed mid-save and mid-write, resumed each time, and its records stay whole.

The run trains 4 steps with a checkpoint every 2. Three processes, each started with `--resume_from_checkpoint true`:

  1. killed while checkpoint-4 is being written: weights, optimizer and RNG state are on disk, trainer_state.json is
     not (transformers writes it last), and metrics rows 3-4 were logged after checkpoint-2;
  2. resumes from checkpoint-2, skipping the torn checkpoint-4 (and saying so), and is killed halfway through
     writing a line of rollouts.jsonl;
  3. resumes from checkpoint-2 again and finishes.

Afterwards metrics.jsonl holds steps 1..4 once each, rollouts.jsonl holds each generation step's 16 rollouts once,
and the cumulative counters (generation_step, generated_samples) rise monotonically to their uninterrupted values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import torch
from conftest import REPO, run_args, saving_every
from safetensors.torch import save_file

DRIVER = """
import os, signal, sys
from transformers import Trainer
from rlvr.metrics import callbacks
from rlvr.training.runner import run

kind, _, step = os.environ.get("FAULT", "").partition(":")
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
if kind == "save":  # after the weights, optimizer and RNG state, before trainer_state.json
    save_rng = Trainer._save_rng_state
    def _save_rng_state(self, output_dir):
        save_rng(self, output_dir)
        if self.state.global_step == int(step):
            die()
    Trainer._save_rng_state = _save_rng_state
if kind == "rollouts":  # the rollouts of this step written, then half of one more line
    on_rewards = callbacks.RolloutLogCallback.on_rewards
    def _on_rewards(self, args, state, control, batch):
        on_rewards(self, args, state, control, batch)
        if state.global_step == int(step):
            with open(os.path.join(args.output_dir, "rollouts.jsonl"), "a") as f:
                f.write('{"step": %d, "round": 0, "gro' % state.global_step)
            die()
    callbacks.RolloutLogCallback.on_rewards = _on_rewards
sys.argv = ["recipes/grpo.py", *sys.argv[1:]]
run("grpo")
"""


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sigkill_mid_save_and_mid_write_then_resume(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    flags = ["--max_steps", "4", *saving_every(2), "--resume_from_checkpoint", "true"]
    argv = [sys.executable, "-c", DRIVER, *run_args(out, tiny_model_dir, *flags)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def launch(fault: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, cwd=REPO, env={**env, "FAULT": fault}, capture_output=True, text=True, timeout=300, check=False
        )

    first = launch("save:4")
    assert first.returncode == -9, first.stderr[-2000:]
    assert "no complete checkpoint" in first.stdout
    assert (out / "checkpoint-4" / "model.safetensors").exists() and not (
        out / "checkpoint-4" / "trainer_state.json"
    ).exists()
    assert [r["step"] for r in rows(out / "metrics.jsonl") if "loss" in r] == [1, 2, 3, 4]

    second = launch("rollouts:2")
    assert second.returncode == -9, second.stderr[-2000:]
    assert "skipping incomplete" in second.stdout and "checkpoint-4" in second.stdout
    assert "from " + str(out / "checkpoint-2") in second.stdout

    third = launch("")
    assert third.returncode == 0, third.stderr[-2000:]
    assert "from " + str(out / "checkpoint-2") in third.stdout  # the second run died before saving checkpoint-4
    assert "skipping incomplete" in third.stdout

    metrics = rows(out / "metrics.jsonl")  # every line parses: the torn rows went with the resume
    train = [r for r in metrics if "loss" in r]
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    assert [r["generation_step"] for r in train] == [1, 2, 3, 4]
    assert [r["generated_samples"] for r in train] == [16, 32, 48, 64]
    assert sum("train_runtime" in r for r in metrics) == 1
    rollouts = rows(out / "rollouts.jsonl")
    assert Counter(r["step"] for r in rollouts) == {step: 16 for step in range(1, 5)}  # numbered as metrics.jsonl
    assert not (out / "previous-runs").exists()  # nothing moved aside
    assert (out / "checkpoint-4" / "trainer_state.json").exists()


def test_a_reward_failing_mid_run_is_named_with_its_step_and_leaves_the_checkpoint(run_recipe, tmp_path, monkeypatch):
    import pytest
    from rlvr.rewards.guard import RewardFunctionError

    from rlvr.runs.checkpoints import checkpoint_problem

    (tmp_path / "late_rewards.py").write_text(
        "def late(completions, trainer_state=None, **kwargs):\n"
        "    if trainer_state.global_step >= 1:\n"
        "        raise ZeroDivisionError('late failure')\n"
        "    return [0.0] * len(completions)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    with pytest.raises(RewardFunctionError) as err:  # the probe (step 0) passes; step 2's scoring fails
        run_recipe(
            "--max_steps",
            "3",
            "--save_strategy",
            "steps",
            "--save_steps",
            "1",
            "--reward_funcs",
            "correctness",
            "late_rewards.late",
            "--reward_weights",
            "1",
            "1",
            output_dir=out,
        )
    assert str(err.value).startswith("reward_funcs: late raised ZeroDivisionError: late failure at step 1;")
    record = json.loads((out / "reward_error.json").read_text())
    assert record["function"] == "late" and record["step"] == 1 and record["completion"] is not None
    assert record["row"]["answer"] and record["row"]["prompts"]
    assert checkpoint_problem(out / "checkpoint-1") is None and not (out / "checkpoint-2").exists()


def test_wandb_that_cannot_reach_its_server_goes_offline_within_the_bound(monkeypatch, capsys):
    """A server that accepts the connection and never answers (the ~100 s hang) costs `timeout` seconds, no more.
    The limit under test is 1 s; the bound checked is 20 s: 19 s of slack for a loaded machine (the wait is a join
    with a timeout, which load barely stretches), and still 5x under the hang it replaces."""
    import socket
    import time

    from rlvr.runs.tracking import configure_wandb

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
    start = time.perf_counter()
    note = configure_wandb(["wandb"], timeout=1.0)
    assert time.perf_counter() - start < 20.0
    assert note and "not reachable" in note and os.environ["WANDB_MODE"] == "offline"
    assert capsys.readouterr().out.count("wandb:") == 1
    silent.close()


def test_resume_says_when_there_is_nothing_to_resume_and_which_folders_are_torn(tmp_path, capsys):
    from rlvr.runs.checkpoints import last_complete_checkpoint
    from rlvr.training.runner import resume_checkpoint

    assert resume_checkpoint("true", str(tmp_path / "empty")) is None
    assert "no complete checkpoint" in capsys.readouterr().out
    weights = tmp_path / "whole.safetensors"  # weights whole as far as the weights check reads (header and bytes)
    save_file({"w": torch.zeros(4)}, str(weights))
    for step, files in (
        (2, {"trainer_state.json": '{"global_step": 2}', "model.safetensors": weights}),
        (4, {"trainer_state.json": '{"global_st', "model.safetensors": weights}),
        (6, {"model.safetensors": weights}),
        (8, {"trainer_state.json": '{"global_step": 8}'}),
    ):
        (tmp_path / f"checkpoint-{step}").mkdir()
        for name, text in files.items():
            target = tmp_path / f"checkpoint-{step}" / name
            target.write_bytes(text.read_bytes()) if isinstance(text, Path) else target.write_text(text)
    checkpoint, torn = last_complete_checkpoint(tmp_path)
    assert checkpoint == str(tmp_path / "checkpoint-2")
    assert [(Path(p).name, why) for p, why in torn] == [
        ("checkpoint-8", "no model weights"),
        ("checkpoint-6", "no trainer_state.json"),
        ("checkpoint-4", "unreadable trainer_state.json"),
    ]
    assert resume_checkpoint(True, str(tmp_path)) == str(tmp_path / "checkpoint-2")
    assert capsys.readouterr().out.count("skipping incomplete") == 3


def test_a_fresh_run_moves_old_records_aside(tmp_path):
    from rlvr.metrics.callbacks import ROLLOUTS
    from rlvr.runs.folder import start_record

    old = tmp_path / "rollouts.jsonl"
    old.write_text('{"step": 0}\n')
    assert "aside" in start_record(old, 0, ROLLOUTS)
    assert not old.exists() and [p.read_text() for p in tmp_path.glob("previous-runs/*/rollouts.jsonl")] == [
        '{"step": 0}\n'
    ]
