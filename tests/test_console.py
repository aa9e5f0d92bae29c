"""A quiet, informative console: one line per logging step, known-harmless library warnings dropped by message,
every command naming where it writes, `rlvr <cmd> --help` naming its command, and a sweep's smoke mode."""

from __future__ import annotations

import json
import logging

import pytest
from conftest import FAST_RECIPE, read_jsonl, run_args, write_spec

from rlvr.metrics.callbacks import MAX_WIDTH, format_line


def test_a_line_is_short_and_says_what_matters():
    row = {
        "avg_correctness": 0.3125,
        "avg_format": 0.75,
        "avg_total": 0.6875,
        "avg_binary": 0.25,
        "zero_std_frac/total": 0.25,
        "generated_samples": 192.0,
        "loss": 0.01,
        "kl": 0.0,
    }
    line = format_line(row, 12, 200, 3.417)
    assert (
        line == "step 12/200 | samples 192 | correctness 0.312 format 0.750 total 0.688 | zero_std 0.25 | 3.42 s/step"
    )
    assert "success 1.000" in format_line({**row, "avg_success": 1.0}, 12, 200, None)
    assert "| zero_std 0.25 | cut 0.06 | 3.42 s/step" in format_line({**row, "step/truncated": 0.0625}, 12, 200, 3.417)
    rates = {"tokens_per_s/generation": 812.4, "tokens_per_s/step": 240.2}
    line = format_line({**row, **rates}, 12, 200, 3.417)
    assert "| zero_std 0.25 | tok/s generation 812 step 240 | 3.42 s/step" in line
    crowded = {**row, **{f"avg_my_reward_number_{i}": 0.5 for i in range(30)}}
    assert len(format_line(crowded, 12, 200, 1.0)) <= MAX_WIDTH
    assert format_line({"eval_avg_total": 0.5}, 4, 10, None, prefix="eval_") == "eval step 4/10 | total 0.500"


def test_a_run_prints_one_line_per_step_and_where_it_writes(tiny_model_dir, tmp_path, capsys):
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from rlvr.metrics.callbacks import QuietProgressCallback
    from rlvr.training.runner import main

    out = tmp_path / "run"
    trainer = main(run_args(out, tiny_model_dir, "--max_steps", "2"))
    printed = capsys.readouterr().out.splitlines()
    steps = [line for line in printed if line.startswith("step ")]
    assert [line.split(" | ")[0] for line in steps] == ["step 1/2", "step 2/2"]
    assert all(len(line) <= MAX_WIDTH and "samples" in line and "tok/s generation" in line for line in steps)
    assert not any(line.lstrip().startswith("{'") for line in printed)  # no dict of the logged row
    assert any(line.startswith(f"[run] writing to {out}/") for line in printed)
    assert any(line.startswith(f"[run] saved the final model to {out}/") for line in printed)
    kinds = [type(cb) for cb in trainer.callback_handler.callbacks]
    assert ProgressCallback not in kinds and PrinterCallback not in kinds
    assert QuietProgressCallback not in kinds  # pytest captures stderr: no bar that redraws itself into a log
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(next(row for row in rows if "loss" in row)) > 20  # the full row stays in metrics.jsonl

    from rlvr.analysis import plots, report

    plots.main([str(out), "--out", str(tmp_path / "plots")])  # the analysis commands say where they write, too
    report.main([str(out)])
    printed = capsys.readouterr().out
    assert f"[plots] writing to {tmp_path / 'plots'}/" in printed and f"[plots] wrote {tmp_path / 'plots'}" in printed
    assert f"[report] writing {out / 'report.md'}" in printed and f"[report] wrote {out / 'report.md'}" in printed


def trained_steps(callback, args, steps: int, every_log: dict | None = None, evaluations=()):
    """Drive `callback` through `steps` steps as the trainer does: a row (or a reward batch) per step, an evaluation
    row at the steps in `evaluations`."""
    from test_held_out import eval_batch
    from transformers import TrainerState

    state = TrainerState(max_steps=steps, logging_steps=1, eval_steps=10 if evaluations else None)
    callback.on_train_begin(args, state, None)
    for step in range(1, steps + 1):
        if every_log is None:
            callback.on_rewards(args, state, None, eval_batch([0, 1, 2], mode="train"))
        state.global_step = step
        if every_log is not None:
            callback.on_log(args, state, None, logs=every_log)
            if step in evaluations:
                callback.on_log(args, state, None, logs={"eval_avg_total": 0.25})


def test_the_step_line_shows_the_first_step_every_console_steps_and_the_last(capsys):
    from types import SimpleNamespace

    from rlvr.metrics.callbacks import ConsoleLineCallback

    args = SimpleNamespace(eval_strategy="steps")
    trained_steps(ConsoleLineCallback(console_steps=10), args, 25, {"avg_total": 0.5}, evaluations=(10, 20))
    heads = [line.split(" | ")[0] for line in capsys.readouterr().out.splitlines()]
    assert heads == ["step 1/25", "step 10/25", "eval step 10/25", "step 20/25", "eval step 20/25", "step 25/25"]
    trained_steps(ConsoleLineCallback(), args, 3, {"avg_total": 0.5})  # unset: every logged step
    assert [line.split(" | ")[0] for line in capsys.readouterr().out.splitlines()] == [
        "step 1/3",
        "step 2/3",
        "step 3/3",
    ]


@pytest.mark.parametrize(
    "eval_strategy, console_steps, shown",
    [("steps", 5, [1, 10, 20, 25]), ("no", 5, [1, 5, 10, 15, 20, 25]), ("no", None, list(range(1, 26)))],
)
def test_the_rollout_panel_follows_the_evaluations_and_every_rollout_is_recorded(
    eval_strategy, console_steps, shown, tmp_path, capsys
):
    """At eval_steps (10) when the run evaluates, else at console_steps; rollouts.jsonl has every step's either way."""
    from types import SimpleNamespace

    from rlvr.metrics.callbacks import RolloutLogCallback

    args = SimpleNamespace(eval_strategy=eval_strategy, output_dir=str(tmp_path))
    evaluations = (10, 20) if eval_strategy == "steps" else ()
    trained_steps(RolloutLogCallback(console_steps=console_steps), args, 25, evaluations=evaluations)
    panels = [line for line in capsys.readouterr().out.splitlines() if line.startswith("── rollout")]
    assert panels == [f"── rollout · step {step} ──" for step in shown]
    steps = [row["step"] for row in read_jsonl(tmp_path / "rollouts.jsonl")]
    assert steps == [step for step in range(1, 26) for _ in range(6)]


def test_the_progress_bar_is_one_line_and_only_on_a_terminal(monkeypatch):
    import sys
    from types import SimpleNamespace

    from rlvr.metrics.callbacks import QuietProgressCallback, quiet_console

    added = []
    trainer = SimpleNamespace(
        args=SimpleNamespace(disable_tqdm=False), remove_callback=lambda cb: None, add_callback=added.append
    )
    for terminal in (False, True):
        monkeypatch.setattr(sys.stderr, "isatty", lambda terminal=terminal: terminal)
        quiet_console(trainer)
    assert added == [QuietProgressCallback]  # on the terminal only
    bar = QuietProgressCallback()
    state = SimpleNamespace(is_world_process_zero=True)
    bar.on_prediction_step(None, state, None, eval_dataloader=[1, 2])
    assert bar.prediction_bar is None  # no second bar under the run's, so none to close with a cursor move


def test_data_says_where_it_writes(tmp_path, capsys):
    from rlvr.data.cli import main

    main(["--config", FAST_RECIPE, "--output_dir", str(tmp_path / "d"), "--size", "60"])
    printed = capsys.readouterr().out
    assert f"[data] writing to {tmp_path / 'd'}/" in printed and f"[data] saved to {tmp_path / 'd'}/" in printed


def test_known_harmless_warnings_are_dropped_by_message_only():
    from rlvr.metrics.callbacks import silence_known_warnings

    silence_known_warnings()
    deepspeed = logging.getLogger("DeepSpeed")

    def record(message):
        return logging.LogRecord("DeepSpeed", logging.WARNING, __file__, 1, message, None, None)

    assert not deepspeed.filter(
        record("Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it.")
    )
    assert deepspeed.filter(record("Setting accelerator to CUDA"))  # any other message still shows


@pytest.mark.parametrize("command", ["data", "evaluate", "before-after", "plots", "report", "sweep", "plan"])
def test_help_names_its_command(command, capsys):
    from rlvr.__main__ import dispatch

    with pytest.raises(SystemExit):
        dispatch([command, "--help"])
    assert capsys.readouterr().out.startswith(f"usage: rlvr {command} ")


def test_a_smoke_sweep_shrinks_the_evaluation(tiny_model_dir, tmp_path, capsys):
    from rlvr.analysis.sweep import SMOKE_EVALUATION, is_smoke, run_sweep

    assert is_smoke({"max_steps": 2}, False) and is_smoke({}, True) and not is_smoke({"max_steps": 60}, False)
    evaluation = {"num_samples": 8, "k": [1, 8]}
    spec = write_spec(tmp_path, "smoke", vary={"seed": [1]}, fixed={"print_rollouts": False}, evaluate=evaluation)
    result = run_sweep(
        spec, tmp_path / "out", {"model_name_or_path": tiny_model_dir, "max_steps": 2}, launcher="inprocess"
    )
    assert result["smoke"] and result["status"] == {"seed-1": "done"}
    after = json.loads((tmp_path / "out" / "smoke" / "seed-1" / "eval" / "after.json").read_text())
    assert (after["overall"]["prompts"], after["num_samples"]) == (SMOKE_EVALUATION["num_prompts"], 2)
    printed = capsys.readouterr().out
    assert "[sweep] smoke:" in printed and f"smoke sweep written to {tmp_path / 'out' / 'smoke'}/" in printed
