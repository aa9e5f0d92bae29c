"""A reward function that returns None or NaN for some completions (TRL's "not scored") does not stop training: the
readings count those completions per function (`step/unscored/<name>`), the console line and `rlvr doctor` name the
share. One that scores none of a step's completions stops the run in one line naming it, the checkpoints kept."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import read_jsonl

from rlvr.analysis import doctor
from rlvr.analysis.loaders import load_run, step_metric_series
from rlvr.inputs import cli
from rlvr.metrics.reward_batch import RewardBatch
from rlvr.metrics.step_metrics import compute_step_metrics

REWARDS = '''
import math


def step_of(kwargs):
    return kwargs["trainer_state"].global_step


def some_nan(completions, **kwargs):
    """NaN on every third completion: some completions unscored."""
    return [math.nan if i % 3 == 0 else float(i % 2) for i in range(len(completions))]


def some_none(completions, **kwargs):
    """None on every fourth completion (TRL's own "not scored")."""
    return [None if i % 4 == 0 else 0.5 for i in range(len(completions))]


def nan_from_step_2(completions, **kwargs):
    """Scores steps 1 and 2, then NaN for every completion."""
    return [math.nan if step_of(kwargs) >= 2 else 1.0 for _ in completions]
'''


@pytest.fixture
def nan_rewards(tmp_path, monkeypatch):
    (tmp_path / "nan_rewards.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))


def rewards(name: str) -> list[str]:
    return ["--reward_funcs", "correctness", "format", f"nan_rewards.{name}", "--reward_weights", "1", "0.5", "1"]


@pytest.mark.parametrize("name, share", [("some_nan", 6 / 16), ("some_none", 4 / 16)])
def test_a_reward_unscored_on_some_completions_trains_to_the_end_and_is_counted(
    name, share, run_recipe, nan_rewards, capsys
):
    trainer, out = run_recipe(*rewards(name))
    assert trainer.state.global_step == 3
    rows = [row for row in read_jsonl(f"{out}/metrics.jsonl") if "loss" in row]
    assert len(rows) == 3
    assert all(row[f"step/unscored/{name}"] == pytest.approx(share) for row in rows)
    assert all(row["step/unscored/correctness"] == 0.0 for row in rows)
    scored = 5 / 10 if name == "some_nan" else 0.5  # the mean over the scored completions only
    assert all(row[f"avg_{name}"] == pytest.approx(scored) for row in rows)
    assert f"unscored {name} {share:.2f}" in capsys.readouterr().out
    panels = step_metric_series([load_run(out)])  # the plots: a panel for the reward that left some unscored only
    assert f"step/unscored/{name}" in panels and "step/unscored/correctness" not in panels
    findings = [f for f in doctor.diagnose(out).problems if f.what.startswith("unscored completions")]
    assert len(findings) == 1 and f"{name} returned None or NaN for {share:.0%}" in findings[0].what


def test_a_reward_that_scores_none_of_a_step_stops_in_one_line_and_keeps_the_checkpoint(
    run_recipe, nan_rewards, capsys, tmp_path
):
    with pytest.raises(SystemExit) as stop:
        cli(run_recipe, *rewards("nan_from_step_2"), "--save_strategy", "steps", "--save_steps", "1")
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert stop.value.code == 2 and len(err) == 1, err
    assert err[0].startswith(
        "error: reward_funcs: nan_from_step_2 returned None or NaN for all 16 completions of step 3"
    )
    assert err[0].endswith(f"newest complete checkpoint: {tmp_path / 'run' / 'checkpoint-2'}")
    state = json.loads((tmp_path / "run" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2 and not (tmp_path / "run" / "checkpoint-3").exists()


def test_unscored_is_counted_per_function_and_flat_groups_on_the_scored_rows():
    nan = float("nan")
    batch = RewardBatch(
        rewards_per_func=torch.tensor([[1.0, nan], [0.0, nan], [1.0, 1.0], [1.0, nan]]),
        names=["a", "b"],
        weights=torch.tensor([1.0, 1.0]),
        num_generations=2,
        completions=["x"] * 4,
        rows=[{}] * 4,
        completion_lengths=[1] * 4,
    )
    metrics = compute_step_metrics(batch)
    assert metrics["step/unscored/a"] == 0.0 and metrics["step/unscored/b"] == 0.75
    assert batch.never_scored() is None
    batch.rewards_per_func[:, 1] = nan
    assert batch.never_scored() == "b"
