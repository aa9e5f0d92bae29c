"""The recipe end to end on a tiny random model: metrics on disk, weights move by finite updates, resume, entry point,
bad input."""

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FAST_RECIPE, REPO, TINY_RECIPE, read_jsonl, run_ok

from rlvr.inputs import ConfigError
from rlvr.metrics.reward_batch import zero_std_fraction
from rlvr.runs import tools
from rlvr.training.config import load_recipe_yaml
from rlvr.training.runner import main

COMPONENTS = ("total", "correctness", "format", "penalty", "binary")
REQUIRED_KEYS = (
    [f"avg_{c}" for c in COMPONENTS]
    + [f"zero_std_frac/{c}" for c in COMPONENTS]
    + ["step", "generation_step", "generated_samples", "generated_tokens", "time/generation_s", "time/optimization_s"]
)


def train_rows(path):
    return [row for row in read_jsonl(path) if "loss" in row]


def test_tiny_run_logs_every_component_and_changes_the_weights(run_recipe, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    trainer, out = run_recipe("--max_steps", "3")
    rows = train_rows(Path(out) / "metrics.jsonl")
    assert [row["step"] for row in rows] == [1, 2, 3]
    for row in rows:
        assert all(key in row for key in REQUIRED_KEYS), sorted(set(REQUIRED_KEYS) - set(row))
        # TRL's own under group scaling, whose isclose(std, 0) misses some flat groups (0.2 x G): ours is exact.
        assert row["zero_std_frac/total"] >= row["trl/frac_reward_zero_std_isclose"] - 1e-9
        assert row["avg_total"] == pytest.approx(row["avg_correctness"] + 0.5 * row["avg_format"] + row["avg_penalty"])
    assert [row["generated_samples"] for row in rows] == [16, 32, 48]
    # metrics.jsonl writes a NaN or inf as null
    assert all(row[key] is not None and math.isfinite(row[key]) for row in rows for key in ("loss", "grad_norm"))
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    trained = trainer.model.state_dict()
    assert all(torch.isfinite(trained[name]).all() for name in initial)  # a NaN update changes weights too
    assert any(not torch.equal(initial[name], trained[name]) for name in initial)
    rollouts = read_jsonl(Path(out) / "rollouts.jsonl")
    assert len(rollouts) == 48 and {"question", "answer", "completion", "correctness", "binary"} <= set(rollouts[0])


def test_zero_std_stays_per_group_under_batch_scaling(run_recipe):
    """TRL's frac_reward_zero_std becomes 0 or 1 under scale_rewards=batch; ours is still the per-group fraction."""
    _, out = run_recipe("--max_steps", "2", "--scale_rewards", "batch", "--num_generations", "2")
    rows, rollouts = train_rows(Path(out) / "metrics.jsonl"), read_jsonl(Path(out) / "rollouts.jsonl")
    for row, step in zip(rows, (1, 2)):
        totals = torch.tensor([r["total"] for r in rollouts if r["step"] == step])
        assert row["zero_std_frac/total"] == pytest.approx(zero_std_fraction(totals, 2))
        assert row["trl/frac_reward_zero_std_isclose"] in (0.0, 1.0)


def test_resume_appends_without_duplicating_or_losing_rows(run_recipe, tmp_path):
    out = tmp_path / "resumable"
    run_recipe("--max_steps", "3", "--save_strategy", "steps", "--save_steps", "2", output_dir=out)
    assert (out / "checkpoint-2").is_dir()
    # As if the run died after logging step 3 but before saving it: resuming from checkpoint-2 must replace
    # row 3, not repeat it.
    shutil.rmtree(out / "checkpoint-3")
    # Extending max_steps stretches the lr schedule: a change to what is optimised, so it takes the explicit flag.
    run_recipe(
        "--max_steps",
        "4",
        "--save_strategy",
        "steps",
        "--save_steps",
        "2",
        "--resume_from_checkpoint",
        "true",
        "--allow_recipe_change",
        "true",
        output_dir=out,
    )
    rows = train_rows(out / "metrics.jsonl")
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    assert [row["generation_step"] for row in rows] == [1, 2, 3, 4]  # the ledger came back from the checkpoint
    assert rows[-1]["generated_samples"] == 64


def test_accelerate_launch_entry_point(tmp_path):
    out = tmp_path / "launched"
    launch = [*tools.command("accelerate launch"), "--num_processes", "1", "--cpu", "recipes/grpo.py"]
    result = run_ok(
        [*launch, "--config", TINY_RECIPE, "--output_dir", str(out), "--max_steps", "4", "--report_to", "none"]
    )
    rows = train_rows(out / "metrics.jsonl")
    assert len(rows) == 4 and all(key in rows[0] for key in REQUIRED_KEYS)
    # piped, as into a log: the step line and the rollout panel at the recipe's cadence (console_steps 10, eval_steps
    # 10: the first and the last step here), no progress bar redrawing itself, no cursor moves
    steps = [line.split(" | ")[0] for line in result.stdout.splitlines() if line.startswith("step ")]
    assert steps == ["step 1/4", "step 4/4"]
    assert result.stdout.count("── rollout") == 2
    assert "\x1b[" not in result.stdout + result.stderr and "\r" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "overrides, field",
    [
        (["--reward_funcs", "correctness", "bogus"], "reward_funcs[1]"),
        (["--reward_weights", "1.0"], "reward_weights"),
        (["--generation_batch_size", "18", "--per_device_train_batch_size", "18"], "generation_batch_size"),
        (
            ["--data", '{"specs": [{"name": "spell_backward", "config": {"min_word_len": 8, "max_word_len": 3}}]}'],
            "data.specs[0].config",
        ),
        (["--data", '{"specs": [{"name": "spel_backward"}]}'], "data.specs[0].name"),
        (["--overlong_max_length", "999", "--overlong_cache_length", "10"], "overlong_max_length"),
        (["--learning_rate", "fast"], "learning_rate"),
        (["--no_such_field", "1"], "no_such_field"),
    ],
)
def test_bad_input_names_the_field_before_any_model_loads(overrides, field, tmp_path):
    missing_model = str(tmp_path / "no-model-here")  # loading a model would fail differently
    argv = [
        "--config",
        FAST_RECIPE,
        "--model_name_or_path",
        missing_model,
        "--build_tiny_model",
        "false",
        "--output_dir",
        str(tmp_path / "o"),
        *overrides,
    ]
    with pytest.raises(ConfigError) as err:
        main(argv)
    assert err.value.field == field and "\n" not in str(err.value)
    assert not (tmp_path / "o").exists()


def test_malformed_yaml_key_exits_with_one_line(tmp_path):
    config = tmp_path / "typo.yaml"
    config.write_text(Path(FAST_RECIPE).read_text() + "learnin_rate: 0.1\n")
    result = subprocess.run(
        [sys.executable, "recipes/grpo.py", "--config", str(config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip().splitlines()[-1]
        == f"error: learnin_rate: unknown config field in {config}; did you mean 'learning_rate'?"
    )
    assert "Traceback" not in result.stderr


RL_RECIPES = sorted(
    str(p.relative_to(REPO)) for p in (REPO / "recipes").rglob("*.yaml") if not p.name.startswith("sft")
)  # sft*.yaml: recipes/tiny/sft.py's, not RL recipes


def test_every_rl_recipe_is_covered():
    from rlvr.training.algorithms import ALGORITHMS

    for name in ALGORITHMS:  # every algorithm has a full-size recipe, a tiny one and its own script
        assert {f"recipes/{name}.yaml", f"recipes/tiny/{name}.yaml"} <= set(RL_RECIPES), name
        assert (REPO / "recipes" / f"{name}.py").is_file(), name


@pytest.mark.parametrize("recipe", RL_RECIPES)
def test_every_recipe_yaml_validates_without_loading_a_model(recipe, capsys):
    """Parsed and validated by its own algorithm's script path (recipes/<algorithm>.py), with no model download."""
    argv = ["--config", str(REPO / recipe), "--dry_run", "true", "--use_cpu", "true"]
    assert main(argv, algorithm=load_recipe_yaml(REPO / recipe).get("algorithm", "grpo")) is None
    assert "[plan]" in capsys.readouterr().out


@pytest.mark.parametrize("recipe", sorted(r for r in RL_RECIPES if r.startswith("recipes/tiny/")))
def test_tiny_variant_of_each_algorithm_runs_two_steps(recipe, run_recipe):
    _trainer, out = run_recipe("--max_steps", "2", recipe=str(REPO / recipe))
    rows = train_rows(Path(out) / "metrics.jsonl")
    assert [row["step"] for row in rows] == [1, 2]
    assert all(key in rows[0] for key in REQUIRED_KEYS)
    if "dapo" in recipe:
        assert "dapo/oversampling" in rows[0] or rows[0]["dapo/groups_kept"] == 0


def test_wandb_without_login_goes_offline_and_says_so(monkeypatch, tmp_path, capsys):
    from rlvr.runs.tracking import configure_wandb

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    assert configure_wandb(["wandb"]) is not None
    assert configure_wandb(["wandb"]) is None  # said once
    import os

    assert os.environ["WANDB_MODE"] == "offline"
    assert capsys.readouterr().out.count("wandb:") == 1
    assert configure_wandb(["none"]) is None
