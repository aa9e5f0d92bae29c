"""The tiny main job's pieces: the committed warm-start checkpoint, the SFT target format, and the evaluator."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_ok
from rlvr.recipes.tiny.model import TAG_TOKENS
from rlvr.recipes.tiny.sft_data import sft_dataset, spelled_completion, to_sft_row

from rlvr.analysis.evaluate import evaluate
from rlvr.inputs import ConfigError
from rlvr.metrics.estimators import pass_at_k

REPO_ROOT = Path(__file__).resolve().parents[1]
SPELLER = REPO_ROOT / "models" / "tiny-speller"
RECIPE = str(REPO_ROOT / "recipes" / "tiny" / "grpo.yaml")
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}


def test_committed_checkpoint_loads_and_keeps_the_tags_as_single_tokens():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(SPELLER)
    tokenizer = AutoTokenizer.from_pretrained(SPELLER)
    assert model.config.model_type == "qwen3"
    assert sum(p.numel() for p in model.parameters()) < 5_000_000
    for tag in TAG_TOKENS:
        ids = tokenizer.encode(tag, add_special_tokens=False)
        assert len(ids) == 1, tag
        assert tokenizer.decode(ids, skip_special_tokens=True) == tag  # TRL decodes this way: tags must survive
    assert tokenizer.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tokenizer.eos_token_id


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (8, 2, 1, 0.25),  # pass@1 = c / n
        (8, 2, 4, 1 - 15 / 70),  # 1 - C(6,4)/C(8,4)
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (8, 0, 8, 0.0),
        (8, 1, 8, 1.0),  # fewer wrong samples than k: some k-subset always holds the right one
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
    ],
)
def test_pass_at_k_matches_hand_computed_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_k_above_n():
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_sft_target_is_the_rewarded_format_with_a_letter_by_letter_think():
    from rlvr.rewards.functions import binary, format

    assert spelled_completion("nus") == "<think>s u n -> n u s</think><answer>nus</answer>"
    row = {
        "prompt": [{"role": "user", "content": "Spell this word backward (example: sun -> nus): was"}],
        "question": "Spell this word backward (example: sun -> nus): was",
        "answer": "saw",
        "metadata": json.dumps({"source_dataset": "spell_backward", "word": "was"}),
    }
    sft_row = to_sft_row(row)
    assert sft_row["prompt"] == row["prompt"]
    assert sft_row["completion"] == [
        {"role": "assistant", "content": "<think>w a s -> s a w</think><answer>saw</answer>"}
    ]
    completion = [sft_row["completion"]]
    assert format(completion) == [1.0]
    assert binary(completion, [row["answer"]], [row["metadata"]]) == [1.0]


def test_sft_rows_use_the_grpo_prompt_as_a_chat_prefix_and_drop_held_out_words():
    from datasets import Dataset
    from rlvr.data.generate import make_prompt, resolve_system_prompt
    from rlvr.recipes.tiny.model import build_tokenizer

    words = ["sun", "cat", "lamp"]
    prompt = lambda w: make_prompt(f"Spell: {w}", resolve_system_prompt("tiny"))
    rows = Dataset.from_list([{"prompt": prompt(w), "question": f"Spell: {w}", "answer": w[::-1]} for w in words])
    sft = sft_dataset(rows, exclude_questions={"Spell: cat"})
    assert len(sft) == 2 and sft.column_names == ["prompt", "completion"]
    tokenizer = build_tokenizer()
    prompt_text = tokenizer.apply_chat_template(sft[0]["prompt"], tokenize=False, add_generation_prompt=True)
    full_text = tokenizer.apply_chat_template(sft[0]["prompt"] + sft[0]["completion"], tokenize=False)
    assert full_text.startswith(prompt_text)  # SFT trains on exactly the context GRPO samples from
    assert full_text[len(prompt_text) :].startswith("<think>s u n -> n u s</think><answer>nus</answer><|im_end|>")


def test_evaluate_writes_the_summary_with_a_by_length_breakdown(tmp_path):
    summary = evaluate(
        RECIPE, model_path=str(SPELLER), num_prompts=6, num_samples=2, ks=(1, 2), output=str(tmp_path / "eval.json")
    )
    saved = json.loads((tmp_path / "eval.json").read_text())
    assert saved["num_samples"] == 2 and saved["k"] == [1, 2]
    assert saved["sampling"]["temperature"] == 1.0  # taken from the recipe
    keys = {"prompts", "samples", "exact_match", "mean_correctness", "mean_format", "mean_binary", "pass@1", "pass@2"}
    assert keys <= set(saved["overall"])
    assert saved["overall"]["prompts"] == 6 and saved["overall"]["samples"] == 12
    assert saved["by_length"] and all(keys <= set(block) for block in saved["by_length"].values())
    assert sum(block["prompts"] for block in saved["by_length"].values()) == 6
    assert saved["overall"]["pass@1"] == pytest.approx(saved["overall"]["exact_match"])
    rollouts = [json.loads(line) for line in Path(summary["files"]["rollouts"]).read_text().splitlines()]
    assert len(rollouts) == 12
    assert {"completion", "correctness", "format", "binary", "exact", "difficulty"} <= set(rollouts[0])


def test_evaluate_rejects_k_above_the_sample_count(tmp_path):
    with pytest.raises(ConfigError, match=r"^--k: "):
        evaluate(
            RECIPE, model_path=str(SPELLER), num_prompts=1, num_samples=2, ks=(1, 4), output=str(tmp_path / "e.json")
        )


def test_evaluate_cli_names_a_missing_model(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "rlvr.analysis.evaluate", "--config", RECIPE, "--model", str(tmp_path / "nothing")],
        check=False,
        cwd=REPO_ROOT,
        env=OFFLINE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: --model: no model at")


def _sft_recipe_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tiny_sft", REPO_ROOT / "recipes" / "tiny" / "sft.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("override", "field"),
    [(["--stop_at_exact_match", "1.5"], "stop_at_exact_match"), (["--probe_steps", "0"], "probe_steps")],
)
def test_sft_recipe_rejects_bad_stop_rules_naming_the_field(override, field):
    sft = _sft_recipe_module()
    with pytest.raises(ConfigError, match=rf"^{field}: "):
        sft.parse(["--config", str(REPO_ROOT / "recipes" / "tiny" / "sft.yaml"), *override])


def test_the_3_10_warm_start_never_trains_on_the_curriculum_held_out_words():
    """recipes/tiny/sft_3_10.yaml: sft.yaml's settings on 3-10 letter words, minus spell_backward_3_10 (the set the
    curriculum runs are evaluated on). An ad hoc run that kept sft.yaml's exclusion list (the main job's 3-6 test
    words) trained on 41 of those 320 words."""
    from rlvr.data.generate import build_dataset
    from rlvr.data.spec import DataSpec

    sft = _sft_recipe_module()
    args, training = sft.parse(["--config", str(REPO_ROOT / "recipes" / "tiny" / "sft_3_10.yaml")])
    base, _ = sft.parse(["--config", str(REPO_ROOT / "recipes" / "tiny" / "sft.yaml")])
    assert args.model_shape == base.model_shape and args.stop_at_exact_match == base.stop_at_exact_match
    assert training.output_dir.startswith("runs/") and training.max_length >= 320
    excluded, _ = sft.heldout(args.heldout_recipe)
    assert len(excluded) == 320  # 40 words of each length 3-10
    rows = build_dataset(DataSpec.from_dict(args.data))["train"]
    lengths = {len(answer) for answer in rows["answer"]}
    assert min(lengths) == 3 and max(lengths) == 10

    def user_turns(dataset):
        return {m["content"] for prompt in dataset["prompt"] for m in prompt if m["role"] == "user"}

    assert excluded & user_turns(sft_dataset(rows))  # the draw does contain held-out words ...
    assert not excluded & user_turns(sft_dataset(rows, excluded))  # ... and none reaches training


def test_sft_recipe_rejects_an_unknown_model_shape_field():
    sft = _sft_recipe_module()
    with pytest.raises(ConfigError, match=r"^model_shape\.hidden: "):
        sft.model_shape({"hidden": 64})


def expected_ranges() -> dict:
    """README's main-job ranges, from their one source: benchmarks/tiny_main_job.py's EXPECTED (README's table is
    checked against it in tests/test_main_job_learns.py)."""
    spec = importlib.util.spec_from_file_location("tiny_main_job", REPO_ROOT / "benchmarks" / "tiny_main_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EXPECTED


@pytest.mark.slow
def test_main_job_raises_held_out_exact_match_by_40_points_into_readmes_range(tmp_path):
    """README's claim, end to end (~3-8 min on 2 cores): evaluate, GRPO with the recipe as committed, evaluate. The
    fast check of the same recipe (30 steps, +7 points) is tests/test_main_job_learns.py."""
    job = [sys.executable, "benchmarks/tiny_main_job.py", "--output_dir", str(tmp_path), "--launcher", "python"]
    run_ok(job, env=OFFLINE, timeout=1800)
    report = json.loads((tmp_path / "benchmark.json").read_text())
    before, after = report["before"]["exact_match"], report["after"]["exact_match"]
    expected = expected_ranges()
    assert expected["before"][0] == before == expected["before"][1], report
    assert after >= before + expected["min_gain"], report
    assert expected["after"][0] <= after <= expected["after"][1], report
    zero_std = [z for z in report["zero_std_frac/correctness"] if z is not None]
    assert sum(zero_std[-20:]) / 20 > sum(zero_std[:20]) / 20 + 0.2  # groups saturate as the policy sharpens


PROBE_WORDS = ("cat", "dog", "sun", "tree")
PROBE_ROWS = [
    {
        "prompt": [{"role": "user", "content": f"Spell this word backward (e.g. sun -> nus): {word}"}],
        "answer": word[::-1],
        "question": word,
        "metadata": "{}",
        "difficulty": len(word),
    }
    for word in PROBE_WORDS
]


def scripted_sampler(tokenizer, exact_per_prompt: int):
    """Stands in for `hf_sampler`: of each probe word's samples, the first `exact_per_prompt` answer it exactly and
    the rest wrongly (the probe samples all its words in one chunk, in row order)."""

    def make(model, tokenizer_, settings, num_samples, device, *args, **kwargs):
        def sample(chunk):
            assert len(chunk) == len(PROBE_ROWS)
            return [
                [
                    tokenizer.encode(
                        f"<think>x</think><answer>{row['answer'] if i < exact_per_prompt else 'zz'}</answer>",
                        add_special_tokens=False,
                    )
                    for i in range(num_samples)
                ]
                for row in PROBE_ROWS
            ]

        return sample

    return make


@pytest.mark.parametrize(("target", "stops"), [(0.5, True), (0.51, False)])
def test_sft_probe_stops_at_the_first_probe_that_reaches_its_target(monkeypatch, target, stops):
    """`ExactMatchStop` (the SFT warm start's stop rule) with sampling scripted to 2 exact answers of 4 per word:
    it probes only every `every` steps, scores the probe at exactly 0.5 with the evaluator's scorer, and stops
    training when the probe reaches its target (0.5 >= 0.5), not when it falls short (0.5 < 0.51)."""
    from rlvr.recipes.tiny import sft
    from rlvr.recipes.tiny.sft import ExactMatchStop, heldout
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerControl, TrainerState

    _, settings = heldout(RECIPE)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(SPELLER), AutoTokenizer.from_pretrained(SPELLER)
    monkeypatch.setattr(sft, "hf_sampler", scripted_sampler(tokenizer, exact_per_prompt=2))
    stop = ExactMatchStop(PROBE_ROWS, tokenizer, settings, every=2, samples=4, target=target, seed=0)
    state, control = TrainerState(), TrainerControl()
    for step in (1, 2):
        state.global_step = step
        stop.on_step_end(None, state, control, model=model)
        if step == 1:
            assert stop.history == [] and not control.should_training_stop  # no probe between probe steps
    assert stop.history == [(2, 0.5)]
    assert control.should_training_stop == stops


def test_sft_probe_samples_the_real_model_without_moving_training_state():
    """The probe with the real sampler on the committed speller: it leaves the tokenizer's padding side as SFT had it
    (the sampler pads left), puts the model back in training mode, and does not move the training run's random
    stream (it samples under its own seed in a forked RNG)."""
    from rlvr.recipes.tiny.sft import ExactMatchStop, heldout
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerControl, TrainerState

    _, settings = heldout(RECIPE)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(SPELLER), AutoTokenizer.from_pretrained(SPELLER)
    tokenizer.padding_side = "right"
    model.train()
    stop = ExactMatchStop(PROBE_ROWS, tokenizer, settings, every=1, samples=4, target=1.0, seed=0)
    state, control = TrainerState(), TrainerControl()
    state.global_step = 1
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    stop.on_step_end(None, state, control, model=model)
    assert torch.equal(torch.rand(3), expected_next)
    assert len(stop.history) == 1 and 0.0 <= stop.history[0][1] <= 1.0
    assert tokenizer.padding_side == "right" and model.training
