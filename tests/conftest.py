"""Offline, CPU-only test setup: no Hub, no wandb login, one tiny random model built once per test session."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TINY_RECIPE = str(REPO / "recipes" / "tiny" / "grpo.yaml")  # the main job (README's command)
FAST_RECIPE = str(REPO / "tests" / "recipes" / "tiny_grpo_fast.yaml")  # 16 samples per step, for quick checks


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    from rlvr.recipes.tiny.model import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-model")))


@pytest.fixture
def run_recipe(tiny_model_dir, tmp_path):
    """Run a recipe in-process on the random tiny model; returns (trainer, output_dir)."""
    from rlvr.training.runner import main

    def _run(*overrides, recipe=FAST_RECIPE, output_dir=None, algorithm=None):
        output_dir = str(output_dir or tmp_path / "run")
        argv = [
            "--config", recipe, "--output_dir", output_dir, "--model_name_or_path", tiny_model_dir,
            "--report_to", "none", "--print_rollouts", "false", *overrides,
        ]
        return main(argv, algorithm=algorithm), output_dir

    return _run


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]

