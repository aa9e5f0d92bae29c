"""Scale-out on CPU: the accelerate configs load the way `accelerate launch` reads them, and a 2-process run (torchrun,
gloo) computes the group statistics over whole prompt groups even when a group straddles the two processes."""

from pathlib import Path

import pytest
import torch
from conftest import CHECKOUT_ENV, REPO, TORCHRUN_TWO, read_jsonl, run_args, run_ok

from rlvr.metrics.reward_batch import group_summary, reward_components

CONFIGS = REPO / "accelerate_configs"


def launch_args(config: str, *extra: str):
    """The arguments `accelerate launch --config_file <config>` resolves, before it starts any process."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    argv = ["--config_file", str(CONFIGS / config), *extra, "recipes/grpo.py", "--config", "recipes/grpo.yaml"]
    return _validate_launch_command(launch_command_parser().parse_args(argv))


@pytest.mark.parametrize("config, stage", [("zero2.yaml", 2), ("zero3.yaml", 3)])
def test_zero_configs_reach_deepspeed_as_accelerate_launch_passes_them(config, stage, monkeypatch):
    pytest.importorskip("deepspeed")
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    from rlvr.training.config import load_recipe

    args, defaults, mixed_precision_from_config = launch_args(config, "--num_processes", "2")
    assert args.use_deepspeed and args.num_processes == 2 and args.mixed_precision == "bf16"
    # accelerate's launch_command does this before deepspeed_launcher (accelerate 1.15)
    fields = list(defaults.deepspeed_config) + (["mixed_precision"] if mixed_precision_from_config else [])
    args.deepspeed_fields_from_accelerate_config = ",".join(fields)
    _, env = prepare_deepspeed_cmd_env(args)
    for key, value in env.items():
        if key.startswith("ACCELERATE_"):
            monkeypatch.setenv(key, value)

    plugin = DeepSpeedPlugin()  # what the launched process builds from that environment
    assert plugin.zero_stage == stage
    assert plugin.deepspeed_config["zero_optimization"]["offload_optimizer"]["device"] == "none"
    # The Trainer fills DeepSpeed's "auto" fields from the recipe's batch settings
    training = load_recipe(["--config", str(REPO / "recipes/grpo.yaml"), "--use_cpu", "true"]).training
    ds = HfTrainerDeepSpeedConfig({**plugin.deepspeed_config, "bf16": {"enabled": "auto"}})
    ds.trainer_config_process(training)
    assert ds.config["train_micro_batch_size_per_gpu"] == training.per_device_train_batch_size
    assert ds.config["gradient_accumulation_steps"] == training.gradient_accumulation_steps
    assert ds.config["gradient_clipping"] == training.max_grad_norm and ds.config["bf16"]["enabled"] is True

    from rlvr.planning import zero_stage_of

    assert zero_stage_of(training) == stage  # the planner's pre-flight check sees the same stage


def test_single_multi_and_cpu_configs():
    single, _, _ = launch_args("single_gpu.yaml")
    assert not (single.multi_gpu or single.use_deepspeed) and single.num_processes == 1
    multi, _, _ = launch_args("multi_gpu.yaml", "--num_processes", "4")
    assert multi.multi_gpu and multi.num_processes == 4 and multi.mixed_precision == "bf16"
    cpu, _, _ = launch_args("cpu.yaml")
    assert cpu.use_cpu and cpu.num_processes == 1 and cpu.mixed_precision == "no"


# --- 2 processes vs 1 -----------------------------------------------------------------------------------------------

G, PER_DEVICE, GENERATION_BATCH = 4, 6, 12  # 3 prompts per step; each process holds 6 rows, so group 1 straddles
COMMON = [
    "--max_steps",
    "2",
    "--num_generations",
    str(G),
    "--generation_batch_size",
    str(GENERATION_BATCH),
    "--per_device_train_batch_size",
    str(PER_DEVICE),
    "--max_completion_length",
    "32",
    "--seed",
    "42",
    "--use_cpu",
    "true",
    "--logging_steps",
    "1",
]


def recomputed(rollouts: list[dict], step: int, names=("correctness", "format"), weights=(1.0, 0.5)) -> dict:
    """The group statistics of one generation step, recomputed in this single process from the logged rollouts."""
    rows = [r for r in rollouts if r["step"] == step]
    rewards = torch.tensor([[r[name] for name in names] for r in rows], dtype=torch.float32)
    return group_summary(reward_components(rewards, list(names), torch.tensor(weights)), G)


def check_run(output_dir: Path) -> tuple[list[dict], list[dict]]:
    """Every step: our gathered statistics equal TRL's own and a single-process recomputation from the rollouts.
    (Two independent 1-process runs writing the same folder would fail the row counts.)"""
    rows = [row for row in read_jsonl(output_dir / "metrics.jsonl") if "loss" in row]
    rollouts = read_jsonl(output_dir / "rollouts.jsonl")
    assert [row["step"] for row in rows] == [1, 2] and len(rollouts) == 2 * GENERATION_BATCH
    for step, row in enumerate(rows, start=1):
        # Ours is exact; TRL's isclose(std, 0) misses some flat groups (0.2 x G), so it can only read lower.
        assert row["zero_std_frac/total"] >= row["trl/frac_reward_zero_std_isclose"] - 1e-9
        assert row["avg_total"] == pytest.approx(row["reward"])
        for key, value in recomputed(rollouts, step).items():
            assert row[key] == pytest.approx(value, nan_ok=True), key
    return rows, rollouts


@pytest.mark.serial
def test_two_processes_gather_whole_groups(run_recipe, tiny_model_dir, tmp_path):
    """Sampling is seeded per process (TRL's set_seed(seed, device_specific=True)), so 1 and 2 processes draw different
    completions from the same prompts: the runs agree on the prompts of every generation batch, and each agrees with
    a single-process computation over its own gathered completions."""
    assert PER_DEVICE % G != 0  # a prompt group is split between rank 0 and rank 1
    one = tmp_path / "one"
    run_recipe(*COMMON, "--gradient_accumulation_steps", "2", output_dir=one)  # 2 x 6 = the 12 rows of a step

    two = tmp_path / "two"
    command = [*TORCHRUN_TWO, "recipes/grpo.py", *run_args(two, tiny_model_dir, *COMMON)]
    run_ok([*command, "--gradient_accumulation_steps", "1"], env={**CHECKOUT_ENV, "OMP_NUM_THREADS": "1"})

    _, rollouts_one = check_run(one)
    _, rollouts_two = check_run(two)
    assert [r["question"] for r in rollouts_one] == [r["question"] for r in rollouts_two]
    # The test has power only if a straddling group has rewards that differ between its two halves at some step.
    straddling = [[r["total"] for r in rollouts_two if r["step"] == step and r["group"] == 1] for step in (1, 2)]
    assert any(len(set(group)) > 1 for group in straddling), "no straddling group had reward variance; change seed"
