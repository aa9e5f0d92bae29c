"""Divergence guard: a NaN loss/grad norm (forced at one step) or a collapsed mean reward stops the run with one line,
the bad step is never saved, and the newest complete checkpoint is the last good one."""

from __future__ import annotations

import math

import pytest
from conftest import read_jsonl

from rlvr.runs.checkpoints import checkpoint_problem, last_complete_checkpoint

SAVE_EVERY_STEP = ("--max_steps", "4", "--max_completion_length", "16", "--save_strategy", "steps", "--save_steps", "1")


def last_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return lines[-1]


def test_a_nan_loss_stops_the_run_before_its_step_is_saved(run_recipe, monkeypatch, capsys, tmp_path):
    """Step 2's loss is multiplied by NaN: its gradients, grad norm and (after the optimizer step) the weights are
    NaN. The guard must cancel checkpoint-2, skip the final save, and leave checkpoint-1 (finite weights) newest."""
    from safetensors.torch import load_file

    from rlvr.training.algorithms import trainer_class as trainer_of

    trainer_class = trainer_of("grpo")
    compute_loss = trainer_class._compute_loss

    def poisoned(self, model, inputs):
        loss = compute_loss(self, model, inputs)
        return loss * float("nan") if self.state.global_step == 1 else loss  # global_step 1 = computing step 2

    monkeypatch.setattr(trainer_class, "_compute_loss", poisoned)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(*SAVE_EVERY_STEP, output_dir=out)
    assert exit_info.value.code == 1
    line = last_line(capsys)
    # transformers' logging_nan_inf_filter (on by default) logs a NaN step's loss as the running mean: the grad norm
    # is what reports it
    assert line.startswith(
        "error: diverged at step 2: grad_norm is nan; step 2 was not saved; newest complete "
        f"checkpoint: {out / 'checkpoint-1'}; resume with --resume_from_checkpoint true"
    ), line
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]
    assert (
        last_complete_checkpoint(out)[0] == str(out / "checkpoint-1")
        and checkpoint_problem(out / "checkpoint-1") is None
    )
    assert not (out / "model.safetensors").exists()  # no final save of the NaN weights
    weights = load_file(str(out / "checkpoint-1" / "model.safetensors"))
    assert all(bool(t.isfinite().all()) for t in weights.values())
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2] and rows[1]["grad_norm"] is None  # the bad row is recorded, as null


def test_the_guard_checks_every_saved_step_even_between_log_steps(run_recipe, monkeypatch, capsys, tmp_path):
    """logging_steps 10, save_steps 1: the NaN at step 2 is still caught before checkpoint-2 is written."""
    from rlvr.training.algorithms import trainer_class as trainer_of

    trainer_class = trainer_of("grpo")
    compute_loss = trainer_class._compute_loss
    monkeypatch.setattr(
        trainer_class,
        "_compute_loss",
        lambda self, model, inputs: (
            compute_loss(self, model, inputs) * (float("inf") if self.state.global_step == 1 else 1.0)
        ),
    )
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        run_recipe(*SAVE_EVERY_STEP, "--logging_steps", "10", output_dir=out)
    assert "diverged at step 2:" in last_line(capsys)
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]


def test_a_collapsed_mean_reward_stops_after_the_patience(run_recipe, capsys, tmp_path):
    """No mean reward reaches 2 (correctness + 0.5 format <= 1.5): with patience 2 the run stops at step 2."""
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(*SAVE_EVERY_STEP, "--min_mean_reward", "2", "--min_mean_reward_patience", "2", output_dir=out)
    assert exit_info.value.code == 1
    line = last_line(capsys)
    assert line.startswith("error: diverged at step 2: avg_total is ") and "below min_mean_reward 2 for 2" in line, line
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]


def test_the_guard_is_quiet_on_a_healthy_run_and_can_be_switched_off():
    from rlvr.training.stopping import DivergenceGuard

    guard = DivergenceGuard()
    assert guard.problem({"loss": 0.1, "grad_norm": 3.0, "avg_total": 0.0}) is None
    assert guard.problem({"loss": math.inf}) == "loss is inf"
    assert guard.problem({"grad_norm": math.nan}) == "grad_norm is nan"
    assert DivergenceGuard(non_finite=False).problem({"loss": math.nan}) is None
    reward = DivergenceGuard(min_mean_reward=0.5, component="correctness", patience=2)
    assert reward.problem({"avg_correctness": 0.1}) is None  # 1 of 2
    assert reward.problem({"avg_correctness": 0.9}) is None  # the count restarts
    assert reward.problem({"avg_correctness": 0.1}) is None
    assert "avg_correctness is 0.1" in reward.problem({"avg_correctness": 0.1})
