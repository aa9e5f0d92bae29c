"""Sweeps: spec checks name the field, variants are planned as base <- fixed <- CLI <- varied value, runs land in
<out>/<name>/<label>/, finished runs are skipped, and the sweep ends with the summary and overlaid plots."""

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import FAST_RECIPE, REPO, read_jsonl, write_spec

from rlvr.analysis.shared_runs import evaluation_of, find_shared_run, run_identity
from rlvr.analysis.sweep import main, parse_overrides, run_sweep
from rlvr.analysis.sweep_spec import load_spec, plan
from rlvr.inputs import ConfigError


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"varry": {"temperature": [1.0]}}, "varry", "did you mean 'vary'"),
        ({}, "vary", "exactly one field"),
        ({"vary": {"temperature": [0.5], "top_p": [0.9]}}, "vary", "exactly one field"),
        ({"vary": {"temperature": []}}, "vary.temperature", "non-empty list"),
        ({"vary": {"temperature": [1.0]}, "base": "nope.yaml"}, "base", "no such recipe file"),
        ({"vary": {"recipe": [FAST_RECIPE, "nope.yaml"]}, "base": None}, "vary.recipe", "no such recipe file"),
        ({"vary": {"temperature": [1.0]}, "labels": ["a", "b"]}, "labels", "one label per value"),
        ({"vary": {"temperature": [1.0]}, "fixed": {"temperature": 0.5}}, "fixed.temperature", "is the varied field"),
        (
            {"vary": {"temperature": [1.0]}, "samples_budget": 64, "fixed": {"max_steps": 2}},
            "samples_budget",
            "not both",
        ),
    ],
)
def test_bad_spec_fields_are_named(tmp_path, fields, field, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_spec(write_spec(tmp_path, **fields))
    assert err.value.field == field


def test_plan_layers_base_fixed_cli_and_varied_value(tmp_path):
    spec = load_spec(
        write_spec(
            tmp_path, vary={"data.specs.0.config.max_word_len": [4, 5]}, fixed={"max_steps": 7, "temperature": 0.7}
        )
    )
    variants = plan(spec, tmp_path / "out", {"temperature": 0.9, "data.size": 300})
    assert [v.label for v in variants] == ["max_word_len-4", "max_word_len-5"]
    assert [v.config["data"]["specs"][0]["config"]["max_word_len"] for v in variants] == [4, 5]
    assert all(v.config["temperature"] == 0.9 and v.config["max_steps"] == 7 for v in variants)  # CLI beats fixed
    assert variants[0].config["data"]["size"] == 300
    assert variants[1].run_dir == tmp_path / "out" / "demo" / "max_word_len-5"
    assert variants[1].config["output_dir"] == str(variants[1].run_dir)
    with pytest.raises(ConfigError, match="is not in the recipe") as err:
        plan(load_spec(write_spec(tmp_path, vary={"data.specs.3.config.max_word_len": [4]})), tmp_path, {})
    assert err.value.field == "vary.data.specs.3.config.max_word_len"
    with pytest.raises(ConfigError, match="swept field"):
        plan(spec, tmp_path, {"data.specs.0.config.max_word_len": 6})


def test_recipe_variants_are_labelled_by_file_and_launch_their_own_script(tmp_path):
    spec = load_spec(
        write_spec(tmp_path, base=None, vary={"recipe": ["recipes/tiny/rloo.yaml", "recipes/tiny/dapo.yaml"]})
    )
    variants = plan(spec, tmp_path, {})
    assert [v.label for v in variants] == ["rloo", "dapo"]
    assert [v.script for v in variants] == ["recipes/rloo.py", "recipes/dapo.py"]
    assert variants[1].config["dynamic_sampling"] is True


def test_cli_overrides_parse_as_yaml_values():
    assert parse_overrides(["--max_steps", "2", "--build_tiny_model=true", "--temperature", "0.7"]) == {
        "max_steps": 2,
        "build_tiny_model": True,
        "temperature": 0.7,
    }
    with pytest.raises(ConfigError, match="needs a value"):
        parse_overrides(["--max_steps"])


def test_a_bad_recipe_field_fails_before_any_training(tmp_path):
    spec = write_spec(tmp_path, vary={"temprature": [0.5, 1.0]})
    with pytest.raises(ConfigError, match="did you mean 'temperature'") as err:
        run_sweep(spec, tmp_path / "out")
    assert err.value.field == "temprature"
    assert not (tmp_path / "out").exists()
    result = subprocess.run(
        [sys.executable, "-m", "rlvr.analysis.sweep", write_spec(tmp_path, vary={"temperature": [1]}, varry=1)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "error: varry: unknown sweep spec field; did you mean 'vary'?"


def test_samples_budget_sets_max_steps_per_run(tmp_path):
    spec = write_spec(
        tmp_path,
        vary={"num_generations": [2, 4]},
        samples_budget=40,
        fixed={"generation_batch_size": 8, "per_device_train_batch_size": 8},
    )
    result = run_sweep(spec, tmp_path / "out", {"model_name_or_path": str(tmp_path / "m")}, dry_run=True)
    assert result["status"] == {"num_generations-2": "planned", "num_generations-4": "planned"}
    # 40 samples at 8 per generation step -> 5 steps; a CLI --max_steps wins over the budget
    run = plan(load_spec(spec), tmp_path / "out", {})[0]
    from rlvr.analysis.sweep_spec import validate_variant

    validate_variant(run, load_spec(spec), cli_max_steps=False)
    assert (
        run.config["max_steps"] == 5 and "max_generated_samples" not in run.config
    )  # fixed-size steps: max_steps is exact

    # DAPO's resampling makes samples per step vary: the budget also stops the run on samples
    dapo = write_spec(
        tmp_path,
        vary={"algorithm": ["dapo"]},
        samples_budget=40,
        fixed={"generation_batch_size": 8, "per_device_train_batch_size": 8},
    )
    run = plan(load_spec(dapo), tmp_path / "out", {})[0]
    validate_variant(run, load_spec(dapo), cli_max_steps=False)
    assert (run.config["max_steps"], run.config["max_generated_samples"]) == (5, 40)


def test_two_variants_two_steps_in_process_then_skipped_on_rerun(tmp_path, tiny_model_dir):
    spec = write_spec(tmp_path, vary={"num_generations": [2, 4]}, fixed={"max_steps": 2, "print_rollouts": False})
    overrides = {"model_name_or_path": tiny_model_dir}
    result = run_sweep(spec, tmp_path / "out", overrides, launcher="inprocess", last_k=1)
    sweep = tmp_path / "out" / "demo"
    assert result["status"] == {"num_generations-2": "done", "num_generations-4": "done"}
    for g in (2, 4):
        run = sweep / f"num_generations-{g}"
        recipe = (run / "recipe.yaml").read_text()
        assert recipe.startswith("# Sweep 'demo'") and "accelerate launch recipes/grpo.py" in recipe
        assert yaml.safe_load(recipe)["num_generations"] == g
        assert yaml.safe_load((run / "config.yaml").read_text())["num_generations"] == g  # what the runner ran
        assert [row["generated_samples"] for row in read_jsonl(run / "metrics.jsonl") if "loss" in row] == [16, 32]
    with (sweep / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [row["run"] for row in rows] == ["num_generations-2", "num_generations-4"]
    assert all(row["generated_samples"] == "32" and row["finished"] == "True" for row in rows)
    assert (sweep / "sweep.yaml").exists() and (sweep / "plots" / "rewards_by_samples.png").exists()
    assert "# Sweep report: demo" in Path(result["report"]).read_text()

    again = run_sweep(spec, tmp_path / "out", overrides, launcher="inprocess")
    assert again["status"] == {"num_generations-2": "skipped", "num_generations-4": "skipped"}
    with pytest.raises(ConfigError, match="delete that folder") as err:
        run_sweep(spec, tmp_path / "out", {**overrides, "max_steps": 3}, launcher="inprocess")
    assert err.value.field == "max_steps"


def test_seeds_only_and_held_out_evaluation(tmp_path, tiny_model_dir):
    """Each value trains once per seed (<label>-s<seed>), --only picks a setting, and `evaluate:` scores the base
    model once and every finished run on the held-out split; the report averages the seeds of each setting."""
    spec = write_spec(
        tmp_path,
        vary={"temperature": [0.7, 1.0]},
        labels=["cold", "hot"],
        seeds=[1, 2],
        fixed={"max_steps": 1, "print_rollouts": False},
        evaluate={"num_samples": 2, "k": [1, 2], "num_prompts": 3},
    )
    overrides = {"model_name_or_path": tiny_model_dir}
    result = run_sweep(spec, tmp_path / "out", overrides, launcher="inprocess", last_k=1, only=["hot"])
    assert result["status"] == {"hot-s1": "done", "hot-s2": "done"}
    sweep = tmp_path / "out" / "demo"
    assert [yaml.safe_load((sweep / f"hot-s{s}" / "config.yaml").read_text())["seed"] for s in (1, 2)] == [1, 2]
    before = json.loads((sweep / "eval" / "before.json").read_text())
    after = json.loads((sweep / "hot-s1" / "eval" / "after.json").read_text())
    assert before["overall"]["prompts"] == after["overall"]["prompts"] == 3 and "pass@2" in after["overall"]
    report = Path(result["report"]).read_text()
    assert "## Settings (mean ± spread over seeds)" in report and "| hot | 2 |" in report
    with open(sweep / "summary.csv") as f:
        assert all(row["heldout_exact_match_before"] for row in csv.DictReader(f))
    with pytest.raises(ConfigError) as err:
        run_sweep(spec, tmp_path / "out", overrides, launcher="inprocess", only=["warm"])
    assert err.value.field == "--only"
    with pytest.raises(ConfigError) as err:
        load_spec(write_spec(tmp_path, vary={"temperature": [1.0]}, seeds=[1, 1]))
    assert err.value.field == "seeds"


def train_first_sweep(tmp_path, tiny_model_dir) -> tuple[dict, dict]:
    """Sweep "first" under <tmp>/out: one 1-step run, t1 (temperature 1.0). Returns (overrides, fixed) to reuse."""
    overrides = {"model_name_or_path": tiny_model_dir}
    fixed = {"max_steps": 1, "print_rollouts": False}
    first = write_spec(tmp_path, "first", vary={"temperature": [1.0]}, labels=["t1"], fixed=fixed)
    assert run_sweep(first, tmp_path / "out", overrides, launcher="inprocess")["status"] == {"t1": "done"}
    return overrides, fixed


def test_a_run_another_sweep_trained_is_linked_not_trained_again(tmp_path, tiny_model_dir):
    """Runs are shared where a setting coincides: the second sweep's top_p 1.0 run is the first sweep's run
    (same parsed recipe, same evaluation), so it links to it, and its report counts it like its own."""
    overrides, fixed = train_first_sweep(tmp_path, tiny_model_dir)
    second = write_spec(tmp_path, "second", vary={"top_p": [1.0, 0.9]}, labels=["p1", "p09"], fixed=fixed)
    result = run_sweep(second, tmp_path / "out", overrides, launcher="inprocess", last_k=1)
    assert result["status"] == {"p1": "shared", "p09": "done"}
    linked = tmp_path / "out" / "second" / "p1"
    assert linked.is_symlink() and linked.resolve() == (tmp_path / "out" / "first" / "t1").resolve()
    with (tmp_path / "out" / "second" / "summary.csv").open() as f:
        assert [row["run"] for row in csv.DictReader(f)] == ["p1", "p09"]
    assert run_sweep(second, tmp_path / "out", overrides, launcher="inprocess")["status"] == {
        "p1": "skipped",
        "p09": "skipped",
    }

    # Evaluated another way (its own held-out set, say), the training is still shared, and the evaluation is its own:
    # a folder of links to the run's files beside a real eval/.
    evaluation = {"num_samples": 2, "k": [1], "num_prompts": 3}
    third = write_spec(tmp_path, "third", vary={"top_p": [1.0]}, labels=["p1"], fixed=fixed, evaluate=evaluation)
    assert run_sweep(third, tmp_path / "out", overrides, launcher="inprocess")["status"] == {"p1": "shared"}
    folder = tmp_path / "out" / "third" / "p1"
    assert not folder.is_symlink() and (folder / "metrics.jsonl").is_symlink() and (folder / "recipe.yaml").is_symlink()
    assert json.loads((folder / "eval" / "after.json").read_text())["overall"]["prompts"] == 3
    assert not (tmp_path / "out" / "first" / "t1" / "eval").exists()  # the source run is untouched
    assert run_sweep(third, tmp_path / "out", overrides, launcher="inprocess")["status"] == {"p1": "skipped"}
    variant = plan(load_spec(third), tmp_path / "elsewhere", {**overrides, **fixed})[0]
    assert find_shared_run(variant, load_spec(third), tmp_path / "out") == (  # never from a linked folder
        tmp_path / "out" / "first" / "t1",
        False,
    )

    # The source deleted: a dry run only reports it pending (and touches nothing); a real run trains it afresh.
    import shutil

    shutil.rmtree(tmp_path / "out" / "first")
    assert run_sweep(second, tmp_path / "out", overrides, dry_run=True)["status"]["p1"] == "planned"
    assert linked.is_symlink()
    assert run_sweep(second, tmp_path / "out", overrides, launcher="inprocess")["status"]["p1"] == "done"
    assert not linked.is_symlink() and (linked / "metrics.jsonl").exists()


def test_run_identity_fills_defaults_and_ignores_where_the_run_writes():
    recipe = yaml.safe_load(Path(FAST_RECIPE).read_text())
    same = run_identity(recipe)
    assert run_identity({**recipe, "kl_estimator": "k3", "output_dir": "elsewhere"}) == same  # k3 is the default
    assert run_identity({**recipe, "seed": 7}) != same


def test_evaluation_left_to_the_run_equals_the_runs_own_temperature(tmp_path):
    """The temperature sweep evaluates every run at 1.0; the reference sweep at each run's own, which for a run trained
    at 1.0 is the same evaluation: T1.0 shares the reference GRPO run."""
    recipe = yaml.safe_load(Path(FAST_RECIPE).read_text())  # temperature 1.0
    own = load_spec(write_spec(tmp_path, vary={"seed": [1]}, evaluate={"num_samples": 2, "k": [1]}))
    fixed = load_spec(
        write_spec(tmp_path, vary={"seed": [1]}, evaluate={"num_samples": 2, "k": [1], "temperature": 1.0})
    )
    hot = load_spec(write_spec(tmp_path, vary={"seed": [1]}, evaluate={"num_samples": 2, "k": [1], "temperature": 1.4}))
    assert evaluation_of(own, recipe) == evaluation_of(fixed, recipe) != evaluation_of(hot, recipe)
    assert evaluation_of(own, {**recipe, "temperature": 0.6}) != evaluation_of(fixed, {**recipe, "temperature": 0.6})


@pytest.mark.slow
def test_recipe_sweep_in_subprocesses_writes_logs_and_report(tmp_path, tiny_model_dir):
    rloo = tmp_path / "rloo_fast.yaml"
    rloo.write_text(f"base: {FAST_RECIPE}\nalgorithm: rloo\n")
    spec = write_spec(tmp_path, base=None, vary={"recipe": [FAST_RECIPE, str(rloo)]}, labels=["grpo", "rloo"])
    main(
        [
            spec,
            "--out",
            str(tmp_path / "out"),
            "--max_steps",
            "2",
            "--model_name_or_path",
            tiny_model_dir,
            "--print_rollouts",
            "false",
        ]
    )
    sweep = tmp_path / "out" / "demo"
    for label in ("grpo", "rloo"):
        assert "train_runtime" in (sweep / label / "metrics.jsonl").read_text()
        assert (sweep / label / "train.log").exists() and (sweep / label / "model.safetensors").exists()
    assert "accelerate launch recipes/rloo.py" in (sweep / "rloo" / "recipe.yaml").read_text()
    assert yaml.safe_load((sweep / "rloo" / "config.yaml").read_text())["algorithm"] == "rloo"
    assert (sweep / "report.md").exists()


def test_the_curriculum_sweep_plans_four_settings_at_the_main_jobs_budget_on_one_held_out_set(tmp_path, monkeypatch):
    from rlvr.analysis.sweep import eval_recipe
    from rlvr.analysis.sweep_spec import validate_variant
    from rlvr.training.config import load_recipe, validate

    monkeypatch.chdir(REPO)
    spec = load_spec("sweeps/curriculum.yaml")
    variants = plan(spec, tmp_path / "out", {})
    assert [v.label for v in variants] == [
        f"{setting}-s{seed}" for setting in ("fixed3-6", "fixed3-11", "threshold", "informative") for seed in (1, 2, 3)
    ]
    questions = {}
    for variant in variants[::3]:  # one seed per setting: the seeds differ only in `seed`
        validate_variant(variant, spec, cli_max_steps=False)
        assert variant.config["max_steps"] == 140 and variant.config["model_name_or_path"] == "models/tiny-speller"
        recipe = validate(
            load_recipe(["--config", str(eval_recipe(variant.config, spec, tmp_path / f"{variant.label}.yaml"))])
        )
        questions[variant.label] = recipe.dataset["test"]["question"]
        assert not set(recipe.dataset["train"]["question"]) & set(questions[variant.label])  # never trained on
    assert len({tuple(q) for q in questions.values()}) == 1 and len(questions["threshold-s1"]) == 320
    assert [variant.config.get("curriculum", {}).get("policy") for variant in variants[::3]] == [
        None,
        None,
        "threshold",
        "informative",
    ]


def test_every_steps_evaluates_the_checkpoints_before_the_end(tmp_path, tiny_model_dir):
    from rlvr.analysis.loaders import load_run

    spec = write_spec(
        tmp_path,
        vary={"temperature": [1.0]},
        labels=["t"],
        seeds=[1],
        fixed={"max_steps": 3, "print_rollouts": False},
        evaluate={"num_samples": 2, "k": [1], "num_prompts": 2, "every_steps": 2},
    )
    run_sweep(spec, tmp_path / "out", {"model_name_or_path": tiny_model_dir}, launcher="inprocess", last_k=1)
    run = tmp_path / "out" / "demo" / "t-s1"
    assert yaml.safe_load((run / "recipe.yaml").read_text())["save_steps"] == 2
    assert sorted(p.name for p in (run / "eval").glob("*.json")) == ["after.json", "checkpoint-2.json"]
    assert [samples for samples, _ in load_run(run).held_out_curve()] == [32, 48]  # step 2, then the end
    with pytest.raises(ConfigError) as err:
        load_spec(write_spec(tmp_path, vary={"temperature": [1.0]}, evaluate={"every_steps": 0}))
    assert err.value.field == "evaluate.every_steps"


def test_the_same_recipe_trained_by_other_code_is_trained_afresh(tmp_path, tiny_model_dir, capsys):
    """A finished run shares only with the code that trained it (code.json): after a change in the training sources,
    the second sweep trains its run instead of linking it, and says why."""
    overrides, fixed = train_first_sweep(tmp_path, tiny_model_dir)
    record = tmp_path / "out" / "first" / "t1" / "code.json"
    code = json.loads(record.read_text())
    record.write_text(json.dumps({"trained_by": {**code["trained_by"], "sources": "0" * 16}}))
    second = write_spec(tmp_path, "second", vary={"top_p": [1.0]}, labels=["p1"], fixed=fixed)
    capsys.readouterr()
    assert run_sweep(second, tmp_path / "out", overrides, launcher="inprocess")["status"] == {"p1": "done"}
    said = capsys.readouterr().out
    assert (
        f"[sweep] p1: not sharing {tmp_path / 'out' / 'first' / 't1'}: other code trained it (the training "
        "sources); training it afresh"
    ) in said
    trained = tmp_path / "out" / "second" / "p1"
    assert not trained.is_symlink() and json.loads((trained / "code.json").read_text()) == code


# Run before the training command: prints the cores the child may use (as the child sees them), then becomes it.
AFFINITY_PROBE = "import os, sys; print('affinity', sorted(os.sched_getaffinity(0)), flush=True); os.execv(sys.argv[1], sys.argv[1:])"


@pytest.mark.serial  # two runs side by side, each pinned to its own core: all of them, not a pytest worker's share
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two runs side by side need two cores")
def test_jobs_pin_each_run_to_its_own_cores_and_a_failed_run_keeps_the_rest(tmp_path, tiny_model_dir, monkeypatch):
    """--jobs 2: both runs start at once, each on its own half of the cores at that many threads (each child reports
    from inside which cores it may use); one fails, the other still trains, and the report compares the one that
    finished and names the failed one."""
    from rlvr.analysis import sweep

    real = sweep.train_command

    def probed(variant, launcher, cpu_threads=None):
        command = real(variant, launcher, cpu_threads)
        if variant.label == "broken":  # a run that dies at once, as an out-of-memory kill would
            command = [sys.executable, "-c", "import sys; sys.exit(3)"]
        return [sys.executable, "-c", AFFINITY_PROBE, *command]

    monkeypatch.setattr(sweep, "train_command", probed)
    spec = write_spec(
        tmp_path, vary={"seed": [1, 2]}, labels=["broken", "trains"], fixed={"max_steps": 1, "print_rollouts": False}
    )
    result = run_sweep(spec, tmp_path / "out", {"model_name_or_path": tiny_model_dir}, jobs=2, last_k=1)
    assert result["status"] == {"broken": "failed", "trains": "done"}
    sweep_dir = tmp_path / "out" / "demo"
    logs = {label: (sweep_dir / label / "train.log").read_text() for label in ("broken", "trains")}
    cores = {label: yaml.safe_load(log.split("affinity ", 1)[1].splitlines()[0]) for label, log in logs.items()}
    share = len(os.sched_getaffinity(0)) // 2
    assert len(cores["broken"]) == len(cores["trains"]) == share and not set(cores["broken"]) & set(cores["trains"])
    assert f"[threads] {share} intra-op thread(s) per process (cpu_threads {share})" in logs["trains"]
    assert str(yaml.safe_load((sweep_dir / "trains" / "config.yaml").read_text())["cpu_threads"]) == str(share)
    planned = plan(load_spec(spec), tmp_path / "out", {"model_name_or_path": tiny_model_dir})[1].config
    assert yaml.safe_load((sweep_dir / "trains" / "recipe.yaml").read_text()) == planned  # the thread count: argv only
    with (sweep_dir / "summary.csv").open() as f:
        assert [row["run"] for row in csv.DictReader(f)] == ["trains"]
    report = Path(result["report"]).read_text()
    assert (
        f"- **broken**: not trained, failed in this sweep (exit 3); log `{sweep_dir / 'broken' / 'train.log'}`"
        in report
    )


def test_jobs_need_a_process_per_run_and_enough_cores(tmp_path):
    from rlvr.analysis.sweep import core_slots

    assert core_slots(2, cores=[0, 1, 2, 3, 4]) == [[0, 1], [2, 3]]  # equal shares: one thread count for the sweep
    assert core_slots(1) is None  # one run at a time: its recipe's cpu_threads, on every core the sweep has
    with pytest.raises(ConfigError, match="need at least 3 cores") as err:
        core_slots(3, cores=[0, 1])
    assert err.value.field == "--jobs"
    with pytest.raises(ConfigError, match="a process each") as err:
        run_sweep(write_spec(tmp_path, vary={"seed": [1]}), tmp_path / "out", launcher="inprocess", jobs=2)
    assert err.value.field == "--jobs" and not (tmp_path / "out").exists()


def test_a_run_killed_mid_way_resumes_from_its_checkpoint_when_the_sweep_reruns(tmp_path, tiny_model_dir, capsys):
    spec = write_spec(
        tmp_path,
        vary={"seed": [1]},
        labels=["r"],
        fixed={"max_steps": 2, "print_rollouts": False, "save_strategy": "steps", "save_steps": 1},
    )
    overrides = {"model_name_or_path": tiny_model_dir}
    run_sweep(spec, tmp_path / "out", overrides, launcher="inprocess", last_k=1)
    run = tmp_path / "out" / "demo" / "r"
    # As if killed during step 2: its checkpoint and the closing row were never written.
    import shutil

    shutil.rmtree(run / "checkpoint-2")
    rows = [row for row in read_jsonl(run / "metrics.jsonl") if row.get("step", 0) <= 1 and "train_runtime" not in row]
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    capsys.readouterr()
    assert run_sweep(spec, tmp_path / "out", overrides, launcher="inprocess", last_k=1)["status"] == {"r": "done"}
    assert f"[resume] from {run / 'checkpoint-1'}" in capsys.readouterr().out
    assert [row["generated_samples"] for row in read_jsonl(run / "metrics.jsonl") if "loss" in row] == [16, 32]


# A stand-in run: says it started, then waits; SIGTERM (the preemption signal) is counted into its log.
PATIENT_RUN = """import pathlib, signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(1))
pathlib.Path(sys.argv[1]).write_text('started')
deadline = time.time() + 30
while not got and time.time() < deadline:
    time.sleep(0.05)
time.sleep(0.3)  # a second signal would arrive in this window
print('SIGTERM x', len(got), flush=True)
sys.exit(143 if got else 0)
"""


@pytest.mark.serial  # two runs side by side, each pinned to its own core: all of them, not a pytest worker's share
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="two runs side by side need two cores")
def test_stopping_a_jobs_sweep_sends_each_running_run_one_sigterm_and_waits(
    tmp_path, tiny_model_dir, monkeypatch, capsys
):
    """SIGTERM to the sweep (as Ctrl-C): each run side by side gets exactly one SIGTERM, the signal on which a run
    checkpoints and stops (a second one would stop it without a checkpoint), and the sweep waits for them, then ends
    with one line and exit status 143 (no traceback)."""
    import signal
    import threading

    from rlvr.analysis import sweep

    monkeypatch.setattr(
        sweep,
        "train_command",
        lambda variant, launcher, cpu_threads=None: [
            sys.executable,
            "-c",
            PATIENT_RUN,
            str(variant.run_dir / "started"),
        ],
    )
    spec = write_spec(tmp_path, vary={"seed": [1, 2]}, labels=["a", "b"])
    started = [tmp_path / "out" / "demo" / label / "started" for label in ("a", "b")]

    def stop_when_both_run():
        while not all(path.exists() for path in started):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=stop_when_both_run, daemon=True).start()
    with pytest.raises(SystemExit) as stopped:
        run_sweep(spec, tmp_path / "out", {"model_name_or_path": tiny_model_dir}, jobs=2)
    assert stopped.value.code == 143
    assert capsys.readouterr().err.splitlines() == [
        ("stopped by SIGTERM: 2 running run(s) checkpointed and stopped; rerun the same command to resume them")
    ]
    for label in ("a", "b"):
        assert "SIGTERM x 1" in (tmp_path / "out" / "demo" / label / "train.log").read_text()
    assert signal.getsignal(signal.SIGTERM) is before  # the sweep's own handler is gone again
