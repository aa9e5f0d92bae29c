"""The speedrun judge (`rlvr speedrun`): it stops a run at the first full held-out evaluation at or above the target,
counts every generated training completion (DAPO's resampled rounds included, evaluations not), leaves the run it
judges unchanged, scores a policy as `rlvr evaluate` does, and refuses bad input before any model loads."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO
from test_tiny_main_job import records

from rlvr.analysis import speedrun
from rlvr.analysis.evaluate import evaluate
from rlvr.inputs import ConfigError
from rlvr.metrics.keys import EXACT_MATCH, GENERATED_SAMPLES
from rlvr.runs import layout
from rlvr.training import runner

MAIN_JOB = str(REPO / speedrun.MAIN_JOB_CONFIG)
DAPO = str(REPO / "recipes" / "tiny" / "dapo.yaml")
SAMPLES_PER_STEP = 16
QUICK = [  # the main job's model and data, 4 prompts x 4 completions a step, one thread, no in-training evaluation
    "--cpu_threads",
    "1",
    "--num_generations",
    "4",
    "--generation_batch_size",
    str(SAMPLES_PER_STEP),
    "--per_device_train_batch_size",
    str(SAMPLES_PER_STEP),
    "--eval_strategy",
    "no",
    "--print_rollouts",
    "false",
]


@pytest.fixture(autouse=True)
def main_job_folder(monkeypatch):
    """The judge's evaluation names the main job's recipe by its path from the repository root."""
    monkeypatch.chdir(REPO)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # a run applies its cpu_threads to this process


def scripted(values):
    """A score function returning `values` in turn, and the policy folders it was queried about."""
    values, queried = iter(values), []

    def score(folder: Path) -> float:
        queried.append(folder.name)
        return next(values)

    return score, queried


def judge(out: Path, steps: int, eval_every: int, target: float, score, to_end=False, config=MAIN_JOB, extra=()):
    return speedrun.judge_run(
        config, out, 42, eval_every, target, to_end, [*QUICK, "--max_steps", str(steps), *extra], score
    )


def rollout_rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "rollouts.jsonl").read_text().splitlines() if line]


def test_the_run_stops_at_the_first_evaluation_at_or_above_the_target(tmp_path):
    score, queried = scripted([0.59, 0.60, 0.95])
    result = judge(tmp_path / "run", steps=8, eval_every=2, target=0.6, score=score)
    assert queried == ["step-2", "step-4"]  # 0.59 goes on, 0.60 stops: no third evaluation, no step 5
    assert result["reached"] == result["final"] and result["reached"]["step"] == 4
    assert result["reached"]["samples"] == 4 * SAMPLES_PER_STEP and result["finished"]
    assert [e[EXACT_MATCH] for e in result["evaluations"]] == [0.59, 0.60]
    assert max(row.get("step", 0) for row in records(tmp_path / "run")) == 4
    assert json.loads((tmp_path / "run" / layout.SPEEDRUN).read_text()) == result
    assert (tmp_path / "run" / layout.SPEEDRUN_DIR / "step-4" / "model.safetensors").exists()


def test_a_run_that_never_reaches_the_target_says_so_and_to_end_evaluates_only_the_last_step_after_it(tmp_path):
    score, queried = scripted([0.3, 0.5])
    never = judge(tmp_path / "never", steps=4, eval_every=2, target=0.6, score=score)
    assert queried == ["step-2", "step-4"] and never["reached"] is None and never["final"]["step"] == 4
    totals = speedrun.summary([{**never, "setting": "default", "load_start": 0.1}])
    assert totals == {"runs": 1, "reached": 0, "median_samples": None}
    assert "| default | 42 | not reached |" in speedrun.summary_table([{**never, "setting": "default"}], totals)

    score, queried = scripted([0.7, 0.65])
    through = judge(tmp_path / "through", steps=6, eval_every=2, target=0.6, score=score, to_end=True)
    assert queried == ["step-2", "step-6"]  # reached at step 2; steps 4 is not evaluated, the last one is
    assert through["reached"]["step"] == 2 and through["final"]["step"] == 6
    assert through["final"]["samples"] == 6 * SAMPLES_PER_STEP


def test_dapo_resampling_counts_and_evaluation_samples_do_not(tmp_path):
    """Every generated training completion is a sample, resampled rounds included (each is a row of rollouts.jsonl,
    with its round); the in-training evaluation's and the judge's own completions are not."""
    score, _ = scripted([0.0, 0.0])
    in_training_eval = ["--eval_strategy", "steps", "--eval_steps", "1", "--eval_prompts", "4"]
    result = judge(tmp_path / "dapo", 4, 2, 0.6, score, config=DAPO, extra=in_training_eval)
    rows = rollout_rows(tmp_path / "dapo")
    assert any(row["round"] > 0 for row in rows)  # DAPO did resample
    assert result["final"]["samples"] == len(rows) > 4 * SAMPLES_PER_STEP
    logged = [row[GENERATED_SAMPLES] for row in records(tmp_path / "dapo") if GENERATED_SAMPLES in row]
    assert logged[-1] == len(rows)
    assert len(records(tmp_path / "dapo")) > 4 + 1  # the in-training evaluations ran (their rows), uncounted


def test_the_judge_leaves_the_run_unchanged_and_scores_a_policy_as_rlvr_evaluate_does(tmp_path):
    """The evaluation seeds and samples from torch's generator; without forking it, step 3 would draw other
    completions than the plain run's. And the step-4 policy's figure is `rlvr evaluate`'s for the saved model."""
    score = speedrun.main_job_scorer(num_prompts=4)
    result = judge(tmp_path / "judged", 4, 2, 1.0, score, to_end=True)
    runner.main(
        ["--config", MAIN_JOB, "--output_dir", str(tmp_path / "plain"), "--seed", "42", *QUICK, "--max_steps", "4"]
    )
    assert records(tmp_path / "judged") == records(tmp_path / "plain")
    assert [e["step"] for e in result["evaluations"]] == [2, 4]
    plain = evaluate(
        speedrun.MAIN_JOB_CONFIG,
        model_path=str(tmp_path / "plain"),
        num_samples=speedrun.EVAL_SAMPLES,
        ks=(1, speedrun.EVAL_SAMPLES),
        num_prompts=4,
        output=str(tmp_path / "plain-eval.json"),
        show_progress=False,
    )
    judged = json.loads((tmp_path / "judged" / layout.SPEEDRUN_DIR / "step-4" / layout.SPEEDRUN_EVAL).read_text())
    assert judged["overall"] == plain["overall"] and result["final"][EXACT_MATCH] == plain["overall"][EXACT_MATCH]


def test_the_median_counts_a_run_that_never_reached_the_target_as_the_slowest():
    def run(samples):
        return {"reached": None if samples is None else {"samples": samples}}

    assert speedrun.summary([run(s) for s in (3200, 1600, 2400)])["median_samples"] == 2400
    assert speedrun.summary([run(s) for s in (3200, None, 1600, 2400)]) == {
        "runs": 4,
        "reached": 3,
        "median_samples": 2800,
    }
    assert speedrun.summary([run(s) for s in (None, None, 1600)])["median_samples"] is None


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--eval_every", "0"], "--eval_every"),
        (["--target", "1.5"], "--target"),
        (["--settings", "sse"], "--settings"),
        (["--seed", "3"], "--seed"),
        (["--data_seed_is_not_a_field", "1"], "data_seed_is_not_a_field"),
        (["--model_name_or_path", "models/none"], "model_name_or_path"),
    ],
)
def test_bad_input_is_one_line_before_any_model_loads(tmp_path, flags, field):
    with pytest.raises(ConfigError) as err:
        speedrun.main(["--config", MAIN_JOB, "--output_dir", str(tmp_path / "out"), *flags])
    assert err.value.field == field
    assert not (tmp_path / "out").exists()


def test_a_recipe_on_other_data_is_refused_in_one_line_with_exit_2(tmp_path):
    other = tmp_path / "other_data.yaml"
    other.write_text(f"base: {MAIN_JOB}\ndata:\n  seed: 7\n")
    done = subprocess.run(
        [sys.executable, "-m", "rlvr", "speedrun", "--config", str(other), "--output_dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.startswith("error: data: ") and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_the_main_jobs_judged_line_states_the_baseline_the_record_log_states():
    """The main job's speedrun line is the proxy; the line after it names the judge's figure for the same recipe,
    which must be the baseline row of results/speedrun/README.md."""
    from test_tiny_main_job import tiny_main_job

    judged = tiny_main_job.JUDGED_SAMPLES
    line = tiny_main_job.judged_line()
    assert f"median {judged['median']:,.0f} samples" in line and "200 words x 8 samples" in line
    log = (REPO / "results" / "speedrun" / "README.md").read_text()
    baseline = next(row for row in log.splitlines() if row.startswith("| 0 |"))
    assert f"**{judged['median']:,.0f}**" in baseline
    assert f"{judged['low']:,}" in baseline and f"{judged['high']:,}" in baseline
