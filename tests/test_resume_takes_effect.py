"""A resume does what it records: a changed save or logging interval takes effect (transformers would keep the
checkpoint's), read back from the resumed run's checkpoints and records; and the same command on a finished run says
so and exits 0, writing nothing (a Slurm requeue or a script run twice is not an error)."""

from __future__ import annotations

import json
import shutil

from conftest import read_jsonl

from rlvr.inputs import cli
from rlvr.runs import layout


def files_of(folder) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_resume_saves_and_logs_as_it_records(run_recipe, tmp_path, capsys):
    out = tmp_path / "run"
    run_recipe("--max_steps", "6", "--save_strategy", "steps", "--save_steps", "2", output_dir=out)
    for step in (4, 6):  # as if the run had been stopped after saving step 2
        shutil.rmtree(out / f"checkpoint-{step}")
    run_recipe(
        "--max_steps",
        "6",
        "--save_strategy",
        "steps",
        "--save_steps",
        "3",
        "--logging_steps",
        "2",
        "--resume_from_checkpoint",
        "true",
        output_dir=out,
    )
    stdout = capsys.readouterr().out
    assert "[resume] changed" in stdout and "logging_steps 1 -> 2" in stdout and "save_steps 2 -> 3" in stdout
    # saved every third step from the resume on (the checkpoint's interval, 2, would have saved 4), and at the end
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3", "checkpoint-6"]
    for step in (3, 6):
        state = json.loads((out / f"checkpoint-{step}" / layout.TRAINER_STATE).read_text())
        assert (state["global_step"], state["save_steps"], state["logging_steps"]) == (step, 3, 2)
    # logged every step before the resume; after it every second step and every saved one (step 5 is neither)
    assert [row["step"] for row in read_jsonl(out / layout.METRICS) if "loss" in row] == [1, 2, 3, 4, 6]
    (resumed,) = json.loads((out / layout.RUN).read_text())["resumes"]
    assert resumed["step"] == 2


def test_the_same_command_on_a_finished_run_exits_0_and_writes_nothing(run_recipe, tmp_path, capsys):
    out = tmp_path / "run"
    command = ["--max_steps", "2", "--save_strategy", "steps", "--save_steps", "2"]
    run_recipe(*command, output_dir=out)
    before = files_of(out)
    capsys.readouterr()
    assert cli(run_recipe, *command, "--resume_from_checkpoint", "true", output_dir=out)[0] is None
    captured = capsys.readouterr()
    assert f"[resume] {out} is finished: {out / 'checkpoint-2'} is at max_steps 2; nothing to do" in captured.out
    assert not [line for line in captured.err.splitlines() if line.startswith("error")]
    assert files_of(out) == before
