"""benchmarks/gpu_check.py on the CPU: its flags, its verdict, its table, and the model folders and recipes it builds
for the GPU run (the measurements themselves are pending a GPU)."""

import importlib.util
import os
import subprocess
import sys
import time

import pytest
import torch
import yaml
from conftest import REPO

from rlvr.inputs import ConfigError
from rlvr.planning import GIB, KNOWN_SHAPES, ModelShape, estimate_prompt_tokens

spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
sys.modules["gpu_check"] = gpu_check  # dataclasses look their module up while the class is built
spec.loader.exec_module(gpu_check)
Row = gpu_check.Row


def test_help_works_without_a_gpu():
    result = subprocess.run([sys.executable, "benchmarks/gpu_check.py", "--help"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0 and "--budget_gib" in result.stdout and "--dry_run" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_in_one_line():
    result = subprocess.run([sys.executable, "benchmarks/gpu_check.py"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error")] == [
        "error: cuda: no CUDA device here; gpu_check measures on a GPU (use --dry_run for the planned figures alone)"]


@pytest.mark.parametrize("flags, field", [(["--steps", "0"], "--steps"), (["--tolerance", "1.5"], "--tolerance"),
                                          (["--budget_gib", "-1"], "--budget_gib"), (["--eval_prompts", "0"], "--eval_prompts"),
                                          (["--sections", "nope"], "--sections")])
def test_bad_flags_are_one_named_line(flags, field):
    with pytest.raises(ConfigError, match=field):
        gpu_check.parse(flags)


def test_verdict_needs_every_figure_within_tolerance_and_every_config_to_fit():
    good = [Row("memory", "m", "train", planned=10 * GIB, measured=11 * GIB),
            Row("fit", "c", "5 steps", planned=6 * GIB, measured=5.5 * GIB, fits=True),
            Row("eval", "e", "eval", value=100.0)]
    assert gpu_check.failures(good, 0.15) == []
    off = Row("memory", "m", "generate", planned=10 * GIB, measured=12 * GIB)
    assert gpu_check.failures(good + [off], 0.15) == ["memory m generate: measured/planned 1.20, outside 1 +- 0.15"]
    missed = Row("fit", "q", "5 steps", planned=6 * GIB, measured=6.2 * GIB, fits=False, note="needs 7.2 GiB: 0.30 over")
    assert gpu_check.failures([missed], 0.15) == ["fit q 5 steps: does not fit (needs 7.2 GiB: 0.30 over)"]
    unmeasured = Row("memory", "m", "train", planned=GIB, note="OOM")
    assert gpu_check.failures([unmeasured], 0.15) == ["memory m train: not measured (OOM)"]


def test_table_has_one_line_per_row_with_the_ratio():
    table = gpu_check.format_table([Row("memory", "Qwen3-0.6B full", "train", planned=4 * GIB, measured=4.4 * GIB)])
    header, rule, line = table.splitlines()
    assert "planned GiB" in header and "4.00" in line and "4.40" in line and "1.10" in line


def test_dry_run_plans_every_row_on_any_machine(capsys):
    assert gpu_check.main(["--dry_run", "--sections", "fit"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("grpo_qwen3_0.6b_full", "grpo_qwen3_1.7b_lora", "grpo_qwen3_4b_qlora"))
    fit_lines = [line for line in out.splitlines() if line.startswith("fit ")]
    assert len(fit_lines) == 3 and all(line.endswith("pending a GPU run") for line in fit_lines)


def test_dry_run_lists_the_training_throughput_rows_and_the_load(capsys):
    import importlib.util

    assert gpu_check.main(["--dry_run", "--sections", "speed"]) == 0
    out = capsys.readouterr().out
    speed_lines = [line for line in out.splitlines() if line.startswith("speed ")]
    assert len(speed_lines) == 2 and all("grpo" in line for line in speed_lines)
    assert "transformers generate" in speed_lines[0] and speed_lines[0].endswith("pending a GPU run")
    vllm = "pending a GPU run" if importlib.util.find_spec("vllm") else "vLLM not installed: skipped"
    assert "vLLM colocate" in speed_lines[1] and speed_lines[1].endswith(vllm)
    assert "[gpu_check] load before:" in out and "[gpu_check] load after:" in out


def test_samples_per_second_leaves_the_first_step_out(tmp_path):
    import json

    rows = [{"loss": 0.1, "time/total_s": 9.0, "generated_samples": 32},  # warm-up: compile, allocator
            {"loss": 0.1, "time/total_s": 2.0, "generated_samples": 64},
            {"loss": 0.1, "time/total_s": 2.0, "generated_samples": 96}, {"train_runtime": 13.0}]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert gpu_check.samples_per_second(path) == 16.0
    assert gpu_check.throughput_note(16.0) == "62 s per 1,000 samples"
    path.write_text(json.dumps(rows[0]) + "\n")
    assert gpu_check.samples_per_second(path) is None


def test_memory_workloads_are_the_shipped_batch_shape():
    w = gpu_check.memory_workload("Qwen/Qwen3-1.7B", "lora")
    assert (w.micro_batch, w.prompt_tokens + w.completion_tokens, w.generation_sequences, w.lora_r) == (2, 712, 32, 16)
    phases = gpu_check.planned_phases(w)
    assert phases["weights + optimizer"] < phases["generate"] and phases["weights + optimizer"] < phases["train"]


def test_random_model_folder_samples_and_scores_with_a_vocabulary_beyond_the_tokenizer(tmp_path):
    """The GPU run pairs a Qwen3-sized vocabulary with the byte tokenizer: ids the tokenizer lacks decode to nothing,
    so evaluation (and GRPO's scoring) run unchanged. Checked here on a small shape with 1000 ids for 263 tokens."""
    from rlvr.analysis.evaluate import evaluate

    shape = ModelShape("small", 32, 1, 2, 1, 16, 64, 1000, True)
    model_dir = gpu_check.write_random_model(shape, tmp_path / "model")
    recipe = yaml.safe_load((REPO / "tests/recipes/tiny_grpo_fast.yaml").read_text())
    recipe.update(model_name_or_path=str(model_dir), build_tiny_model=False, dtype="bfloat16")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    summary = evaluate(str(tmp_path / "r.yaml"), num_prompts=2, num_samples=2, ks=(1, 2), max_new_tokens=8,
                       output=str(tmp_path / "e.json"), show_progress=False)
    assert summary["overall"]["samples"] == 4 and summary["dtype"] == "bfloat16"


def test_byte_token_recipe_matches_the_planners_prompt_length(tmp_path):
    """The fit runs' prompts are as long in byte tokens as the planner estimates Qwen's tokenizer makes them."""
    import torch
    from rlvr.recipes.tiny.model import build_tokenizer
    from safetensors.torch import save_file
    from transformers import Qwen3Config

    from rlvr.training.config import load_recipe, validate

    build_tokenizer().save_pretrained(tmp_path / "model")
    Qwen3Config().save_pretrained(tmp_path / "model")  # a saved model's config (the fit run writes the weights too)
    save_file({"stand_in": torch.zeros(1)}, tmp_path / "model" / "model.safetensors")  # a model folder has weights
    config = "recipes/grpo_qwen3_0.6b_full.yaml"
    path = gpu_check.byte_token_recipe(config, tmp_path / "model", tmp_path)
    raw = yaml.safe_load(path.read_text())
    assert raw["model_name_or_path"] == str(tmp_path / "model") and raw["report_to"] == "none"
    real = validate(load_recipe(["--config", str(REPO / config), "--dry_run", "true", "--use_cpu", "true"]))
    target = estimate_prompt_tokens(real.dataset["train"]["prompt"])
    matched = validate(load_recipe(["--config", str(path), "--dry_run", "true", "--use_cpu", "true"]))
    measured = estimate_prompt_tokens(matched.dataset["train"]["prompt"], str(tmp_path / "model"))
    assert abs(measured - target) <= 0.1 * target, (measured, target)
    assert KNOWN_SHAPES[real.model.model_name_or_path]  # the fit run builds the real shape


def test_fit_configs_selects_which_configs_run(capsys):
    assert gpu_check.main(["--dry_run", "--sections", "fit", "--fit_configs", "grpo_qwen3_4b_qlora"]) == 0
    fit_lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("fit ")]
    assert len(fit_lines) == 1 and "grpo_qwen3_4b_qlora" in fit_lines[0]
    with pytest.raises(ConfigError, match="--fit_configs"):
        gpu_check.parse(["--fit_configs", "grpo_qwen3_70b"])


def test_past_the_deadline_rows_say_so_and_keep_their_plan(monkeypatch):
    """The GPU run that exposed this: the QLoRA child used up --max_minutes and the eval row read 'timed out after
    -0 s'. Past the deadline nothing starts; every row keeps its planned figure and says why it is unmeasured."""
    monkeypatch.setattr(gpu_check, "child", lambda *a: pytest.fail("no child may start past the deadline"))
    rows = gpu_check.fit_rows(True, 6.9, 3, time.time() - 1, gpu_check.FIT_CONFIGS[:1])
    rows += gpu_check.eval_rows(True, 4, time.time() - 1)
    assert rows[0].planned and rows[0].measured is None and rows[0].note == gpu_check.OUT_OF_TIME
    assert rows[1].note == gpu_check.OUT_OF_TIME
    assert gpu_check.failures(rows[:1], 0.15)[0].endswith(f"not measured ({gpu_check.OUT_OF_TIME})")


def test_children_keep_the_callers_python_path(monkeypatch):
    """Packages installed with `pip --target` and PYTHONPATH (as on a GPU box without the project's environment)
    must reach the measuring child; it failed with `No module named 'trl'` when the child's path was the repo alone."""
    seen = {}

    def fake_run(command, **kwargs):
        seen.update(kwargs["env"])
        return subprocess.CompletedProcess(command, 0, stdout=gpu_check.RESULT_TAG + '{"ok": true}\n', stderr="")

    monkeypatch.setenv("PYTHONPATH", "/tmp/site")
    monkeypatch.setattr(gpu_check.subprocess, "run", fake_run)
    assert gpu_check.child(["eval"], 10) == {"ok": True}
    assert seen["PYTHONPATH"].split(os.pathsep) == [str(REPO), "/tmp/site"]
