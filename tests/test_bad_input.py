"""Bad input, across every command: exit 2, exactly one stderr line `error: <field>: ...`, no model loaded, nothing
under the output folder touched.

Each row runs the command's `main` in-process through the same `cli` wrapper its `__main__` uses (fast: no new
interpreter per row); `test_console_scripts_*` runs a few rows as real subprocesses to check the wiring. Model
loading is trapped: `PreTrainedModel.from_pretrained` raises `ModelLoaded` (a BaseException, so nothing can swallow
it), so a row that got as far as loading weights fails loudly instead of training.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import FAST_RECIPE, REPO

from rlvr.__main__ import COMMANDS
from rlvr.inputs import cli


class ModelLoaded(BaseException):
    """Raised if a bad-input row ever reaches model loading."""


@pytest.fixture(autouse=True)
def no_model_loads(monkeypatch):
    from transformers import PreTrainedModel

    def refuse(cls, *args, **kwargs):
        raise ModelLoaded(f"{cls.__name__}.from_pretrained called")

    monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(refuse))


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """A workspace: an earlier run's folder (`precious`), recipe variants, a bad reward module, odd files."""
    precious = tmp_path / "precious"
    (precious / "checkpoint-4").mkdir(parents=True)
    (precious / "checkpoint-4" / "model.safetensors").write_bytes(b"")  # torn: weights begun, no trainer_state.json
    (precious / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5, "avg_correctness": 0.1}\n')
    (precious / "rollouts.jsonl").write_text('{"step": 0, "group": 0, "correctness": 0.0}\n')
    (precious / "config.yaml").write_text("seed: 1\n")
    (tmp_path / "binary.yaml").write_bytes(bytes(range(256)))
    (tmp_path / "not_yaml.yaml").write_text("a: [1, 2\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "bad_rewards.py").write_text(
        "def raises(completions, **kw):\n    raise KeyError('boom')\n"
        "def nones(completions, **kw):\n    return None\n"
        "def strings(completions, **kw):\n    return ['1.0'] * len(completions)\n"
        "def short(completions, **kw):\n    return [1.0]\n"
    )
    (tmp_path / "spec.yaml").write_text(f"name: s\nbase: {FAST_RECIPE}\nvary: {{num_generations: [2, 4]}}\n")
    (tmp_path / "spec_two.yaml").write_text(f"name: s\nbase: {FAST_RECIPE}\nvary: {{seed: [1], top_p: [1]}}\n")
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "afile.txt").write_text("x")
    (tmp_path / "dup.yaml").write_text(Path(FAST_RECIPE).read_text() + "learning_rate: 1.0e-2\n")
    (tmp_path / "dup_nested.yaml").write_text(f"base: {FAST_RECIPE}\ndata:\n  size: 100\n  seed: 1\n  size: 200\n")
    (tmp_path / "dup_base.yaml").write_text("base: dup.yaml\nseed: 3\n")
    (tmp_path / "dup_spec.yaml").write_text(f"name: s\nbase: {FAST_RECIPE}\nname: t\nvary: {{seed: [1, 2]}}\n")
    (tmp_path / "accel_bad.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: many\n")
    (tmp_path / "accel_dup.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\nnum_processes: 4\n")
    (tmp_path / "accel_zero.yaml").write_text(
        "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config: {zero_stage: 7}\n"
    )
    # model folders that exist and look right by name, but cannot load: garbage config.json, weights cut short
    (tmp_path / "garbage_model").mkdir()
    (tmp_path / "garbage_model" / "config.json").write_text("{model_type: qwen3,")
    (tmp_path / "torn_model").mkdir()
    (tmp_path / "torn_model" / "config.json").write_text('{"model_type": "qwen3"}')
    header = b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}'
    (tmp_path / "torn_model" / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    (tmp_path / "bomb.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
        + "learning_rate: *i\n"
    )
    # run folders of the one-run-per-folder checks (under precious: the snapshot covers them)
    write_run(precious / "other", folder_run="run-B", checkpoint_run="run-A")
    write_run(precious / "own", folder_run="run-A", checkpoint_run="run-A")
    write_run(precious / "torn_json", folder_run="run-B", checkpoint_run="run-A")  # run.json torn, then rebuilt?
    (precious / "torn_json" / "run.json").write_text('{"run_id": "run-')
    write_run(precious / "finished", folder_run="run-A", checkpoint_run="run-A")  # its checkpoint is at max_steps
    config = (precious / "finished" / "config.yaml").read_text()
    (precious / "finished" / "config.yaml").write_text(config.replace("max_steps: 3", "max_steps: 2"))
    # damaged records (metrics.jsonl binary, lines that are JSON but not objects, only torn lines; a plain-TRL
    # log_history whose rows carry no step), a run folder whose run.lock is a folder, a TensorBoard folder that is a file
    for name, text in (
        ("binary", bytes(range(256))),
        ("lists", b"[1, 2]\n[3]\n"),
        ("torn", b'{"step": 1, "lo\n{"st\n'),
    ):
        (tmp_path / "damaged" / name).mkdir(parents=True)
        (tmp_path / "damaged" / name / "metrics.jsonl").write_bytes(text)
    (tmp_path / "damaged" / "trl").mkdir()
    (tmp_path / "damaged" / "trl" / "trainer_state.json").write_text('{"log_history": [{"loss": 0.5}, {"loss": 0.4}]}')
    # files a run wrote, read back damaged: a resumed run's config.yaml, evaluations and before/after files the report
    # reads, a sweep run's recipe.yaml, JSON and YAML nested past the readers' bound, sweep summaries
    deep_yaml, deep_json = "a: " + "[" * 5000 + "]" * 5000 + "\n", "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.yaml").write_text(deep_yaml)
    (tmp_path / "deep_block.yaml").write_text("".join(f"{'  ' * i}k{i}:\n" for i in range(400)) + "  " * 400 + "x\n")
    for name, text in (
        ("cfg_binary", bytes(range(256))),
        ("cfg_invalid", b"seed: [1\n"),
        ("cfg_deep", deep_yaml.encode()),
        ("cfg_list", b"- 1\n"),
    ):
        write_run(precious / name, folder_run="run-A", checkpoint_run="run-A")
        (precious / name / "config.yaml").write_bytes(text)
    write_run(precious / "deep_run_json", folder_run="run-A", checkpoint_run="run-A")
    (precious / "deep_run_json" / "run.json").write_text(deep_json)
    good_metrics = '{"step": 1, "loss": 0.5, "avg_correctness": 0.1}\n'
    evaluations = {
        "eval_torn": ("eval/after.json", b'{"overall": {"exact_ma'),
        "eval_list": ("eval/after.json", b"[1, 2]"),
        "eval_shape": ("eval/after.json", b'{"overall": 0.5, "by_length": {}}'),
        "eval_deep": ("eval/after.json", deep_json.encode()),
        "checkpoint_eval": ("eval/checkpoint-2.json", bytes(range(256))),
        "ba_binary": ("before_after/before.json", bytes(range(256))),
        "ba_pairing": ("before_after/before_after.json", b'{"models": {}, "prompts": 3}'),
        "code_deep": ("code.json", deep_json.encode()),
    }
    for name, (file, text) in evaluations.items():
        (tmp_path / "damaged" / name / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "damaged" / name / "metrics.jsonl").write_text(good_metrics)
        (tmp_path / "damaged" / name / file).write_bytes(text)
    (precious / "sweeps" / "s" / "num_generations-2").mkdir(parents=True)
    (precious / "sweeps" / "s" / "num_generations-2" / "recipe.yaml").write_bytes(bytes(range(256)))
    for kernels in ("k1", "k2"):
        (tmp_path / kernels / "reference").mkdir(parents=True)
        (tmp_path / kernels / "reference" / "summary.json").write_text("5" if kernels == "k1" else "[]")
    plant_read_back_cases(tmp_path, precious)
    (precious / "locked" / "run.lock").mkdir(parents=True)
    (precious / "tb" / "tensorboard").parent.mkdir()
    (precious / "tb" / "tensorboard").write_text("x")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_run(folder: Path, folder_run: str, checkpoint_run: str) -> None:
    """A run folder as the runner leaves it: run.json, config.yaml (the fast recipe), a complete checkpoint-2 saved by
    `checkpoint_run` (its id in trainer_state.json, as RunIdentityCallback puts it)."""
    import json

    (folder / "checkpoint-2").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"run_id": folder_run, "processes": 1}))
    (folder / "config.yaml").write_text(
        yaml.safe_dump(
            {**yaml.safe_load(Path(FAST_RECIPE).read_text()), "algorithm": "grpo", "output_dir": str(folder)}
        )
    )
    state = {"global_step": 2, "stateful_callbacks": {"RunIdentityCallback": {"args": {"run_id": checkpoint_run}}}}
    (folder / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(state))
    header = b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}'  # whole weights, as far as headers go
    (folder / "checkpoint-2" / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 4)


def plant_read_back_cases(tmp_path: Path, precious: Path) -> None:
    """Names that climb out of their folder, pickles that name code, values of the wrong type, a FIFO: each in the
    file that carries it (sweep specs, a weight index, run.json, jobs.json, a sweep summary, checkpoints, records)."""
    import json
    import os

    import torch

    base = f"base: {FAST_RECIPE}\nvary: {{num_generations: [2]}}\n"
    (tmp_path / "abs_name.yaml").write_text(f"name: {tmp_path / 'elsewhere'}\n{base}")
    (tmp_path / "newline_name.yaml").write_text(f'name: "a\\nb"\n{base}')
    (tmp_path / "dotdot_label.yaml").write_text(f"name: s\n{base}labels: ['..']\n")
    (tmp_path / "dot_label.yaml").write_text(f"name: s\n{base}labels: ['.']\n")
    (tmp_path / "jobs.yaml").write_text(f"name: j\n{base}")
    (precious / "j" / "slurm").mkdir(parents=True)
    (precious / "j" / "slurm" / "jobs.json").write_text('["123"]')
    (tmp_path / "k_empty.yaml").write_text(f"name: s\n{base}evaluate: {{k: []}}\n")
    # a weight index naming a file outside its folder
    (tmp_path / "escaping_model").mkdir()
    (tmp_path / "escaping_model" / "config.json").write_text('{"model_type": "qwen3"}')
    (tmp_path / "escaping_model" / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": "../../../../etc/hostname"}})
    )
    # a run id that is a path: run.json names where an earlier run is moved aside
    write_run(precious / "climbing_id", folder_run="run-A", checkpoint_run="run-A")
    (precious / "climbing_id" / "run.json").write_text(json.dumps({"run_id": "../../x", "processes": 1}))
    # pickles that run code when loaded: a checkpoint's RNG state, a model folder's .bin weights
    write_run(precious / "planted", folder_run="run-A", checkpoint_run="run-A")
    torch.save(RunsCode(tmp_path / "marker"), precious / "planted" / "checkpoint-2" / "rng_state.pth")
    (tmp_path / "planted_model").mkdir()
    (tmp_path / "planted_model" / "config.json").write_text('{"model_type": "qwen3"}')
    torch.save({"w": RunsCode(tmp_path / "marker")}, tmp_path / "planted_model" / "pytorch_model.bin")
    # a checkpoint whose trainer_state.json names a "best" checkpoint outside its run folder
    write_run(precious / "best_elsewhere", folder_run="run-A", checkpoint_run="run-A")
    state_path = precious / "best_elsewhere" / "checkpoint-2" / "trainer_state.json"
    state = json.loads(state_path.read_text())
    state_path.write_text(json.dumps({**state, "best_model_checkpoint": str(tmp_path / "empty_dir")}))
    # values read back of the wrong type, and a FIFO where a record is read
    rows = {
        "time_str": '{"step": 1, "loss": 0.5, "avg_correctness": 0.1, "time/total_s": "slow"}\n',
        "eval_str": '{"step": 1, "loss": 0.5, "avg_correctness": 0.1}\n{"step": 1, "eval_exact_match": "high"}\n',
        "mode_int": '{"step": 1, "loss": 0.5, "avg_correctness": 0.1}\n',
        "overall_str": '{"step": 1, "loss": 0.5, "avg_correctness": 0.1}\n',
    }
    for name, text in rows.items():
        (tmp_path / "damaged" / name).mkdir(parents=True)
        (tmp_path / "damaged" / name / "metrics.jsonl").write_text(text)
    (tmp_path / "damaged" / "mode_int" / "config.yaml").write_text("vllm_importance_sampling_mode: 3\n")
    (tmp_path / "damaged" / "overall_str" / "eval").mkdir()
    (tmp_path / "damaged" / "overall_str" / "eval" / "after.json").write_text(
        '{"overall": {"exact_match": "high"}, "by_length": {}}'
    )
    (tmp_path / "damaged" / "fifo").mkdir()
    os.mkfifo(tmp_path / "damaged" / "fifo" / "metrics.jsonl")
    (tmp_path / "fifo_model").mkdir()
    (tmp_path / "fifo_model" / "config.json").write_text('{"model_type": "qwen3"}')
    os.mkfifo(tmp_path / "fifo_model" / "model.safetensors")
    write_run(precious / "fifo_run_json", folder_run="run-A", checkpoint_run="run-A")
    (precious / "fifo_run_json" / "run.json").unlink()
    os.mkfifo(precious / "fifo_run_json" / "run.json")
    # kernel sets: a seedless run beside seeded ones; a run name that climbs out of its sweep
    for kernels, runs in (("k3", ["a-s1", "a-s2", "a"]), ("k4", ["../../x-s1"])):
        (tmp_path / kernels / "reference").mkdir(parents=True)
        summary = [{"run": run, "eval_exact_match": 0.5} for run in runs]
        (tmp_path / kernels / "reference" / "summary.json").write_text(json.dumps(summary))


def recipe_with(ws: Path, name: str, **changes) -> str:
    """FAST_RECIPE with top-level keys changed (None deletes) or a data.specs[0].config option set (`task_<opt>`)."""
    config = yaml.safe_load(Path(FAST_RECIPE).read_text())
    for key, value in changes.items():
        if key.startswith("task_"):
            config["data"]["specs"][0]["config"][key[5:]] = value
        elif value is None:
            config.pop(key, None)
        else:
            config[key] = value
    path = ws / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def runner(algorithm: str):
    def main(argv):  # what recipes/<algorithm>.py runs
        from rlvr.training.runner import main as run_main

        return run_main(argv, algorithm=algorithm)

    return main


def command(name):
    if name in ("grpo", "dapo", "ppo", "reinforce"):
        return runner(name)
    if name == "main_job":
        return __import__("benchmarks.tiny_main_job", fromlist=["main"]).main
    if name in ("kernel_robustness", "speed", "main_job_range"):
        return __import__(f"benchmarks.{name}", fromlist=["main"]).main
    return __import__(COMMANDS[name], fromlist=["main"]).main  # `rlvr <name>`'s module


RUN = ["--config", FAST_RECIPE, "--output_dir", "precious", "--report_to", "none"]
# (command, argv builder given the workspace, field the one line must name); marks via pytest.param
ROWS = [
    # the recipe runner: batch arithmetic TRL divides by, ranges TRL never checks, enums checked only after load
    ("grpo", lambda w: [*RUN, "--num_generations", "0"], "num_generations"),
    ("grpo", lambda w: [*RUN, "--num_generations", "1"], "num_generations"),
    ("grpo", lambda w: [*RUN, "--num_generations", "3"], "generation_batch_size"),
    ("grpo", lambda w: [*RUN, "--num_generations", "four"], "num_generations"),
    ("grpo", lambda w: [*RUN, "--gradient_accumulation_steps", "0"], "gradient_accumulation_steps"),
    ("grpo", lambda w: [*RUN, "--per_device_train_batch_size", "-16"], "per_device_train_batch_size"),
    ("grpo", lambda w: [*RUN, "--generation_batch_size", "0"], "generation_batch_size"),
    ("grpo", lambda w: [*RUN, "--scale_rewards", "foo"], "scale_rewards"),
    ("grpo", lambda w: [*RUN, "--loss_type", "foo"], "loss_type"),
    ("grpo", lambda w: [*RUN, "--importance_sampling_level", "word"], "importance_sampling_level"),
    ("grpo", lambda w: [*RUN, "--temperature", "-1"], "temperature"),
    ("grpo", lambda w: [*RUN, "--temperature", "0"], "temperature"),
    ("grpo", lambda w: [*RUN, "--top_p", "2"], "top_p"),
    ("grpo", lambda w: [*RUN, "--top_k", "-1"], "top_k"),
    ("grpo", lambda w: [*RUN, "--min_p", "1.5"], "min_p"),
    ("grpo", lambda w: [*RUN, "--repetition_penalty", "0"], "repetition_penalty"),
    ("grpo", lambda w: [*RUN, "--max_completion_length", "0"], "max_completion_length"),
    ("grpo", lambda w: [*RUN, "--max_steps", "0"], "max_steps"),
    ("grpo", lambda w: [*RUN, "--max_steps", "1.5"], "max_steps"),
    ("grpo", lambda w: [*RUN, "--beta", "-1"], "beta"),
    ("grpo", lambda w: [*RUN, "--epsilon", "-0.2"], "epsilon"),
    ("grpo", lambda w: [*RUN, "--learning_rate", "-1"], "learning_rate"),
    ("grpo", lambda w: [*RUN, "--learning_rate", "nan"], "learning_rate"),
    ("grpo", lambda w: [*RUN, "--weight_decay", "-0.1"], "weight_decay"),
    ("grpo", lambda w: [*RUN, "--max_grad_norm", "-1"], "max_grad_norm"),
    ("grpo", lambda w: [*RUN, "--num_iterations", "0"], "num_iterations"),
    ("grpo", lambda w: [*RUN, "--save_steps", "0"], "save_steps"),
    ("grpo", lambda w: [*RUN, "--logging_steps", "0"], "logging_steps"),
    ("grpo", lambda w: [*RUN, "--seed", "-1"], "seed"),
    ("grpo", lambda w: [*RUN, "--dtype", "float64"], "dtype"),
    ("grpo", lambda w: [*RUN, "--use_peft", "true", "--lora_r", "0"], "lora_r"),
    ("grpo", lambda w: [*RUN, "--lora_dropout", "1.5"], "lora_dropout"),
    ("grpo", lambda w: [*RUN, "--memory_budget", "always"], "memory_budget"),
    ("grpo", lambda w: [*RUN, "--lerning_rate", "1e-3"], "lerning_rate"),
    ("grpo", lambda w: [*RUN, "--overlong_cache_length", "4"], "overlong_cache_length"),
    ("grpo", lambda w: [*RUN, "--entropy_coef", "-0.1", "--use_adaptive_entropy", "true"], "entropy_coef"),
    ("grpo", lambda w: [*RUN, "--entropy_coef", "nan"], "entropy_coef"),
    ("grpo", lambda w: [*RUN, "--success_bonus", "-1"], "success_bonus"),
    ("grpo", lambda w: [*RUN, "--failed_entropy_coef", "-0.1"], "failed_entropy_coef"),
    ("grpo", lambda w: [*RUN, "--late_entropy_coef", "-1", "--use_adaptive_entropy", "true"], "late_entropy_coef"),
    ("grpo", lambda w: [*RUN, "--late_entropy_coef", "inf"], "late_entropy_coef"),
    ("grpo", lambda w: [*RUN, "--late_entropy_coef", "-1", "--late_entropy_step", "-1"], "late_entropy_step"),
    ("ppo", lambda w: [*RUN, "--success_bonus", "0.5"], "success_bonus"),
    ("grpo", lambda w: [*RUN, "--overlong_max_length", "16", "--overlong_cache_length", "32"], "overlong_cache_length"),
    ("grpo", lambda w: [*RUN, "--overlong_max_length", "64", "--overlong_cache_length", "8"], "overlong_max_length"),
    ("grpo", lambda w: [*RUN, "--reward_funcs", "nosuch", "--reward_weights", "1"], "reward_funcs[0]"),
    (
        "grpo",
        lambda w: [*RUN, "--reward_funcs", "correctness", "penalty", "--reward_weights", "1", "1"],
        "reward_funcs[1]",
    ),
    ("grpo", lambda w: [*RUN, "--reward_weights", "1"], "reward_weights"),
    ("grpo", lambda w: [*RUN, "--reward_funcs", "no_module_here.fn", "--reward_weights", "1"], "reward_funcs[0]"),
    ("grpo", lambda w: [*RUN, "--reward_funcs", "bad_rewards.raises", "--reward_weights", "1"], "reward_funcs"),
    ("grpo", lambda w: [*RUN, "--reward_funcs", "bad_rewards.nones", "--reward_weights", "1"], "reward_funcs"),
    ("grpo", lambda w: [*RUN, "--reward_funcs", "bad_rewards.strings", "--reward_weights", "1"], "reward_funcs"),
    ("grpo", lambda w: [*RUN, "--reward_funcs", "bad_rewards.short", "--reward_weights", "1"], "reward_funcs"),
    ("grpo", lambda w: [*RUN, "--dataset_train_split", "nope"], "dataset_train_split"),
    ("grpo", lambda w: [*RUN, "--data", '{"specs": []}'], "data.specs"),
    (
        "grpo",
        lambda w: [*RUN, "--data", '{"size": 10, "test_size": 50, "specs": ["spell_backward"]}'],
        "data.test_size",
    ),
    (
        "grpo",
        lambda w: [*RUN, "--model_name_or_path", str(w / "no_model"), "--build_tiny_model", "false"],
        "model_name_or_path",
    ),
    ("grpo", lambda w: [*RUN, "--resume_from_checkpoint", "/nonexistent/checkpoint-3"], "resume_from_checkpoint"),
    ("grpo", lambda w: [*RUN, "--resume_from_checkpoint", "precious/checkpoint-4"], "resume_from_checkpoint"),
    ("grpo", lambda w: [*RUN, "--dry_run", "true", "--beta", "-1"], "beta"),
    (
        "grpo",
        lambda w: [*RUN, "--dry_run", "true", "--per_device_train_batch_size", "-16"],
        "per_device_train_batch_size",
    ),
    ("grpo", lambda w: ["--output_dir", "precious"], "--config"),
    ("grpo", lambda w: ["--output_dir", "precious", "--config"], "--config"),
    ("grpo", lambda w: ["--config", "--output_dir", "precious"], "--config"),
    ("grpo", lambda w: ["--config", "missing.yaml", "--output_dir", "precious"], "--config"),
    ("grpo", lambda w: ["--config", str(w), "--output_dir", "precious"], "--config"),
    ("grpo", lambda w: ["--config", "binary.yaml", "--output_dir", "precious"], "--config"),
    ("grpo", lambda w: ["--config", "not_yaml.yaml", "--output_dir", "precious"], "--config"),
    ("grpo", lambda w: ["--config", "list.yaml", "--output_dir", "precious"], "--config"),
    (
        "grpo",
        lambda w: ["--config", recipe_with(w, "r1", task_min_word_len="three"), "--output_dir", "precious"],
        "data.specs[0].config",
    ),
    (
        "grpo",
        lambda w: ["--config", recipe_with(w, "r2", reward_weights="1.0"), "--output_dir", "precious"],
        "reward_weights",
    ),
    (
        "grpo",
        lambda w: ["--config", recipe_with(w, "r3", num_generations=2.5), "--output_dir", "precious"],
        "num_generations",
    ),
    (
        "grpo",
        lambda w: ["--config", recipe_with(w, "r4", print_rollouts=3), "--output_dir", "precious"],
        "print_rollouts",
    ),
    (
        "grpo",
        lambda w: ["--config", recipe_with(w, "r5", learning_rate="fast"), "--output_dir", "precious"],
        "learning_rate",
    ),
    ("grpo", lambda w: ["--config", recipe_with(w, "r6", data=None), "--output_dir", "precious"], "data"),
    ("dapo", lambda w: [*RUN, "--max_resample_rounds", "-1"], "max_resample_rounds"),
    ("dapo", lambda w: [*RUN, "--dynamic_sampling_reward", "format2"], "dynamic_sampling_reward"),
    (
        "ppo",
        lambda w: [
            *RUN,
            "--num_generations",
            "1",
            "--generation_batch_size",
            "4",
            "--per_device_train_batch_size",
            "4",
            "--gamma",
            "2",
        ],
        "gamma",
    ),
    ("ppo", lambda w: [*RUN, "--vf_coef", "-1"], "vf_coef"),
    ("reinforce", lambda w: [*RUN, "--num_generations", "0"], "num_generations"),
    # data.cli
    ("data", lambda w: ["--config", FAST_RECIPE, "--output_dir", "precious", "--size", "0"], "--size"),
    ("data", lambda w: ["--config", FAST_RECIPE, "--output_dir", "precious", "--seed", "-1"], "--seed"),
    ("data", lambda w: ["--output_dir", "precious"], "--config"),
    ("data", lambda w: ["--config", str(w), "--output_dir", "precious"], "--config"),
    ("data", lambda w: ["--config", "binary.yaml", "--output_dir", "precious"], "--config"),
    ("data", lambda w: ["--config", FAST_RECIPE, "--output_dir", "precious", "--bogus", "1"], "--bogus"),
    ("data", lambda w: ["--config", FAST_RECIPE], "--output_dir"),
    ("data", lambda w: ["--config", FAST_RECIPE, "--output_dir", "precious/config.yaml"], "--output_dir"),
    (
        "data",
        lambda w: ["--config", recipe_with(w, "d1", task_max_word_len=1), "--output_dir", "precious"],
        "data.specs[0].config",
    ),
    # plots, report, sweep
    ("plots", lambda w: ["precious", "--out", "precious/plots", "--max_rows", "0"], "--max_rows"),
    ("plots", lambda w: ["precious", "--out", "precious/plots", "--x", "time"], "--x"),
    ("plots", lambda w: ["missing_run", "--out", "precious/plots"], "RUN_DIR"),
    ("plots", lambda w: ["precious"], "--out"),
    ("plots", lambda w: ["precious", "--out", "precious/metrics.jsonl"], "--out"),
    ("plots", lambda w: ["--out", "precious/plots"], "run_dirs"),
    ("report", lambda w: ["precious", "--out", "precious/r.md", "--last_k", "0"], "--last_k"),
    ("report", lambda w: ["precious", "--out", "precious/r.md", "--num_prompts", "0"], "--num_prompts"),
    ("report", lambda w: ["precious", "--out", "precious/r.md", "--max_rows", "-1"], "--max_rows"),
    ("report", lambda w: ["missing_run", "--out", "precious/r.md"], "RUN_DIR"),
    ("report", lambda w: ["precious", "--out", "precious"], "--out"),
    ("report", lambda w: ["precious", "--out", "precious/r.md", "--before", str(w / "no_model")], "--before"),
    ("report", lambda w: ["precious", "--out", "precious/r.md", "--config", str(w)], "--config"),
    ("sweep", lambda w: ["spec.yaml", "--out", "precious", "--last_k", "0"], "--last_k"),
    ("sweep", lambda w: ["spec.yaml", "--out", "precious", "--launcher", "ssh"], "--launcher"),
    ("sweep", lambda w: ["spec.yaml", "--out", "precious", "--max_steps", "0"], "max_steps"),
    ("sweep", lambda w: ["spec.yaml", "--out", "precious", "--temperature", "[1"], "--temperature"),
    ("sweep", lambda w: ["missing_spec.yaml", "--out", "precious"], "SPEC"),
    ("sweep", lambda w: ["spec_two.yaml", "--out", "precious"], "vary"),
    ("sweep", lambda w: ["binary.yaml", "--out", "precious"], "SPEC"),
    # evaluate, before_after, memory_plan
    ("evaluate", lambda w: ["--config", FAST_RECIPE, "--output", "precious/e.json", "--k", "x"], "--k"),
    ("evaluate", lambda w: ["--output", "precious/e.json"], "--config"),
    ("evaluate", lambda w: ["--config", FAST_RECIPE, "--output", "precious/e.json", "--k", "0"], "--k"),
    (
        "evaluate",
        lambda w: ["--config", FAST_RECIPE, "--output", "precious/e.json", "--temperature", "-1"],
        "--temperature",
    ),
    ("before-after", lambda w: ["--after", "precious", "--config", FAST_RECIPE], "--before"),
    (
        "before-after",
        lambda w: ["--before", "/nonexistent", "--after", "precious", "--config", FAST_RECIPE],
        "--before",
    ),
    ("before-after", lambda w: ["--before", "x", "--after", "precious", "--config", FAST_RECIPE, "--k", "one"], "--k"),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--num_processes", "0"], "--num_processes"),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--zero_stage", "5"], "--zero_stage"),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--temperature", "-1"], "temperature"),
]

EVAL = ["--config", FAST_RECIPE, "--output", "precious/e.json"]
# Further classes: paths that exist but are the wrong thing, folders that cannot be created, accelerate configs,
# evaluation's sampling flags under training's rules, duplicate YAML keys, flattened library messages, and the
# fields added since the table above was written (max_generated_samples, kl_estimator, speedups, algorithm, ...).
NEW_ROWS = [
    # a path that exists but is the wrong thing, or a path-shaped name that does not exist
    (
        "grpo",
        lambda w: [*RUN, "--model_name_or_path", "empty_dir", "--build_tiny_model", "false"],
        "model_name_or_path",
    ),
    ("grpo", lambda w: [*RUN, "--model_name_or_path", "afile.txt"], "model_name_or_path"),
    (
        "grpo",
        lambda w: [*RUN, "--model_name_or_path", "./no/such/model", "--build_tiny_model", "false"],
        "model_name_or_path",
    ),
    ("grpo", lambda w: [*RUN, "--model_name_or_path", "precious"], "model_name_or_path"),  # not empty: nothing to build
    (
        "grpo",
        lambda w: [*RUN, "--model_name_or_path", "Qwen//Qwen3", "--build_tiny_model", "false"],
        "model_name_or_path",
    ),
    ("ppo", lambda w: [*RUN, "--value_model_name_or_path", str(w / "no_critic")], "value_model_name_or_path"),
    ("ppo", lambda w: [*RUN, "--value_model_name_or_path", "empty_dir"], "value_model_name_or_path"),
    ("ppo", lambda w: [*RUN, "--value_model_name_or_path", "afile.txt"], "value_model_name_or_path"),
    ("grpo", lambda w: [*RUN, "--dataset_name", "empty_dir"], "dataset_name"),
    ("grpo", lambda w: [*RUN, "--dataset_name", "afile.txt"], "dataset_name"),
    ("grpo", lambda w: [*RUN, "--dataset_name", "./no_data_here"], "dataset_name"),
    ("grpo", lambda w: [*RUN, "--resume_from_checkpoint", "afile.txt"], "resume_from_checkpoint"),
    ("grpo", lambda w: [*RUN, "--resume_from_checkpoint", "empty_dir"], "resume_from_checkpoint"),
    # output locations that cannot be created
    ("grpo", lambda w: [*RUN, "--output_dir", "afile.txt/run"], "output_dir"),
    ("grpo", lambda w: [*RUN, "--output_dir", "afile.txt"], "output_dir"),
    ("grpo", lambda w: [*RUN, "--metrics_path", "afile.txt/metrics.jsonl"], "metrics_path"),
    ("grpo", lambda w: [*RUN, "--rollouts_path", "empty_dir"], "rollouts_path"),
    ("data", lambda w: ["--config", FAST_RECIPE, "--output_dir", "afile.txt/data"], "--output_dir"),
    ("data", lambda w: ["--config", FAST_RECIPE, "--output_dir", "afile.txt/a/b/c"], "--output_dir"),
    ("evaluate", lambda w: ["--config", FAST_RECIPE, "--output", "afile.txt/e.json"], "--output"),
    ("evaluate", lambda w: [*EVAL, "--rollouts", "empty_dir"], "--rollouts"),
    # a library's message on one line: an invalid Hub repo id, before any data is generated
    (
        "data",
        lambda w: ["--config", FAST_RECIPE, "--output_dir", "precious", "--push_to_hub", "bad repo//id"],
        "--push_to_hub",
    ),
    ("data", lambda w: ["--config", FAST_RECIPE, "--push_to_hub", "a/b/c"], "--push_to_hub"),
    # rlvr plan --accelerate_config
    ("plan", lambda w: ["--config", FAST_RECIPE, "--accelerate_config", "missing.yaml"], "--accelerate_config"),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--accelerate_config", "list.yaml"], "--accelerate_config"),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--accelerate_config", "empty_dir"], "--accelerate_config"),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--accelerate_config", "not_yaml.yaml"], "--accelerate_config"),
    (
        "plan",
        lambda w: ["--config", FAST_RECIPE, "--accelerate_config", "accel_bad.yaml"],
        "--accelerate_config",
    ),
    (
        "plan",
        lambda w: ["--config", FAST_RECIPE, "--accelerate_config", "accel_zero.yaml"],
        "--accelerate_config",
    ),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--accelerate_config", "accel_dup.yaml"], "num_processes"),
    # evaluation's sampling flags: training's range rules (validation.RULES)
    ("evaluate", lambda w: [*EVAL, "--top_p", "1.5"], "--top_p"),
    ("evaluate", lambda w: [*EVAL, "--top_p", "0"], "--top_p"),
    ("evaluate", lambda w: [*EVAL, "--top_p", "nan"], "--top_p"),
    ("evaluate", lambda w: [*EVAL, "--top_k", "-1"], "--top_k"),
    ("evaluate", lambda w: [*EVAL, "--top_k", "2.5"], "--top_k"),
    ("evaluate", lambda w: [*EVAL, "--max_new_tokens", "0"], "--max_new_tokens"),
    ("evaluate", lambda w: [*EVAL, "--num_samples", "0"], "--num_samples"),
    ("evaluate", lambda w: [*EVAL, "--seed", "-3"], "--seed"),
    # duplicate keys, in every YAML the repo reads
    ("grpo", lambda w: ["--config", "dup.yaml", "--output_dir", "precious"], "learning_rate"),
    ("grpo", lambda w: ["--config", "dup_nested.yaml", "--output_dir", "precious"], "size"),
    ("grpo", lambda w: ["--config", "dup_base.yaml", "--output_dir", "precious"], "learning_rate"),
    ("data", lambda w: ["--config", "dup.yaml", "--output_dir", "precious"], "learning_rate"),
    ("sweep", lambda w: ["dup_spec.yaml", "--out", "precious"], "name"),
    ("evaluate", lambda w: ["--config", "dup.yaml", "--output", "precious/e.json"], "learning_rate"),
    # fields added since the first table
    ("grpo", lambda w: [*RUN, "--max_generated_samples", "0"], "max_generated_samples"),
    ("grpo", lambda w: [*RUN, "--max_generated_samples", "-5"], "max_generated_samples"),
    ("grpo", lambda w: [*RUN, "--max_generated_samples", "1e4"], "max_generated_samples"),
    ("grpo", lambda w: [*RUN, "--kl_estimator", "k4"], "kl_estimator"),
    ("grpo", lambda w: [*RUN, "--speedups", "warp"], "speedups"),
    ("grpo", lambda w: [*RUN, "--speedups", "threads,nope"], "speedups"),
    ("grpo", lambda w: [*RUN, "--memory_budget", "1"], "memory_budget"),
    ("dapo", lambda w: [*RUN, "--algorithm", "grpo"], "algorithm"),
    ("grpo", lambda w: ["--config", recipe_with(w, "a1", algorithm="nosuch"), "--output_dir", "precious"], "algorithm"),
    ("grpo", lambda w: [*RUN, "--save_total_limit", "0"], "save_total_limit"),
    ("grpo", lambda w: [*RUN, "--warmup_ratio", "1.5"], "warmup_ratio"),
    ("grpo", lambda w: [*RUN, "--adam_beta2", "1"], "adam_beta2"),
    ("grpo", lambda w: [*RUN, "--top_entropy_quantile", "2"], "top_entropy_quantile"),
    ("grpo", lambda w: [*RUN, "--num_generations_eval", "0"], "num_generations_eval"),
    ("grpo", lambda w: [*RUN, "--epsilon_high", "-1"], "epsilon_high"),
    ("ppo", lambda w: [*RUN, "--cliprange_value", "0"], "cliprange_value"),
    ("ppo", lambda w: [*RUN, "--value_learning_rate", "-1"], "value_learning_rate"),
    ("ppo", lambda w: [*RUN, "--lam", "1.5"], "lam"),
    ("dapo", lambda w: [*RUN, "--max_resample_rounds", "1.5"], "max_resample_rounds"),
    (
        "before-after",
        lambda w: ["--before", "x", "--after", "precious", "--config", FAST_RECIPE, "--num_prompts", "0"],
        "--num_prompts",
    ),
    (
        "before-after",
        lambda w: ["--before", "x", "--after", "precious", "--config", FAST_RECIPE, "--seed", "-1"],
        "--seed",
    ),
    ("before-after", lambda w: ["--before", "empty_dir", "--after", "precious", "--config", FAST_RECIPE], "--before"),
    # the divergence guard's fields (rlvr/training/stopping.py)
    (
        "grpo",
        lambda w: [*RUN, "--min_mean_reward", "0.5", "--min_mean_reward_component", "nosuch"],
        "min_mean_reward_component",
    ),
    ("grpo", lambda w: [*RUN, "--min_mean_reward_patience", "-1"], "min_mean_reward_patience"),
    ("grpo", lambda w: [*RUN, "--min_mean_reward", "low"], "min_mean_reward"),
    ("grpo", lambda w: [*RUN, "--min_mean_reward", "-inf"], "min_mean_reward"),
]
RESUME = ["--config", FAST_RECIPE, "--report_to", "none", "--resume_from_checkpoint", "true"]
FAST_DATA = yaml.safe_load(Path(FAST_RECIPE).read_text())["data"]
# One run per folder, model folders that cannot load, and the last inputs that slipped through
RUN_FOLDER_ROWS = [
    ("grpo", lambda w: [*RESUME, "--output_dir", "precious/other"], "resume_from_checkpoint"),  # another run's
    ("grpo", lambda w: [*RESUME, "--output_dir", "precious/own", "--learning_rate", "0.5"], "learning_rate"),
    ("grpo", lambda w: [*RESUME, "--output_dir", "precious/own", "--num_generations", "8"], "num_generations"),
    (
        "grpo",
        lambda w: [*RESUME, "--output_dir", "precious/own", "--per_device_train_batch_size", "8"],
        "per_device_train_batch_size",
    ),  # half the optimizer step
    ("grpo", lambda w: [*RUN, "--model_name_or_path", "garbage_model"], "model_name_or_path"),
    ("grpo", lambda w: [*RUN, "--model_name_or_path", "torn_model"], "model_name_or_path"),
    ("evaluate", lambda w: [*EVAL, "--model", "garbage_model"], "--model"),
    ("evaluate", lambda w: [*EVAL, "--model", "torn_model"], "--model"),
    ("report", lambda w: ["precious", "--out", "afile.txt/r.md"], "--out"),
    ("grpo", lambda w: [*RUN, "--max_generated_samples", "8"], "max_generated_samples"),  # one step is 16 samples
    (
        "grpo",
        lambda w: [
            "--config",
            recipe_with(w, "sp1", data={**FAST_DATA, "system_prompt": "DeepSeekZer0"}),
            "--output_dir",
            "precious",
        ],
        "data.system_prompt",
    ),
    (
        "data",
        lambda w: [
            "--config",
            recipe_with(w, "sp2", data={**FAST_DATA, "system_prompt": "tinny"}),
            "--output_dir",
            "precious",
        ],
        "data.system_prompt",
    ),
    ("grpo", lambda w: ["--config", "bomb.yaml", "--output_dir", "precious"], "--config"),
    ("sweep", lambda w: ["bomb.yaml", "--out", "precious"], "SPEC"),
    ("grpo", lambda w: [*RUN, "--reward_time_limit", "-1"], "reward_time_limit"),
]
UNWRITABLE = "/sys/rlvr-out"  # os.access says yes to root, the write itself fails (EACCES): only a real write tells
SPEC_EVAL = "name: s\nbase: {}\nvary: {{seed: [1]}}\nevaluate: {}\n"
# The commands added last, and the values that used to fail only after config.yaml was written or the model loaded
LATE_ROWS = [
    *[
        (command_, lambda w, kind=kind, argv=argv: [f"damaged/{kind}", *argv], "RUN_DIR")
        for kind in ("binary", "lists", "torn", "trl")
        for command_, argv in (
            ("doctor", []),
            ("plots", ["--out", "precious/plots"]),
            ("report", ["--out", "precious/r.md"]),
        )
    ],
    ("plots", lambda w: ["precious", "--out", "afile.txt/plots"], "--out"),
    ("sweep", lambda w: ["spec.yaml", "--out", "afile.txt/sweeps", "--dry_run"], "--out"),
    ("plots", lambda w: ["precious", "--out", UNWRITABLE], "--out"),
    ("report", lambda w: ["precious", "--out", f"{UNWRITABLE}/r.md"], "--out"),
    ("sweep", lambda w: ["spec.yaml", "--out", UNWRITABLE, "--dry_run"], "--out"),
    ("data", lambda w: ["--config", FAST_RECIPE, "--output_dir", UNWRITABLE], "--output_dir"),
    ("evaluate", lambda w: ["--config", FAST_RECIPE, "--output", f"{UNWRITABLE}/e.json"], "--output"),
    ("grpo", lambda w: [*RUN, "--output_dir", UNWRITABLE], "output_dir"),
    (
        "sweep",
        lambda w: [
            "spec.yaml",
            "--out",
            "precious",
            "--launcher",
            "slurm",
            "--dry_run",
            "--sbatch_file",
            "binary.yaml",
        ],
        "--sbatch_file",
    ),
    (
        "sweep",
        lambda w: ["spec.yaml", "--out", "precious", "--launcher", "slurm", "--dry_run", "--sbatch=--partition='gpu"],
        "--sbatch",
    ),
    ("grpo", lambda w: [*RUN, "--output_dir", "precious/locked"], "output_dir"),
    ("grpo", lambda w: [*RUN, "--output_dir", "precious/" + "x" * 300], "output_dir"),
    ("grpo", lambda w: [*RUN, "--report_to", "tensorbord"], "report_to"),
    ("grpo", lambda w: [*RUN, "--report_to", "tensorboard", "--output_dir", "precious/tb"], "report_to"),
    ("grpo", lambda w: [*RUN, "--seed", str(2**32)], "seed"),
    (
        "grpo",
        lambda w: [
            "--config",
            recipe_with(w, "w11", task_min_word_len=11, task_max_word_len=12),
            "--output_dir",
            "precious",
        ],
        "data.specs[0].config",
    ),
    (
        "data",
        lambda w: [
            "--config",
            recipe_with(w, "w12", task_min_word_len=11, task_max_word_len=14),
            "--output_dir",
            "precious",
        ],
        "data.specs[0].config",
    ),
    (
        "main_job",
        lambda w: ["--config", FAST_RECIPE, "--output_dir", "precious/bench", "--cpu_threads", "many"],
        "cpu_threads",
    ),
    (
        "main_job",
        lambda w: ["--config", FAST_RECIPE, "--output_dir", "precious/bench", "--num_samples", "0"],
        "--num_samples",
    ),
    (
        "sweep",
        lambda w: [
            (w / "e1.yaml").write_text(SPEC_EVAL.format(FAST_RECIPE, "{num_prompts: 0}")) and "e1.yaml",
            "--out",
            "precious",
            "--dry_run",
        ],
        "evaluate.num_prompts",
    ),
    (
        "sweep",
        lambda w: [
            (w / "e2.yaml").write_text(SPEC_EVAL.format(FAST_RECIPE, "{temperature: -1}")) and "e2.yaml",
            "--out",
            "precious",
            "--dry_run",
        ],
        "evaluate.temperature",
    ),
    (
        "evaluate",
        lambda w: ["--config", FAST_RECIPE, "--output", "precious/e.json", "--rollouts", "precious/e.json"],
        "--rollouts",
    ),
    ("report", lambda w: ["precious", "--out", "precious/r.md", "--only", "g-2"], "--only"),
    (
        "before-after",
        lambda w: ["--before", "x", "--after", "precious", "--config", FAST_RECIPE, "--show", "-1"],
        "--show",
    ),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--free_gib", "nan"], "--free_gib"),
    ("grpo", lambda w: [*RESUME, "--output_dir", "precious/torn_json"], "resume_from_checkpoint"),
    ("grpo", lambda w: [*RESUME, "--output_dir", "precious/finished", "--max_steps", "1"], "max_steps"),
]
SPEC_DATA = "name: s\nbase: {}\nvary: {{seed: [1]}}\nevaluate: {{data: {}}}\n"
# Files the repo wrote and reads back, damaged; values past what the machine takes; the scripts docs tell users to run
READ_BACK_ROWS = [
    *[
        ("grpo", lambda w, name=name: [*RESUME, "--output_dir", f"precious/{name}"], "resume_from_checkpoint")
        for name in ("cfg_binary", "cfg_invalid", "cfg_deep", "cfg_list", "deep_run_json")
    ],
    *[
        ("report", lambda w, name=name: [f"damaged/{name}", "--out", "precious/r.md"], "RUN_DIR")
        for name in ("eval_torn", "eval_list", "eval_shape", "eval_deep", "checkpoint_eval", "ba_binary", "ba_pairing")
    ],
    ("grpo", lambda w: ["--config", "deep.yaml", "--output_dir", "precious"], "--config"),
    ("grpo", lambda w: ["--config", "deep_block.yaml", "--output_dir", "precious"], "--config"),
    ("sweep", lambda w: ["deep.yaml", "--out", "precious"], "SPEC"),
    ("plan", lambda w: ["--config", FAST_RECIPE, "--accelerate_config", "deep.yaml"], "--accelerate_config"),
    ("grpo", lambda w: [*RUN, "--data", "[" * 5000], "data"),
    ("sweep", lambda w: ["spec.yaml", "--out", "precious/sweeps", "--dry_run"], "--out"),  # its run's recipe.yaml
    ("grpo", lambda w: [*RUN, "--cpu_threads", "99999999999"], "cpu_threads"),
    (
        "main_job",
        lambda w: ["--config", FAST_RECIPE, "--output_dir", "precious/bench", "--cpu_threads", "99999999999"],
        "cpu_threads",
    ),
    (
        "sweep",
        lambda w: [
            (w / "d1.yaml").write_text(SPEC_DATA.format(FAST_RECIPE, "words")) and "d1.yaml",
            "--out",
            "precious",
            "--dry_run",
        ],
        "evaluate.data",
    ),
    (
        "sweep",
        lambda w: [
            (w / "d2.yaml").write_text(SPEC_DATA.format(FAST_RECIPE, "{test_sise: 50}")) and "d2.yaml",
            "--out",
            "precious",
            "--dry_run",
        ],
        "evaluate.data.test_sise",
    ),
    (
        "sweep",
        lambda w: [
            (w / "d3.yaml").write_text(SPEC_DATA.format(FAST_RECIPE, "{test_size: 0}")) and "d3.yaml",
            "--out",
            "precious",
            "--dry_run",
        ],
        "evaluate.data.test_size",
    ),
    (
        "sweep",
        lambda w: [
            (w / "d4.yaml").write_text(SPEC_DATA.format(FAST_RECIPE, "{specs: [{name: spell_bakward}]}")) and "d4.yaml",
            "--out",
            "precious",
            "--dry_run",
        ],
        "evaluate.data.specs[0].name",
    ),
    ("kernel_robustness", lambda w: ["--sets", "k1", "k2"], "--sets"),  # a summary.json holding a number
    ("kernel_robustness", lambda w: ["--sets", "k2", "k2", "--out", "afile.txt/table.md"], "--out"),
    ("kernel_robustness", lambda w: ["--sets", "k2", "k2", "--out", "precious"], "--out"),
    ("kernel_robustness", lambda w: ["--setz", "k1", "k2"], "--setz"),
]
# A name is a name (`name_inside`); pickles checked weights-only before any model loads, named by their file; values
# read back typed; a FIFO refused; every flag of the benchmarks ranged before any work (docs/reliability.md)
ESCAPE_ROWS = [
    ("sweep", lambda w: ["abs_name.yaml", "--out", "precious", "--dry_run"], "name"),
    ("sweep", lambda w: ["newline_name.yaml", "--out", "precious", "--dry_run"], "name"),
    ("sweep", lambda w: ["dotdot_label.yaml", "--out", "precious", "--dry_run"], "labels"),
    ("sweep", lambda w: ["dot_label.yaml", "--out", "precious", "--dry_run"], "labels"),
    ("sweep", lambda w: ["jobs.yaml", "--out", "precious", "--launcher", "slurm", "--dry_run"], "--out"),
    ("sweep", lambda w: ["k_empty.yaml", "--out", "precious", "--dry_run"], "evaluate.k"),
    ("grpo", lambda w: [*RUN, "--model_name_or_path", "escaping_model"], "model_name_or_path"),
    ("evaluate", lambda w: [*EVAL, "--model", "escaping_model"], "--model"),
    ("grpo", lambda w: [*RESUME, "--output_dir", "precious/climbing_id"], "resume_from_checkpoint"),
    ("kernel_robustness", lambda w: ["--sets", "k4", "k4"], "--sets"),
    (
        "grpo",
        lambda w: [*RESUME, "--output_dir", "precious/planted"],
        "precious/planted/checkpoint-2/rng_state.pth",
    ),
    (
        "grpo",
        lambda w: [*RUN, "--resume_from_checkpoint", "precious/planted/checkpoint-2"],
        "precious/planted/checkpoint-2/rng_state.pth",
    ),
    ("evaluate", lambda w: [*EVAL, "--model", "planted_model"], "planted_model/pytorch_model.bin"),
    (
        "grpo",
        lambda w: [*RESUME, "--output_dir", "precious/best_elsewhere"],
        "precious/best_elsewhere/checkpoint-2/trainer_state.json",
    ),
    *[
        (command_, lambda w, kind=kind, argv=argv: [f"damaged/{kind}", *argv], "RUN_DIR")
        for kind in ("time_str", "eval_str", "overall_str", "fifo")
        for command_, argv in (("doctor", []), ("report", ["--out", "precious/r.md"]))
        if not (kind == "overall_str" and command_ == "doctor")  # the doctor reads no evaluation file
    ],
    ("doctor", lambda w: ["damaged/mode_int"], "RUN_DIR"),
    ("grpo", lambda w: [*RUN, "--model_name_or_path", "fifo_model"], "model_name_or_path"),
    ("grpo", lambda w: [*RESUME, "--output_dir", "precious/fifo_run_json"], "resume_from_checkpoint"),
    ("evaluate", lambda w: [*EVAL, "--temperature", "inf"], "--temperature"),
    ("main_job_range", lambda w: ["--settle", "nan"], "--settle"),
    ("main_job_range", lambda w: ["--settle", "-1"], "--settle"),
    ("speed", lambda w: ["--configs", FAST_RECIPE, "--rounds", "0"], "--rounds"),
    ("speed", lambda w: ["--configs", FAST_RECIPE, "--variants", "none", "warp_drive"], "--variants"),
    ("speed", lambda w: ["--configs", FAST_RECIPE, "--output", "afile.txt/speed.json"], "--output"),
    ("speed", lambda w: ["--configs", FAST_RECIPE, "--warmup", "4", "--max_steps", "4"], "--warmup"),
    ("kernel_robustness", lambda w: ["--sets", "k3", "k3"], "--sets"),
]
ROWS += NEW_ROWS + RUN_FOLDER_ROWS + LATE_ROWS + READ_BACK_ROWS + ESCAPE_ROWS


PLANTED = [row for row in ESCAPE_ROWS if "planted" in row[2]]


@pytest.mark.parametrize("name, argv, field", PLANTED, ids=[row[2] for row in PLANTED])
def test_a_planted_checkpoint_pickle_runs_nothing(name, argv, field, ws, capsys):
    """The pickles above would create `marker` when loaded: refused under weights_only before the model loads, the
    file never appears."""
    with pytest.raises(SystemExit):
        cli(command(name), argv(ws))
    assert capsys.readouterr().err.startswith(f"error: {field}: refused before the model loads")
    assert not (ws / "marker").exists()


@pytest.mark.parametrize(
    "name, problem",
    [
        ("/abs/path", "holds a path separator"),
        ("a/b", "holds a path separator"),
        ("a\\b", "holds a path separator"),
        ("..", "is `.` or `..`"),
        (".", "is `.` or `..`"),
        ("a\nb", "holds a control character"),
        ("a\0b", "holds a control character"),
        ("x" * 256, "is longer than 255 bytes"),
        ("", "must be a non-empty string"),
        (3, "must be a non-empty string"),
    ],
)
def test_a_name_is_one_entry_inside_its_folder(name, problem):
    """THE check every reader of a name from a file or a spec goes through (rows above: a sweep's name and labels,
    a weight index's shards, run.json's run id, jobs.json, a sweep summary's runs, best_model_checkpoint)."""
    from rlvr.inputs import ConfigError, name_inside

    with pytest.raises(ConfigError, match=f"^field: label .*{problem[:12]}"):
        name_inside("folder", name, "field", "label")
    assert name_inside("folder", "g-2_s1.0", "field") == Path("folder/g-2_s1.0")


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def row_id(row) -> str:
    values = row.values if hasattr(row, "values") else row
    return f"{values[0]}-{values[2]}"


def test_table_is_broad():
    assert len(ROWS) >= 60 and len(NEW_ROWS) >= 40 and len(RUN_FOLDER_ROWS) >= 15
    commands = {(row.values if hasattr(row, "values") else row)[0] for row in ROWS}
    assert commands >= {
        "grpo",
        "dapo",
        "ppo",
        "data",
        "plots",
        "report",
        "sweep",
        "evaluate",
        "before-after",
        "plan",
    }


@pytest.mark.parametrize("name, argv, field", ROWS, ids=[row_id(r) + ("-late" if r in LATE_ROWS else "") for r in ROWS])
def test_bad_input_is_one_named_line(name, argv, field, ws, capsys):
    before = snapshot(ws / "precious")
    args = argv(ws)
    with pytest.raises(SystemExit) as exit_info:
        cli(command(name), args)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_info.value.code == 2, err
    assert len(err) == 1 and err[0].startswith(f"error: {field}:"), err
    assert snapshot(ws / "precious") == before


@pytest.mark.parametrize(
    "argv, field",
    [
        (["recipes/grpo.py", "--config", FAST_RECIPE, "--num_generations", "0"], "num_generations"),
        (["recipes/grpo.py", "--output_dir", "/tmp/x"], "--config"),
        (["-m", "data.cli", "--config", FAST_RECIPE, "--output_dir", "/tmp/x", "--size", "0"], "--size"),
        (["-m", "rlvr.analysis.report", "/nonexistent", "--last_k", "0"], "--last_k"),
        (["benchmarks/tiny_main_job.py", "--num_samples", "0"], "--num_samples"),  # README's main command
    ],
)
def test_console_scripts_print_one_line(argv, field):
    result = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {field}:"), result.stderr


def test_yaml_aliases_are_counted_expanded_without_being_built(ws):
    """The alias bound counts what the aliases would expand to on the node graph (each node once), so a 10^10-value
    document is refused without building it, and an ordinary one is counted exactly."""
    from rlvr.inputs import MAX_YAML_VALUES, ConfigError, expanded_size, read_yaml

    # mapping 1 + key a 1 + [1, 2] 3 + key b 1 + [*a, *a] (1 + 3 + 3) = 13
    assert expanded_size(yaml.compose("a: &a [1, 2]\nb: [*a, *a]\n")) == 13
    assert expanded_size(yaml.compose((ws / "bomb.yaml").read_text())) == MAX_YAML_VALUES + 1
    assert expanded_size(yaml.compose("a: &a [1, *a]\n")) == MAX_YAML_VALUES + 1  # an alias inside its own anchor
    with pytest.raises(ConfigError, match=r"^--config: bomb.yaml expands to more than 100000 values"):
        read_yaml("bomb.yaml", "--config")
    assert read_yaml(FAST_RECIPE, "--config") == yaml.safe_load(Path(FAST_RECIPE).read_text())


class RunsCode:
    """A pickle that creates a file when it is loaded: what a hostile training_args.bin does."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


@pytest.mark.parametrize("kind", ["garbage", "a dict", "runs code", "an unknown class"])
def test_training_args_that_cannot_be_read_safely_are_named_and_skipped(tmp_path, kind, capsys):
    """training_args.bin is a pickle: doctor (plain TRL) and report (its config section) read it without running
    anything; one that is damaged or holds anything but a trainer's arguments is named in one line, and they go on."""
    import torch

    from rlvr.analysis import doctor, report

    marker = tmp_path / "marker"
    trl_run, our_run = tmp_path / "trl" / "checkpoint-2", tmp_path / "ours"
    trl_run.mkdir(parents=True)
    rows = [{"step": s, "loss": 0.1, "reward": 0.5, "grad_norm": 0.3} for s in (1, 2)]
    (trl_run / "trainer_state.json").write_text(__import__("json").dumps({"log_history": rows}))
    our_run.mkdir()
    (our_run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5, "avg_correctness": 0.1, "generated_samples": 8}\n')
    (our_run / "config.yaml").write_text("learning_rate: 0.001\n")
    for folder in (trl_run, our_run):
        path = folder / "training_args.bin"
        if kind == "garbage":
            path.write_bytes(bytes(range(256)))
        else:
            torch.save(
                {"a dict": {"learning_rate": 1}, "runs code": RunsCode(marker), "an unknown class": RunsCode}[kind],
                path,
            )
    diagnosis = doctor.diagnose(tmp_path / "trl")
    assert len(diagnosis.unread) == 1 and diagnosis.unread[0].startswith(f"{trl_run / 'training_args.bin'} not read")
    assert diagnosis.settings == {} and "settings not read: " in diagnosis.text()
    assert cli(report.main, [str(our_run), "--out", str(tmp_path / "r.md")]) == tmp_path / "r.md"
    page = (tmp_path / "r.md").read_text()
    assert f"learning_rate: 0.001\n# {our_run / 'training_args.bin'} not read" in page
    assert not marker.exists()


def documented_scripts() -> list[str]:
    """Every `python <script>.py` README or docs/ tell a user to run."""
    import re

    text = "\n".join(path.read_text() for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    return sorted(set(re.findall(r"python ((?:benchmarks|recipes|slurm|examples)/[\w/]+\.py)", text)))


# The recipe scripts are `rlvr.training.runner.run` (rows above); the plain-TRL example shows TRL's own parser.
NOT_THROUGH_CLI = {"examples/plain_trl_grpo.py": "a plain TRL script: transformers' HfArgumentParser, by design"}
REQUIRED_FLAGS = {
    "slurm/render.py": ["--recipe", "recipes/tiny/grpo.yaml"],  # argparse names a missing one first
    "recipes/tiny/sft.py": ["--config", "recipes/tiny/sft.yaml"],
    "benchmarks/bf16_updates.py": ["probe"],
}  # as the docs run it


@pytest.mark.parametrize("script", [s for s in documented_scripts() if s not in NOT_THROUGH_CLI])
def test_every_documented_script_takes_flags_through_cli(script, monkeypatch, capsys):
    """A misspelled flag is one `error:` line and exit 2 (not argparse's usage dump), before the script does anything:
    each script's `__main__` runs its `main` under `cli()` (or the recipe runner, which does), and `main` refuses it."""
    import importlib.util

    source = (REPO / script).read_text()
    entry = source[source.index('if __name__ == "__main__":') :]
    if script.startswith("recipes/") and script.count("/") == 1:
        assert "run(" in entry  # rlvr.training.runner.run: cli() inside, rows above
        return
    assert "cli(main" in entry, entry
    spec = importlib.util.spec_from_file_location(f"documented_{Path(script).stem}", REPO / script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    monkeypatch.chdir(REPO)  # the scripts' default paths are relative to the repository
    with pytest.raises(SystemExit) as stop:
        cli(module.main, [*REQUIRED_FLAGS.get(script, []), "--no_such_flag", "1"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert stop.value.code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(("error: --no_such_flag:", "error: no_such_flag:")), lines


def test_a_commands_help_states_its_first_paragraph_whole():
    """`--help` opens with the module docstring's first paragraph on one line, not its first line cut mid-sentence."""
    from rlvr.inputs import ArgumentParser

    doc = (
        "The judge: how many samples a recipe needs before its policy first\nscores 60%.\n\n    rlvr judge --config x\n"
    )
    assert (
        ArgumentParser(description=doc).description
        == "The judge: how many samples a recipe needs before its policy first scores 60%."
    )
    assert ArgumentParser(description=None).description is None


def test_a_trl_log_at_step_0_is_diagnosed_not_divided_by(tmp_path, capsys):
    """A plain TRL log whose only training row is at step 0 (logged before the first optimizer step): the compute
    bill has no steps to divide by and says nothing per step; the doctor ends normally."""
    import json

    from rlvr.analysis import doctor

    rows = [{"step": 0, "loss": 0.1, "reward": 0.5, "grad_norm": 0.3, "step_time": 2.0}]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": rows}))
    assert cli(doctor.main, [str(tmp_path)]) in (0, 1)
    assert "s/step over 0 steps" not in capsys.readouterr().out
