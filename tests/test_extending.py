"""The "Extending" recipes of docs/rewards-and-extending.md, each done here with a throwaway piece that must reach
the records and the plots: a reward (a function + a YAML line), an advantage-only algorithm (a function + a registry
line + a `base:` YAML) and a per-step metric (one decorated function). Plus the `base:` inheritance they rely on."""

from pathlib import Path

import pytest
import torch
from conftest import FAST_RECIPE, REPO, read_jsonl

from rlvr.analysis.evaluate import evaluate
from rlvr.analysis.loaders import load_runs, reward_series, step_metric_series, zero_std_series
from rlvr.analysis.plots import plot_runs
from rlvr.analysis.summaries import summarize
from rlvr.inputs import ConfigError, load_recipe_yaml
from rlvr.metrics.readings import RewardReadings
from rlvr.training import algorithms
from rlvr.training.runner import main, prepare

STEPS = ["--max_steps", "2", "--report_to", "none", "--print_rollouts", "false"]


def recipe_file(tmp_path, body: str) -> str:
    path = tmp_path / "my_recipe.yaml"
    path.write_text(f"base: {FAST_RECIPE}\n{body}")
    return str(path)


def run_two_steps(tmp_path, tiny_model_dir, recipe, *extra):
    out = tmp_path / "run"
    main(["--config", recipe, "--model_name_or_path", tiny_model_dir, "--output_dir", str(out), *STEPS, *extra])
    return out


def small_evaluation(config: str, model: Path, tmp_path: Path) -> dict:
    """`rlvr evaluate` of a trained run on 2 held-out prompts x 2 samples."""
    return evaluate(
        config,
        model_path=str(model),
        num_prompts=2,
        num_samples=2,
        ks=(1, 2),
        output=str(tmp_path / "eval.json"),
        show_progress=False,
    )


def test_a_dotted_path_reward_reaches_metrics_rollouts_plots_and_summary(tmp_path, tiny_model_dir, monkeypatch):
    (tmp_path / "my_rewards.py").write_text(
        "def brevity(completions, **kwargs):\n    return [1.0 / (1 + len(str(c))) for c in completions]\n"
    )
    monkeypatch.chdir(tmp_path)  # a dotted path resolves from the launch directory, as with TRL's script
    recipe = recipe_file(
        tmp_path, "reward_funcs: [correctness, format, my_rewards.brevity]\nreward_weights: [1.0, 0.5, 0.1]\n"
    )
    out = run_two_steps(tmp_path, tiny_model_dir, recipe)

    rows = [row for row in read_jsonl(out / "metrics.jsonl") if "loss" in row]
    assert all("avg_brevity" in row and "zero_std_frac/brevity" in row for row in rows)
    assert all("brevity" in record for record in read_jsonl(out / "rollouts.jsonl"))
    runs = load_runs([out])
    assert "brevity" in runs[0].components
    assert "avg_brevity" in reward_series(runs) and "zero_std_frac/brevity" in zero_std_series(runs)
    assert summarize(runs)[0]["final_brevity"] is not None
    assert (tmp_path / "plots" / "rewards_by_samples.png") in plot_runs(runs, tmp_path / "plots")
    held_out = small_evaluation(str(out / "config.yaml"), out, tmp_path)
    assert "mean_brevity" in held_out["overall"] and "mean_total" in held_out["overall"]


def sign_advantage(rewards, num_generations):
    """A throwaway estimator: only the sign of r - group mean."""
    grouped = rewards.view(-1, num_generations)
    return torch.sign(grouped - grouped.mean(dim=1, keepdim=True)).view(-1)


def test_an_advantage_only_algorithm_is_a_function_a_registry_line_and_a_base_yaml(
    tmp_path, tiny_model_dir, monkeypatch
):
    registry = dict(algorithms.ALGORITHMS)
    registry["sign"] = algorithms.Algorithm(
        "sign", "sign of r - mean", advantage=sign_advantage, ratio=False
    )  # the line
    monkeypatch.setattr(algorithms, "ALGORITHMS", registry)
    recipe = recipe_file(tmp_path, "algorithm: sign\n")

    argv = [
        "--config",
        recipe,
        "--model_name_or_path",
        tiny_model_dir,
        "--output_dir",
        str(tmp_path / "o"),
        *STEPS,
        "--generation_batch_size",
        "8",
        "--per_device_train_batch_size",
        "8",
    ]
    _, trainer, _ = prepare(argv)  # what recipes/train.py runs: the YAML's algorithm picks the trainer
    trainer.model.train()
    scripted = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.5, 1.0, 0.0]] * 2)  # + success
    monkeypatch.setattr(
        RewardReadings, "column_values", lambda readings, index, func, kwargs: scripted[:, index].tolist()
    )
    batch = [trainer.train_dataset[i] for i in range(2) for _ in range(4)]
    advantages = trainer._generate_and_score_completions(batch)["advantages"]
    assert advantages.tolist() == [1.0, -1.0, -1.0, 1.0] * 2  # totals 1.5, .5, .5, 1 around a mean of .875
    with pytest.raises(ConfigError) as err:  # another algorithm's script refuses the recipe in one line
        main(argv, algorithm="grpo")
    assert err.value.field == "algorithm" and "recipes/train.py" in err.value.message

    monkeypatch.undo()  # real rewards again, and the throwaway algorithm stays registered for the run
    monkeypatch.setattr(algorithms, "ALGORITHMS", registry)
    out = run_two_steps(tmp_path, tiny_model_dir, recipe)
    assert [row["step"] for row in read_jsonl(out / "metrics.jsonl") if "loss" in row] == [1, 2]
    assert load_recipe_yaml(out / "config.yaml")["algorithm"] == "sign"


def test_a_per_step_metric_is_one_decorated_function(tmp_path, tiny_model_dir, monkeypatch):
    from rlvr.metrics import step_metrics

    monkeypatch.setattr(step_metrics, "STEP_METRICS", dict(step_metrics.STEP_METRICS))

    @step_metrics.step_metric
    def tied_groups(batch):  # the throwaway metric: groups whose G completions are all the same text
        texts = [batch.completions[i : i + batch.num_generations] for i in range(0, batch.size, batch.num_generations)]
        return sum(len(set(group)) == 1 for group in texts)

    out = run_two_steps(tmp_path, tiny_model_dir, FAST_RECIPE)
    rows = [row for row in read_jsonl(out / "metrics.jsonl") if "loss" in row]
    assert all("step/tied_groups" in row for row in rows)
    assert all("step/completion_tokens/wrong" in row for row in rows)  # the built-in one
    runs = load_runs([out])
    assert "step/tied_groups" in step_metric_series(runs)
    assert (tmp_path / "plots" / "step_metrics_by_step.png") in plot_runs(runs, tmp_path / "plots")
    held_out = small_evaluation(FAST_RECIPE, out, tmp_path)
    assert "step/tied_groups" in held_out["step_metrics"]


def test_base_yaml_inherits_merges_mappings_and_refuses_cycles(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text(f"base: {REPO / 'recipes' / 'tiny' / 'grpo.yaml'}\nlearning_rate: 1.0e-3\ndata: {{size: 100}}\n")
    merged = load_recipe_yaml(child)
    assert merged["learning_rate"] == 1.0e-3 and merged["num_generations"] == 8
    assert merged["data"]["size"] == 100 and merged["data"]["specs"][0]["name"] == "spell_backward"  # deep merge
    assert load_recipe_yaml(REPO / "recipes" / "tiny" / "dapo.yaml")["model_name_or_path"] == "models/tiny-speller"
    loop_a, loop_b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    loop_a.write_text("base: b.yaml\n")
    loop_b.write_text("base: a.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_recipe_yaml(loop_a)
    assert err.value.field == "base"
    (tmp_path / "missing.yaml").write_text("base: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="no such recipe file"):
        load_recipe_yaml(tmp_path / "missing.yaml")


def test_every_algorithm_script_is_two_lines_over_the_runner():
    for name in algorithms.ALGORITHMS:
        code = [
            line for line in (REPO / "recipes" / f"{name}.py").read_text().split('"""')[-1].splitlines() if line.strip()
        ]
        assert code == ["from rlvr.training.runner import run", 'if __name__ == "__main__":', f'    run("{name}")'], (
            name
        )
    assert Path(REPO / "recipes" / "train.py").is_file()
