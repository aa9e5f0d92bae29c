"""benchmarks/gpu_check.py on the CPU: its flags, its verdict, its table, and the model folders and recipes it builds
for the GPU run (the measurements themselves are pending a GPU)."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
    result = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py", "--help"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert result.returncode == 0 and "--budget_gib" in result.stdout and "--dry_run" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_it_says_so_in_one_line():
    result = subprocess.run(
        [sys.executable, "benchmarks/gpu_check.py"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error")] == [
        "error: cuda: no CUDA device here; gpu_check measures on a GPU (use --dry_run for the planned figures alone)"
    ]


@pytest.mark.parametrize(
    "flags, field",
    [
        (["--steps", "0"], "--steps"),
        (["--tolerance", "1.5"], "--tolerance"),
        (["--budget_gib", "-1"], "--budget_gib"),
        (["--eval_prompts", "0"], "--eval_prompts"),
        (["--sections", "nope"], "--sections"),
    ],
)
def test_bad_flags_are_one_named_line(flags, field):
    with pytest.raises(ConfigError, match=field):
        gpu_check.parse(flags)


def test_verdict_needs_every_figure_within_tolerance_and_every_config_to_fit():
    good = [
        Row("memory", "m", "train", planned=10 * GIB, measured=11 * GIB),
        Row("fit", "c", "5 steps", planned=6 * GIB, measured=5.5 * GIB, fits=True),
        Row("eval", "e", "eval", value=100.0),
    ]
    assert gpu_check.failures(good, 0.15) == []
    off = Row("memory", "m", "generate", planned=10 * GIB, measured=12 * GIB)
    assert gpu_check.failures(good + [off], 0.15) == ["memory m generate: measured/planned 1.20, outside 1 +- 0.15"]
    missed = Row(
        "fit", "q", "5 steps", planned=6 * GIB, measured=6.2 * GIB, fits=False, note="needs 7.2 GiB: 0.30 over"
    )
    assert gpu_check.failures([missed], 0.15) == ["fit q 5 steps: does not fit (needs 7.2 GiB: 0.30 over)"]
    unmeasured = Row("memory", "m", "train", planned=GIB, note="OOM")
    assert gpu_check.failures([unmeasured], 0.15) == ["memory m train: not measured (OOM)"]


def test_table_has_one_line_per_row_with_the_ratio():
    table = gpu_check.format_table([Row("memory", "Qwen3-0.6B full", "train", planned=4 * GIB, measured=4.4 * GIB)])
    header, _rule, line = table.splitlines()
    assert "planned GiB" in header and "4.00" in line and "4.40" in line and "1.10" in line


def test_dry_run_plans_every_row_on_any_machine(capsys):
    assert gpu_check.main(["--dry_run", "--sections", "fit"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("grpo_qwen3_0.6b_full", "grpo_qwen3_1.7b_lora", "grpo_qwen3_4b_qlora"))
    fit_lines = [line for line in out.splitlines() if line.startswith("fit ")]
    assert len(fit_lines) == 4 and all(line.endswith("pending a GPU run") for line in fit_lines)
    assert "(expandable segments off)" in fit_lines[-1]  # the first config again, without the allocator fix


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


def metrics_rows(step_seconds, generate_every=4, samples=32, tokens=4000):
    """metrics.jsonl as the trainer writes it: the counters only in the rows of steps that generated a batch."""
    rows = []
    for i, seconds in enumerate(step_seconds):
        row = {
            "loss": 0.1,
            "time/total_s": seconds,
            "time/generation_s": seconds * 0.75 if i % generate_every == 0 else 0.0,
            "time/scoring_s": 0.0,
            "time/logprobs_s": 0.0,
            "time/optimization_s": seconds * 0.25,
        }
        if i % generate_every == 0:
            n = i // generate_every + 1
            row.update(
                generation_step=float(n), generated_samples=float(n * samples), generated_tokens=float(n * tokens)
            )
        rows.append(row)
    return rows + [{"train_runtime": 99.0}]


def test_window_figures_leave_the_first_generation_cycle_out():
    """Two cycles of 4 steps (the shipped configs generate every 4 optimizer steps): the first, with its warm-up,
    is left out; the second's 32 samples and 4000 tokens count over its 4 steps' time, the counters carried over the
    steps that did not generate."""
    rows = metrics_rows([9.0, 1.0, 1.0, 1.0, 4.0, 1.0, 1.0, 2.0])
    window = gpu_check.window_figures(rows)
    assert (window["steps"], window["generations"], window["samples"], window["tokens"]) == (4, 1, 32, 4000)
    assert window["seconds"]["total"] == 8.0 and window["seconds"]["generation"] == 3.0
    assert window["samples_per_s"] == 4.0 and window["tokens_per_s"] == 500.0
    assert window["generation_tokens_per_s"] == pytest.approx(4000 / 3)
    note = gpu_check.throughput_note(window)
    assert note.startswith("4.00 samples/s, 500 tokens/s (1333 while generating) over 4 steps")
    assert "generation 38%" in note and "optimization 25%" in note
    assert gpu_check.window_figures(rows[:4]) is None  # one generation: nothing after the warm-up
    assert gpu_check.throughput_note(None).startswith("no throughput figure")


def test_compare_speedups_says_whether_the_losses_match_and_the_time_ratio():
    without = {"losses": [0.5, 0.25, 0.1], "step_seconds": [9.0, 2.0, 2.0]}
    assert gpu_check.compare_speedups(without, {"losses": [0.5, 0.25, 0.1], "step_seconds": [9.0, 1.0, 1.0]}) == (
        "identical losses; steps after the first 4.0 s without, 2.0 s with (0.50x)"
    )
    assert gpu_check.compare_speedups(without, {"losses": [0.5, 0.2, 0.1], "step_seconds": [9.0, 2.0, 2.0]}).startswith(
        "largest |loss difference| 5.00e-02 over 3 steps"
    )
    assert gpu_check.compare_speedups(without, {"losses": [0.5], "step_seconds": [9.0]}) == (
        "losses not comparable (3 vs 1 steps)"
    )


def test_the_main_jobs_gpu_recipe_is_the_tiny_recipe_with_use_cpu_off(tmp_path):
    from rlvr.inputs import load_recipe_yaml

    path = gpu_check.main_job_recipe(tmp_path)
    assert load_recipe_yaml(path) == {**load_recipe_yaml(REPO / gpu_check.MAIN_JOB_CONFIG), "use_cpu": False}
    report = {
        "wall_s": {"total": 150.0, "grpo": 100.0},
        "before": {"exact_match": 0.17625},
        "after": {"exact_match": 0.6},
    }
    assert gpu_check.main_job_note(report) == (
        "exact match 0.176 -> 0.600; GRPO 100 s of 150 s; expected before: 17.6% (README); this run 17.6%: inside; "
        "expected after: 55%-75% (README); this run 60.0%: inside"
    )


def test_rows_are_saved_as_they_come(tmp_path):
    rows = [Row("fit", "c", "8 steps", planned=GIB, measured=GIB, fits=True, figures={"window": None})]
    gpu_check.save_rows(rows, tmp_path / "out", {"device": "X"})
    saved = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert saved["device"] == "X" and saved["rows"][0]["figures"] == {"window": None}


def test_memory_workloads_are_the_shipped_batch_shape():
    w = gpu_check.memory_workload("Qwen/Qwen3-1.7B", "lora")
    assert (w.micro_batch, w.prompt_tokens + w.completion_tokens, w.generation_sequences, w.lora_r) == (2, 712, 32, 16)
    phases = gpu_check.planned_phases(w)
    assert phases["weights + optimizer"] < phases["generate"] and phases["weights + optimizer"] < phases["train"]
    plan = gpu_check.plan_memory(w)  # what the allocator reports while sampling: no slack (reserved, not allocated)
    kv_and_buffers = sum(p.bytes for p in plan.parts if p.name in ("KV cache", "sampling buffers"))
    assert phases["generate"] - phases["weights + optimizer"] == pytest.approx(kv_and_buffers)


def test_random_model_folder_samples_and_scores_with_a_vocabulary_beyond_the_tokenizer(tmp_path):
    """The GPU run pairs a Qwen3-sized vocabulary with the byte tokenizer: ids the tokenizer lacks decode to nothing,
    so evaluation (and GRPO's scoring) run unchanged. Checked here on a small shape with 1000 ids for 263 tokens."""
    from rlvr.analysis.evaluate import evaluate

    shape = ModelShape("small", 32, 1, 2, 1, 16, 64, 1000, True)
    model_dir = gpu_check.write_random_model(shape, tmp_path / "model")
    recipe = yaml.safe_load((REPO / "tests/recipes/tiny_grpo_fast.yaml").read_text())
    recipe.update(model_name_or_path=str(model_dir), build_tiny_model=False, dtype="bfloat16")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    summary = evaluate(
        str(tmp_path / "r.yaml"),
        num_prompts=2,
        num_samples=2,
        ks=(1, 2),
        max_new_tokens=8,
        output=str(tmp_path / "e.json"),
        show_progress=False,
    )
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
    assert len(fit_lines) == 2 and all("grpo_qwen3_4b_qlora" in line for line in fit_lines)
    with pytest.raises(ConfigError, match="--fit_configs"):
        gpu_check.parse(["--fit_configs", "grpo_qwen3_70b"])


def test_past_the_deadline_rows_say_so_and_keep_their_plan(monkeypatch):
    """The GPU run that exposed this: the QLoRA child used up --max_minutes and the eval row read 'timed out after
    -0 s'. Past the deadline nothing starts; every row keeps its planned figure and says why it is unmeasured."""
    monkeypatch.setattr(gpu_check, "child", lambda *a: pytest.fail("no child may start past the deadline"))
    rows = list(gpu_check.fit_rows(True, 6.9, 3, time.time() - 1, gpu_check.FIT_CONFIGS[:1]))
    rows += gpu_check.eval_rows(True, 4, time.time() - 1)
    rows += gpu_check.main_job_rows(True, time.time() - 1, Path("unused"))
    assert rows[0].planned and rows[0].measured is None and rows[0].note == gpu_check.OUT_OF_TIME
    assert rows[1].note == gpu_check.OUT_OF_TIME
    assert gpu_check.failures(rows[:1], 0.15)[0].endswith(f"not measured ({gpu_check.OUT_OF_TIME})")


def test_children_keep_the_callers_python_path(monkeypatch, tmp_path):
    """Packages installed with `pip --target` and PYTHONPATH (as on a GPU box without the project's environment)
    must reach the measuring child; it failed with `No module named 'trl'` when the child's path was the repo alone.
    The child's work folder is the caller's to remove, and its last tagged line in its log is the result."""
    seen = {}

    def fake_run(command, timeout, log, env):
        seen.update(env=env, work=Path(json.loads(command[-1])[1]))
        assert seen["work"].is_dir()
        log.write_text("loading\n" + gpu_check.RESULT_TAG + '{"ok": true}\n')
        return 0

    monkeypatch.setenv("PYTHONPATH", "/tmp/site")
    monkeypatch.setattr(gpu_check, "run_in_group", fake_run)
    assert gpu_check.child(["eval"], 10, tmp_path / "eval.log") == {"ok": True}
    assert seen["env"]["PYTHONPATH"].split(os.pathsep) == [str(REPO), "/tmp/site"]
    assert not seen["work"].exists()
    monkeypatch.setattr(gpu_check, "run_in_group", lambda *a: (a[2].write_text("Traceback\nKeyError: 'x'\n"), 1)[1])
    assert gpu_check.child(["eval"], 10, tmp_path / "eval.log") == {"ok": False, "error": "exit 1: KeyError: 'x'"}


def test_a_measurement_past_its_time_is_killed_with_its_children(tmp_path):
    """The main job's GRPO run is a grandchild: on timeout the whole process group goes, not the launcher alone."""
    marker = tmp_path / "grandchild.pid"
    start = time.time()
    code = gpu_check.run_in_group(["bash", "-c", f"sleep 60 & echo $! > {marker}; wait"], 2, tmp_path / "log")
    assert code is None and time.time() - start < 20
    status = Path(f"/proc/{int(marker.read_text())}/status")
    time.sleep(0.2)
    assert not status.exists() or "\nState:\tZ" in status.read_text()  # gone, or dead and not yet reaped


def test_smoke_and_dry_run_exclude_each_other_and_steps_are_positive():
    with pytest.raises(ConfigError, match="--cpu_smoke"):
        gpu_check.parse(["--cpu_smoke", "--dry_run"])
    for flag in ("--steps", "--speedup_steps"):
        with pytest.raises(ConfigError, match=flag):
            gpu_check.parse([flag, "0"])
    assert gpu_check.parse(["--sections", "main", "fit", "main"]).sections == ["main", "fit"]


def test_the_page_tables_come_from_the_json_and_mark_the_gpu(tmp_path, capsys):
    """benchmarks/gpu_report.py: measured figures with the GPU's name, unmeasured rows say so, planned kept."""
    report_spec = importlib.util.spec_from_file_location("gpu_report", REPO / "benchmarks" / "gpu_report.py")
    gpu_report = importlib.util.module_from_spec(report_spec)
    report_spec.loader.exec_module(gpu_report)
    window = gpu_check.window_figures(metrics_rows([9.0, 1.0, 1.0, 1.0, 4.0, 1.0, 1.0, 2.0]))
    rows = [
        Row(
            "fit",
            "grpo_qwen3_0.6b_full",
            "8 GRPO steps <= 6.9 GiB",
            planned=5.87 * GIB,
            measured=5.6 * GIB,
            fits=True,
            value=window["samples_per_s"],
            figures={"window": window, "write_s": 3.0, "seconds": 60.0},
        ),
        Row("fit", "grpo_qwen3_4b_qlora", "3 GRPO steps <= 6.9 GiB", planned=6.08 * GIB, note=gpu_check.OUT_OF_TIME),
        Row("main", "tiny main job", "before -> after", note="exact match 0.176 -> 0.600"),
    ]
    gpu_check.save_rows(rows, tmp_path, {"device": "NVIDIA H200", "argv": ["--sections", "fit"], "elapsed_s": 400})
    text = gpu_report.main([str(tmp_path / "gpu_check.json")])
    assert (
        "| `grpo_qwen3_0.6b_full` | 8 GRPO steps <= 6.9 GiB | 5.87 | 5.60 | yes | 4.00 | 500 / 1333 | 38% / 0% / 0% / 25% | 3.0 + 60.0 |"
        in text
    )
    assert "| main | tiny main job | before -> after | exact match 0.176 -> 0.600 |" in text
    assert "- `recipes/grpo_qwen3_0.6b_full.yaml`: 6.37 / 5.60 (H200)" in text
    assert "- `recipes/grpo_qwen3_4b_qlora.yaml`: 6.58 / not measured" in text
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="json"):
        gpu_report.main([str(tmp_path / "bad.json")])


def test_over_cap_note_tells_tensors_over_the_cap_from_a_fragmented_cache():
    gib = gpu_check.GIB
    over = gpu_check.over_cap_note({"measured": 8.0 * gib, "reserved": 8.5 * gib}, 6.9)
    assert over.startswith("OOM at the 6.9 GiB cap; uncapped it allocates 8.00 GiB, 1.10 over")
    cache = gpu_check.over_cap_note({"measured": 6.12 * gib, "reserved": 7.4 * gib}, 6.9)
    assert "allocated peak is 6.12 GiB" in cache and "cached blocks" in cache and "reserves 7.40 GiB" in cache
    assert "over" not in cache  # never a negative excess ("-0.78 over")


def test_cpu_smoke_of_the_whole_run_section(tmp_path):
    """The fit section's code path end to end on the CPU (toy shape, 2 steps): the capped runs at once, the
    allocator-off run with its setting in the child's environment, a row each with its steps and plan."""
    out = tmp_path / "out"
    command = [sys.executable, "benchmarks/gpu_check.py", "--cpu_smoke", "--sections", "fit", "--steps", "2"]
    command += ["--fit_configs", "grpo_qwen3_0.6b_full", "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "SMOKE PASS" in done.stdout and "minutes on an H200 (its own estimate)" in done.stdout
    rows = json.loads((out / "gpu_check.json").read_text())["rows"]
    assert sorted(r["name"] for r in rows) == ["grpo_qwen3_0.6b_full", "grpo_qwen3_0.6b_full (expandable segments off)"]
    for row in rows:
        assert row["figures"]["ok"] and row["figures"]["steps_done"] == 2 and "2/2 steps" in row["note"]
        assert 0 < row["figures"]["planned_first"] <= row["planned"]  # the toy shape's plan: first cycle, whole run
    allocators = {r["name"]: r["figures"]["allocator"] for r in rows}
    assert allocators["grpo_qwen3_0.6b_full (expandable segments off)"] == "expandable_segments:False"


def test_cycle_peaks_take_each_generation_cycles_maximum():
    rows = [{gpu_check.PEAK_ALLOCATED: a, gpu_check.PEAK_RESERVED: r} for a, r in [(5, 6), (4, 6.5), (3, 5), (5.5, 6)]]
    assert gpu_check.cycle_peaks(rows, 2) == [[5, 6.5], [5.5, 6]]
    assert gpu_check.cycle_peaks([{"loss": 0}], 4) == []


def test_the_fit_section_estimates_itself_under_six_minutes():
    assert gpu_check.fit_estimate(gpu_check.FIT_CONFIGS, 12, 6.9) <= 6 * 60
