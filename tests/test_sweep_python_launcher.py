"""The sweep's default launcher (`launcher="python"`, what `rlvr sweep` uses unless told otherwise): each variant runs
as a subprocess of its algorithm's script, appending the command and the run's whole output to its `train.log`. One
variant of 1 step on the tiny random model; most of the test's time is the subprocess importing torch and TRL."""

import sys

from conftest import read_jsonl, write_spec

from rlvr.analysis.sweep import run_sweep


def test_python_launcher_runs_each_variant_as_a_script_and_logs_it(tmp_path, tiny_model_dir, capsys):
    fixed = {"max_steps": 1, "print_rollouts": False, "model_name_or_path": tiny_model_dir}
    spec = write_spec(tmp_path, "launch", vary={"seed": [3]}, labels=["ok"], fixed=fixed)
    result = run_sweep(spec, tmp_path / "out")  # the default launcher
    assert result["status"] == {"ok": "done"}

    run = tmp_path / "out" / "launch" / "ok"
    log = (run / "train.log").read_text()
    first = log.splitlines()[0]
    assert first.startswith("=== ") and f"{sys.executable} " in first
    assert first.endswith(f"recipes/grpo.py --config {run / 'recipe.yaml'} --resume_from_checkpoint true")
    assert f"[run] saved the final model to {run}/" in log  # the script's own output, captured
    assert [row["step"] for row in read_jsonl(run / "metrics.jsonl") if "loss" in row] == [1]
    assert (run / "model.safetensors").exists()
    assert f"[sweep] 1/1 ok: training (log {run / 'train.log'})" in capsys.readouterr().out
