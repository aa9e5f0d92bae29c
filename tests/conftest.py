"""Offline, CPU-only test setup: no Hub, no wandb login, one tiny random model built once per test session."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pin_xdist_worker() -> None:
    """Under `pytest -n N`, worker i keeps every N-th core of this machine, as `rlvr sweep --jobs N` pins its runs:
    torch, `cpu_threads: auto` and every process a test starts then use that share, instead of N workers each
    spinning one OpenMP thread per core on the same cores (on 2 cores that made a 2-step run ~10x slower)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if worker.startswith("gw") and 1 < count <= len(cores):
        os.sched_setaffinity(0, cores[int(worker[2:]) % count :: count])


pin_xdist_worker()

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

REPO = Path(__file__).resolve().parents[1]
TINY_RECIPE = str(REPO / "recipes" / "tiny" / "grpo.yaml")  # the main job (README's command)
FAST_RECIPE = str(REPO / "tests" / "recipes" / "tiny_grpo_fast.yaml")  # 16 samples per step, for quick checks

# Small random decoders of each family the written-out speed-ups accept (tests/test_prefix_attention.py,
# tests/test_gqa_attention.py)
SMALL = {
    "vocab_size": 61,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "pad_token_id": 60,
    "eos_token_id": 59,
}
FAMILIES = {
    "qwen3": lambda: Qwen3Config(**SMALL, head_dim=8),  # q/k norms, no biases
    "qwen2": lambda: Qwen2Config(**SMALL),  # q/k/v biases, no norms
    "llama": lambda: LlamaConfig(**SMALL, head_dim=8, attention_bias=True, mlp_bias=True),  # every bias
}


def small_model(family: str, seed: int = 0):
    """A random 2-layer model of `family` (4 query heads over 2 key/value heads), sdpa attention, in eval mode."""
    torch.manual_seed(seed)
    config = FAMILIES[family]()
    config._attn_implementation = "sdpa"
    return AutoModelForCausalLM.from_config(config).eval()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    from rlvr.recipes.tiny.model import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-model")))


def run_args(output_dir, model: str, *extra: str, recipe: str = FAST_RECIPE) -> list[str]:
    """A test run's flags: the recipe, its folder and model, no trackers and no rollout panel, then `extra`."""
    return [
        "--config",
        recipe,
        "--output_dir",
        str(output_dir),
        "--model_name_or_path",
        model,
        "--report_to",
        "none",
        "--print_rollouts",
        "false",
        *extra,
    ]


def saving_every(steps: int) -> list[str]:
    """Flags of a short run (16-token completions) that saves a checkpoint every `steps` steps."""
    return ["--max_completion_length", "16", "--save_strategy", "steps", "--save_steps", str(steps)]


# torchrun, two processes on this machine; and the environment a test's subprocess runs the checkout in
TORCHRUN_TWO = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
CHECKOUT_ENV = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}


def run_ok(command: list[str], env: dict | None = None, timeout: float = 600, cwd=REPO) -> subprocess.CompletedProcess:
    """`command` as a subprocess (from the repository root, its output captured), which must exit 0: the failure
    shows the end of what it printed."""
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def write_spec(folder: Path, name: str = "demo", **fields) -> str:
    """A sweep spec over the fast recipe, `<folder>/<name>.yaml`, with `fields` (vary, labels, fixed, ...)."""
    import yaml

    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "base": FAST_RECIPE, **fields}, sort_keys=False))
    return str(path)


def printed_json(stdout: str, marker: str):
    """The JSON a subprocess printed on the line that starts with `marker`."""
    return json.loads(stdout.split(marker, 1)[1].splitlines()[0])


@pytest.fixture
def run_recipe(tiny_model_dir, tmp_path):
    """Run a recipe in-process on the random tiny model; returns (trainer, output_dir)."""
    from rlvr.training.runner import main

    def _run(*overrides, recipe=FAST_RECIPE, output_dir=None, algorithm=None):
        output_dir = str(output_dir or tmp_path / "run")
        return main(run_args(output_dir, tiny_model_dir, *overrides, recipe=recipe), algorithm=algorithm), output_dir

    return _run


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def newcomer_shell(folder: Path, command: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`command` typed in the shell README's quickstart leaves a newcomer in: PATH holding only the interpreter and
    /usr/bin:/bin (nothing installed by hand is found), then `. .venv/bin/activate` (README's line) in `folder`,
    whose `.venv` is this test run's environment. No PYTHONPATH, no active environment inherited."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("README's front door enters .venv: run the tests from the environment `make test` creates")
    bin_dir = folder / ".newcomer-bin"
    if not bin_dir.exists():
        bin_dir.mkdir()
        (bin_dir / "python3").symlink_to(os.path.realpath(sys.executable))
    if not (folder / ".venv").exists():
        (folder / ".venv").symlink_to(sys.prefix)
    drop = {"PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONHOME"}
    env = {key: value for key, value in os.environ.items() if key not in drop}
    env.update(PATH=f"{bin_dir}:/usr/bin:/bin", HF_HUB_OFFLINE="1", WANDB_MODE="disabled")
    return subprocess.run(
        ["bash", "-c", f". .venv/bin/activate && {command}"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
