"""A second set of bad inputs, none of them in tests/test_bad_input.py: how many end as one named line?

    python benchmarks/bad_input_survey.py

Each case runs in-process through `rlvr.inputs.cli`, with model loading trapped, and is classified as
clean (exit 2, one line `error: <field>: ...`), wrong_field, multi_line (e.g. a usage dump), traceback, or
accepted (no error at all, or it reached model loading).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
FAST = str(REPO / "tests/recipes/tiny_grpo_fast.yaml")

from rlvr.__main__ import COMMANDS
from rlvr.inputs import ArgumentParser, cli


class ModelLoaded(BaseException):
    pass


def cases(tmp: Path):
    run = ["--config", FAST, "--output_dir", str(tmp / "out")]
    (tmp / "afile").write_text("x")
    (tmp / "empty.yaml").write_text("")
    (tmp / "half_model").mkdir()
    (tmp / "half_model" / "tokenizer.json").write_text("{}")  # a folder with something, but no config.json
    (tmp / "fake_model").mkdir()
    (tmp / "fake_model" / "config.json").write_text("{}")  # passes the folder check; nothing may load it

    def spec(name, text):
        (tmp / name).write_text(text)
        return str(tmp / name)

    def yaml_case(name, extra):
        return spec(name, Path(FAST).read_text() + extra)

    def edited(name, old, new):  # the fast recipe with one field's text replaced
        return spec(name, Path(FAST).read_text().replace(old, new))

    def on(config, out="o"):  # a command on another recipe or data file, into a scratch folder
        return ["--config", config, "--output_dir", str(tmp / out)]

    def sweep_of(name, text):
        return [spec(name, text), "--out", str(tmp / "s")]

    def accelerate(name, text):
        return ["--config", FAST, "--accelerate_config", spec(name, text)]

    fake_pair = ["--before", str(tmp / "fake_model"), "--after", str(tmp / "fake_model"), "--config", FAST]
    g = "grpo"
    return [
        (g, [*run, "--num_generations", "-2"], "num_generations"),
        (g, [*run, "--generation_batch_size", "7"], "generation_batch_size"),
        (g, [*run, "--steps_per_generation", "0"], "steps_per_generation"),
        (g, [*run, "--per_device_eval_batch_size", "0"], "per_device_eval_batch_size"),
        (g, [*run, "--max_steps", "-1", "--num_train_epochs", "0"], "num_train_epochs"),
        (g, [*run, "--max_steps", "-5"], "max_steps"),
        (g, [*run, "--warmup_steps", "-3"], "warmup_steps"),
        (g, [*run, "--adam_beta1", "1.5"], "adam_beta1"),
        (g, [*run, "--adam_epsilon", "0"], "adam_epsilon"),
        (g, [*run, "--top_p", "0"], "top_p"),
        (g, [*run, "--top_k", "2.5"], "top_k"),
        (g, [*run, "--temperature", "inf"], "temperature"),
        (g, [*run, "--beta", "nan"], "beta"),
        (g, [*run, "--epsilon_high", "-1"], "epsilon_high"),
        (g, [*run, "--delta", "0"], "delta"),
        (g, [*run, "--num_iterations", "-1"], "num_iterations"),
        (g, [*run, "--save_total_limit", "0"], "save_total_limit"),
        (g, [*run, "--logging_steps", "-1"], "logging_steps"),
        (g, [*run, "--lora_alpha", "0"], "lora_alpha"),
        (g, [*run, "--scale_rewards", "True"], "scale_rewards"),
        (g, [*run, "--loss_type", "GRPO"], "loss_type"),
        (g, [*run, "--multi_objective_aggregation", "mean"], "multi_objective_aggregation"),
        (g, [*run, "--vllm_mode", "remote"], "vllm_mode"),
        (g, [*run, "--vllm_gpu_memory_utilization", "1.5"], "vllm_gpu_memory_utilization"),
        (g, [*run, "--max_completion_length", "-1"], "max_completion_length"),
        (g, [*run, "--reward_weights", "a", "b"], "reward_weights"),
        (g, [*run, "--reward_funcs", "correctness", "correctness", "--reward_weights", "1", "1"], "reward_funcs"),
        (g, [*run, "--dynamic_sampling_reward", "format"], "dynamic_sampling_reward"),
        (g, [*run, "--data", "[1, 2]"], "data"),
        (g, [*run, "--data", '{"specs": [{"name": "nosuch"}]}'], "data.specs[0].name"),
        (g, [*run, "--data", '{"specs": [{"name": "spell_backward", "weight": -1}]}'], "data.specs[0].weight"),
        (g, [*run, "--data", '{"specs": ["spell_backward"], "size": "big"}'], "data.size"),
        (g, [*run, "--dataset_name", str(tmp / "no_dataset")], "dataset_name"),
        (g, [*run, "--resume_from_checkpoint", str(tmp / "afile")], "resume_from_checkpoint"),
        (g, ["--config", FAST, "--output_dir", str(tmp / "afile")], "output_dir"),
        (g, on(yaml_case("t1.yaml", "temperature_: 1\n")), "temperature_"),
        (g, on(str(tmp / "empty.yaml")), "--config"),
        (g, on(edited("t2.yaml", "max_steps: 3", "max_steps: true")), "max_steps"),
        (g, on(edited("t3.yaml", "seed: 42\n", "seed: x\n")), "seed"),
        (g, on(edited("t4.yaml", "top_k: 0", "top_k: [1]")), "top_k"),
        (g, on(yaml_case("t5.yaml", "env: 3\n")), "env"),
        (g, on(spec("t6.yaml", Path(FAST).read_text().split("data:")[0] + "data: 5\n")), "data"),
        (
            g,
            [*run, "--generation_batch_size", "6", "--num_generations", "2", "--per_device_train_batch_size", "4"],
            "generation_batch_size",
        ),
        (g, [*run, "--reward_funcs", "", "--reward_weights", "1"], "reward_funcs[0]"),
        (g, [*run, "--use_peft", "maybe"], "use_peft"),
        (g, [*run, "--eval_strategy", "steps", "--per_device_eval_batch_size", "3"], "per_device_eval_batch_size"),
        ("data", [*on(FAST, "d"), "--size", "-5"], "--size"),
        ("data", [*on(FAST, "d"), "--seed", "x"], "--seed"),
        ("data", on(str(tmp / "empty.yaml"), "d"), "--config"),
        ("data", on(spec("d1.yaml", "specs: [{name: spell_backward, weight: 0}]\n"), "d"), "data.specs[0].weight"),
        ("plots", [str(tmp / "nowhere"), "--out", str(tmp / "p"), "--x", "step", "time"], "--x"),
        ("plots", [str(tmp), "--out", str(tmp / "p")], "RUN_DIR"),
        ("plots", [str(tmp), "--out", str(tmp / "p"), "--max_rows", "x"], "--max_rows"),
        ("report", [str(tmp / "nowhere"), "--num_prompts", "-1"], "--num_prompts"),
        ("report", [str(tmp), "--last_k", "x"], "--last_k"),
        ("sweep", sweep_of("s1.yaml", f"name: s\nbase: {FAST}\nvary: {{seed: []}}\n"), "vary.seed"),
        ("sweep", sweep_of("s2.yaml", f"name: s\nbase: {FAST}\nvary: {{seed: [1, 2]}}\nlabels: [a]\n"), "labels"),
        (
            "sweep",
            sweep_of("s3.yaml", f"name: s\nbase: {FAST}\nvary: {{seed: [1]}}\nsamples_budget: 0\n"),
            "samples_budget",
        ),
        ("sweep", sweep_of("s4.yaml", "name: s\nbase: nowhere.yaml\nvary: {seed: [1]}\n"), "base"),
        ("sweep", sweep_of("s5.yaml", f"name: s\nbase: {FAST}\nvary: {{top_p: [2]}}\n"), "top_p"),
        # the wrong-kind-of-path, flag and YAML classes, with cases tests/test_bad_input.py does not hold
        (g, [*run, "--model_name_or_path", str(tmp / "half_model")], "model_name_or_path"),  # tokenizer only
        (g, [*run, "--model_name_or_path", "~/surely/not/here", "--build_tiny_model", "false"], "model_name_or_path"),
        (g, [*run, "--model_name_or_path", "a b/c", "--build_tiny_model", "false"], "model_name_or_path"),
        ("ppo", [*run, "--value_model_name_or_path", str(tmp / "half_model")], "value_model_name_or_path"),
        ("ppo", [*run, "--value_model_name_or_path", "../critic"], "value_model_name_or_path"),
        (g, [*run, "--dataset_name", str(tmp / "half_model")], "dataset_name"),
        (g, [*run, "--dataset_name", "/data/spell"], "dataset_name"),
        (g, [*run[:-1], str(tmp / "afile" / "deep" / "run")], "output_dir"),
        (g, [*run, "--rollouts_path", str(tmp / "afile" / "r.jsonl")], "rollouts_path"),
        (g, [*run, "--metrics_path", str(tmp)], "metrics_path"),
        (g, [*run, "--resume_from_checkpoint", str(tmp / "half_model")], "resume_from_checkpoint"),
        ("data", on(FAST, "afile/x"), "--output_dir"),
        ("data", ["--config", FAST, "--push_to_hub", "-leading-dash/x"], "--push_to_hub"),
        ("data", ["--config", FAST, "--push_to_hub", "user/" + "x" * 200], "--push_to_hub"),
        ("plan", ["--config", FAST, "--accelerate_config", str(tmp / "afile")], "--accelerate_config"),
        ("plan", accelerate("acc1.yaml", "distributed_type: MULTI_GPU\nnum_processes: 0\n"), "--accelerate_config"),
        (
            "plan",
            accelerate("acc2.yaml", "distributed_type: DEEPSPEED\ndeepspeed_config: zero3\n"),
            "--accelerate_config",
        ),
        ("plan", accelerate("acc3.yaml", "- a\n"), "--accelerate_config"),
        ("evaluate", ["--config", FAST, "--top_p", "-0.1"], "--top_p"),
        ("evaluate", ["--config", FAST, "--top_p", "inf"], "--top_p"),
        ("evaluate", ["--config", FAST, "--top_k", "x"], "--top_k"),
        ("evaluate", ["--config", FAST, "--max_new_tokens", "-4"], "--max_new_tokens"),
        ("evaluate", ["--config", FAST, "--output", str(tmp / "afile" / "e.json")], "--output"),
        (g, on(yaml_case("dup1.yaml", "top_p: 0.9\n")), "top_p"),
        (g, on(yaml_case("dup2.yaml", "reward_funcs: [correctness]\n")), "reward_funcs"),
        (g, on(spec("dup3.yaml", f"base: {FAST}\nbase: {FAST}\n")), "base"),
        ("sweep", sweep_of("dup4.yaml", f"name: s\nbase: {FAST}\nvary: {{seed: [1], seed: [2]}}\n"), "seed"),
        ("data", on(spec("dup5.yaml", "size: 10\nsize: 20\nspecs: [spell_backward]\n"), "d"), "size"),
        (g, [*run, "--kl_estimator", "K3"], "kl_estimator"),
        (g, [*run, "--max_generated_samples", "x"], "max_generated_samples"),
        (g, [*run, "--speedups", "shared-prefix"], "speedups"),
        ("dapo", [*run, "--dynamic_sampling_reward", "penalty"], "dynamic_sampling_reward"),
        (g, [*run, "--min_mean_reward_patience", "0"], "min_mean_reward_patience"),
        (g, [*run, "--min_mean_reward", "nan"], "min_mean_reward"),
        (g, [*run, "--divergence_guard", "maybe"], "divergence_guard"),
        ("before-after", [*fake_pair, "--out", str(tmp / "afile" / "cmp")], "--out"),
        ("before-after", [*fake_pair, "--k", "0"], "--k"),
    ]


def main_of(name):
    if name in ("grpo", "dapo", "ppo"):
        from rlvr.training.runner import main

        return lambda argv: main(argv, algorithm=name)
    return __import__(COMMANDS[name], fromlist=["main"]).main  # `rlvr <name>`'s module


def classify(name, argv, field) -> tuple[str, str]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            cli(main_of(name), argv)
        return "accepted", ""
    except ModelLoaded:
        return "accepted", "reached model loading"
    except SystemExit as exit_:
        lines = [
            line
            for line in err.getvalue().splitlines()
            if line.strip() and "Warning" not in line and not line.startswith("  warnings.warn")
        ]
        if exit_.code != 2 or len(lines) != 1:
            return "multi_line", " | ".join(lines)[:200]
        return ("clean" if lines[0].startswith(f"error: {field}:") else "wrong_field"), lines[0][:200]
    except Exception as exc:  # noqa: BLE001
        return "traceback", f"{type(exc).__name__}: {exc}"[:200]


def main(argv: list[str] | None = None) -> None:
    import warnings

    ArgumentParser(description=__doc__).parse_args(argv)  # no options: a typo is refused, not ignored
    from transformers import PreTrainedModel

    warnings.simplefilter("ignore")

    def refuse(cls, *args, **kwargs):
        raise ModelLoaded()

    PreTrainedModel.from_pretrained = classmethod(refuse)
    with tempfile.TemporaryDirectory() as tmp:
        results = [(name, case, field, *classify(name, case, field)) for name, case, field in cases(Path(tmp))]
    for name, case, field, verdict, detail in results:
        if verdict != "clean":
            print(f"{verdict:11s} {name} {field}: {detail}")
    counts = Counter(r[3] for r in results)
    print(
        f"{len(results)} cases: "
        + ", ".join(f"{k} {v}" for k, v in counts.most_common())
        + f"; clean {counts['clean'] / len(results):.0%}"
    )


if __name__ == "__main__":
    cli(main)
