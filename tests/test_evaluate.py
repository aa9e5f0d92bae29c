"""Evaluation samples as the trainer samples: the recipe's device and dtype, the chat template kwargs (prompt ids equal
to GRPOTrainer's, byte for byte), the recipe's reward set; QLoRA either reaches from_pretrained or stops in one line."""

import itertools
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from conftest import FAST_RECIPE, REPO, read_jsonl

from rlvr.analysis import evaluate as ev
from rlvr.inputs import ConfigError
from rlvr.metrics.estimators import maj_at_k
from rlvr.metrics.scoring import summarize

THINK_OFF = "<think>\n\n</think>\n\n"


def brevity(completions, completion_ids, **kwargs):
    """A custom reward reached by dotted path (tests/ is on sys.path under pytest): 1 for an empty completion."""
    return [1.0 - min(len(ids), 32) / 32 for ids in completion_ids]


def recipe_file(tmp_path, model_dir, **changes) -> str:
    """FAST_RECIPE pointed at the test session's tiny model, with `changes` applied."""
    recipe = yaml.safe_load(Path(FAST_RECIPE).read_text())
    recipe.update(model_name_or_path=model_dir, build_tiny_model=False, **changes)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


# --- The prompt: the recipe's chat template kwargs, byte for byte as the trainer builds it ------------------------


@pytest.mark.parametrize("thinking", [False, True])
def test_eval_prompt_ids_equal_the_trainers(tmp_path, tiny_model_dir, thinking):
    from rlvr.training.runner import prepare

    config = recipe_file(tmp_path, tiny_model_dir, chat_template_kwargs={"enable_thinking": thinking})
    recipe, trainer, _ = prepare(["--config", config, "--output_dir", str(tmp_path / "run"), "--report_to", "none"])
    prompts = [recipe.dataset["test"][i]["prompt"] for i in range(4)]
    trainer_ids = [list(ids) for ids in trainer._tokenize_prompts(prompts)[0]]
    eval_ids = ev.prompt_token_ids(trainer.processing_class, prompts, recipe.training.chat_template_kwargs)
    assert eval_ids == trainer_ids
    text = trainer.processing_class.decode(eval_ids[0])
    assert text.endswith(THINK_OFF) != thinking  # the tiny template reacts to enable_thinking as Qwen3's does


def test_evaluate_samples_from_the_recipes_prompt_with_its_reward_set(tmp_path, tiny_model_dir, monkeypatch):
    """Generation is replaced by a recorder: what reaches it is the templated prompt, what comes back is scored by
    every reward of the recipe (a custom one included) and derived as the trainer derives total and binary."""
    config = recipe_file(
        tmp_path,
        tiny_model_dir,
        chat_template_kwargs={"enable_thinking": False},
        reward_funcs=["correctness", "format", "test_evaluate.brevity"],
        reward_weights=[1.0, 0.5, 0.25],
    )
    seen = {}

    def fake_generate(sample, prompt_ids, per_batch, num_samples, show_progress=True):
        seen["prompt_ids"] = prompt_ids
        return [[[], [7, 8]] for _ in prompt_ids]  # an empty completion and a two-token one per prompt

    monkeypatch.setattr(ev, "generate", fake_generate)
    summary = ev.evaluate(
        config, num_prompts=3, num_samples=2, ks=(1, 2), output=str(tmp_path / "e.json"), show_progress=False
    )
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert all(tokenizer.decode(ids).endswith(THINK_OFF) for ids in seen["prompt_ids"])
    assert summary["chat_template_kwargs"] == {"enable_thinking": False}
    assert summary["rewards"] == {"correctness": 1.0, "format": 0.5, "brevity": 0.25, "success": 0.0}
    records = read_jsonl(summary["files"]["rollouts"])
    assert [r["brevity"] for r in records[:2]] == [1.0, pytest.approx(1 - 2 / 32)]
    for r in records:
        assert r["total"] == pytest.approx(r["correctness"] + 0.5 * r["format"] + 0.25 * r["brevity"])
        assert r["binary"] == r["correctness"] * (r["format"] == 1.0)
    assert "mean_brevity" in summary["overall"] and "brevity" in ev.format_table(summary)


# --- Device and dtype follow the recipe ---------------------------------------------------------------------------


def test_device_is_cuda_when_present_unless_the_recipe_says_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert ev.eval_device(SimpleNamespace(use_cpu=False, local_process_index=1)) == "cuda:1"
    assert ev.eval_device(SimpleNamespace(use_cpu=True, local_process_index=0)) == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert ev.eval_device(SimpleNamespace(use_cpu=False, local_process_index=0)) == "cpu"


def test_evaluate_loads_the_recipes_dtype_on_its_device(tmp_path, tiny_model_dir):
    config = recipe_file(tmp_path, tiny_model_dir, dtype="bfloat16")
    summary = ev.evaluate(
        config,
        num_prompts=2,
        num_samples=2,
        ks=(1, 2),
        max_new_tokens=4,
        output=str(tmp_path / "e.json"),
        show_progress=False,
    )
    assert (summary["device"], summary["dtype"], summary["backend"]) == ("cpu", "bfloat16", "transformers")
    assert summary["prompts_per_batch"] == ev.SAMPLES_PER_BATCH // 2


def test_load_policy_passes_the_trainers_from_pretrained_arguments(tmp_path, tiny_model_dir, monkeypatch):
    from rlvr.training.config import load_recipe, validate

    calls = []
    monkeypatch.setattr(ev, "create_model_from_path", lambda path, **kw: calls.append(kw) or torch.nn.Linear(1, 1))
    recipe = validate(load_recipe(["--config", recipe_file(tmp_path, tiny_model_dir, attn_implementation="eager")]))
    ev.load_policy(tiny_model_dir, recipe, "cpu")
    assert calls[0]["dtype"] == "float32" and calls[0]["attn_implementation"] == "eager"
    assert calls[0]["device_map"] == {"": "cpu"} and "quantization_config" not in calls[0]


# --- vLLM, progress, bad input ------------------------------------------------------------------------------------


def test_use_vllm_without_vllm_is_one_line(tmp_path, tiny_model_dir):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr.analysis.evaluate",
            "--config",
            recipe_file(tmp_path, tiny_model_dir),
            "--use_vllm",
            "--num_prompts",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 2
    assert [line for line in result.stderr.splitlines() if line.startswith("error")] == [
        ("error: --use_vllm: vLLM is not installed (pip install vllm); drop --use_vllm to sample with transformers")
    ]


@pytest.mark.parametrize(
    "flag, value", [("--num_prompts", "0"), ("--num_samples", "0"), ("--max_new_tokens", "0"), ("--temperature", "-1")]
)
def test_bad_numeric_flags_are_one_line(tmp_path, tiny_model_dir, flag, value):
    with pytest.raises(ConfigError, match=flag):
        ev.main(["--config", recipe_file(tmp_path, tiny_model_dir), flag, value])


def test_progress_column_counts_samples_not_prompts():
    column = ev.SamplesPerSecondColumn(samples_per_prompt=8)
    task = SimpleNamespace(finished=True, finished_time=2.0, elapsed=2.0, completed=10)
    assert column.render(task).plain == "40.0 samples/s"
    assert column.render(SimpleNamespace(finished=False, elapsed=None, completed=0)).plain == "? samples/s"


def test_until_eos_keeps_what_trl_keeps():
    assert ev.until_eos([5, 6, 2, 0, 0], 2) == [5, 6, 2]
    assert ev.until_eos([5, 6], [2, 3]) == [5, 6]


# --- QLoRA: from_pretrained gets the quantization config, or the run stops in one line ----------------------------


def test_load_in_4bit_without_cuda_stops_before_loading(tmp_path, tiny_model_dir):
    result = subprocess.run(
        [
            sys.executable,
            "recipes/grpo.py",
            "--config",
            recipe_file(tmp_path, tiny_model_dir),
            "--load_in_4bit",
            "true",
            "--use_peft",
            "true",
            "--output_dir",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("error: load_in_4bit: bitsandbytes quantization needs a CUDA GPU")
    )
    assert len([line for line in result.stderr.splitlines() if line.startswith("error")]) == 1
    assert not (tmp_path / "r").exists()


def test_load_in_4bit_needs_lora(tmp_path, tiny_model_dir):
    from rlvr.training.config import load_recipe, validate

    loaded = load_recipe(["--config", recipe_file(tmp_path, tiny_model_dir), "--load_in_4bit", "true"])
    with pytest.raises(ConfigError, match="load_in_4bit: quantized weights cannot be trained directly"):
        validate(loaded)


def test_check_quantization_names_the_missing_piece(monkeypatch):
    import importlib.util

    from rlvr.training.model_loading import check_quantization

    model = SimpleNamespace(load_in_4bit=True, load_in_8bit=False, use_peft=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes" else True)
    with pytest.raises(ConfigError, match="load_in_4bit: needs the bitsandbytes package"):
        check_quantization(model, SimpleNamespace(use_cpu=False))
    check_quantization(model, SimpleNamespace(use_cpu=True), dry_run=True)  # the planner plans QLoRA anywhere
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: True)
    check_quantization(model, SimpleNamespace(use_cpu=False))  # CUDA and bitsandbytes: nothing to say


def test_load_in_4bit_reaches_from_pretrained(run_recipe, monkeypatch):
    """With the CUDA/bitsandbytes check satisfied, the trainer's from_pretrained receives TRL's BitsAndBytesConfig
    (4-bit, compute dtype = the recipe's dtype), exactly as trl/scripts/grpo.py passes it."""
    import trl.trainer.grpo_trainer

    import rlvr.training.config

    class Reached(Exception):
        pass

    def fake_create(model_id, **kwargs):
        raise Reached(kwargs)

    monkeypatch.setattr(rlvr.training.config, "check_quantization", lambda *a, **k: None)
    monkeypatch.setattr(trl.trainer.grpo_trainer, "create_model_from_path", fake_create)
    with pytest.raises(Reached) as reached:
        run_recipe("--load_in_4bit", "true", "--use_peft", "true", "--use_bnb_nested_quant", "true")
    kwargs = reached.value.args[0]
    quant = kwargs["quantization_config"]
    assert quant.load_in_4bit and quant.bnb_4bit_use_double_quant and quant.bnb_4bit_quant_type == "nf4"
    assert quant.bnb_4bit_compute_dtype == torch.float32 and kwargs["dtype"] == "float32"


# --- maj@k and pass@k ----------------------------------------------------------------------------------------------


def test_maj_at_k_and_pass_at_k_against_a_hand_count_with_ties():
    """Three prompts x 4 samples (None: no <answer>, no vote; GOD counts as god). Every k-subset of the 4, counted by
    hand; a tie gives each tied answer half.
    Prompt 0 (tac: cat, tac, tac, -): k=1 2/4; k=2 of 6 pairs: tac|tac 1, tac|- x2 2, cat|tac x2 tied 1/2 each, cat|- 0
    -> 4/6; k=4 tac 2-1 -> 1.
    Prompt 1 (god: god, dog, dog, god): k=1 2/4; k=2 god|god 1, dog|dog 0, god|dog x4 1/2 each -> 3/6; k=4 2-2 -> 1/2.
    Prompt 2 (olleh: -, -, hello, hello): 0 at every k.
    So maj@1 = 1/3 (the exact match over all 12 samples), maj@2 = (2/3 + 1/2) / 3 = 7/18, maj@4 = 1/2 (the vote of
    all 4), and for length 3 (prompts 0, 1): 1/2, 7/12, 3/4. pass@k, 2 of 4 right on prompts 0 and 1: pass@2 = 1 -
    C(2,2)/C(4,2) = 5/6 each, pass@4 = 1, so overall 1/3, 5/9, 2/3."""
    samples = {
        0: ("tac", 3, ["cat", "tac", "tac", None]),
        1: ("god", 3, ["GOD", "dog", "dog", "god"]),
        2: ("olleh", 5, [None, None, "hello", "hello"]),
    }
    records = [
        {
            "prompt_id": p,
            "sample": i,
            "answer": answer,
            "difficulty": length,
            "correctness": 0.0,
            "completion": "<think>x</think>" + ("" if a is None else f"<answer>{a}</answer>"),
            "exact": a is not None and a.lower() == answer,
        }
        for p, (answer, length, given) in samples.items()
        for i, a in enumerate(given)
    ]
    summary = summarize(records, 4, [1, 2, 4], components=())
    overall, three = summary["overall"], summary["by_length"]["3"]
    assert (overall["maj@1"], overall["maj@2"], overall["maj@4"]) == pytest.approx((1 / 3, 7 / 18, 1 / 2))
    assert overall["maj@1"] == pytest.approx(overall["exact_match"]) == pytest.approx(overall["pass@1"])
    assert (three["maj@1"], three["maj@2"], three["maj@4"]) == pytest.approx((1 / 2, 7 / 12, 3 / 4))
    assert (overall["pass@1"], overall["pass@2"], overall["pass@4"]) == pytest.approx((1 / 3, 5 / 9, 2 / 3))
    assert "maj@4" in ev.format_table(summary).splitlines()[0]


def test_a_reward_mean_leaves_out_the_samples_it_could_not_score():
    """A custom reward that returns None (stored NaN) for some samples: its mean is over the scored ones, as TRL's
    `rewards/<fn>/mean` is in training, not NaN; a reward that scored none reads None (JSON null), not NaN."""
    nan = float("nan")
    records = [
        {
            "prompt_id": 0,
            "sample": i,
            "answer": "nus",
            "difficulty": 3,
            "completion": "",
            "exact": False,
            "mine": v,
            "never": nan,
        }
        for i, v in enumerate([1.0, nan, 0.0, 0.5])
    ]
    overall = summarize(records, 4, [1], components=("mine", "never"))["overall"]
    assert overall["mean_mine"] == pytest.approx(0.5)
    assert overall["mean_never"] is None
    assert "NaN" not in json.dumps(overall)  # the summary file stays strict JSON


def majority_by_enumeration(votes: list, expected, k: int) -> float:
    """maj@k by listing every k-subset: the mean credit of the expected answer, 1/j when it ties j-ways for the most."""
    credit = []
    for subset in itertools.combinations(votes, k):
        counts = Counter(v for v in subset if v is not None)
        top = [a for a, c in counts.items() if c == max(counts.values())] if counts else []
        credit.append(1 / len(top) if expected in top else 0.0)
    return sum(credit) / len(credit)


def test_maj_at_k_counts_what_enumerating_every_subset_gives():
    rng = random.Random(0)
    for _ in range(200):
        votes = [rng.choice(["a", "b", "c", None]) for _ in range(rng.randint(1, 8))]
        for k in range(1, len(votes) + 1):
            assert maj_at_k(votes, "a", k) == pytest.approx(majority_by_enumeration(votes, "a", k), abs=1e-12)
    votes = ["a", "b", "b", "a", "c", None, "a", "b"]
    assert maj_at_k(votes, "a", 1) == pytest.approx(3 / 8)  # maj@1: the share of right samples
    assert maj_at_k(votes, "a", 8) == pytest.approx(1 / 2)  # maj@n: the vote of all n, a 3-3 tie split
    assert maj_at_k(votes, "c", 8) == 0.0 and maj_at_k(votes, None, 3) == 0.0
    with pytest.raises(ValueError):
        maj_at_k(votes, "a", 9)


@pytest.mark.parametrize(
    "content, message",
    [("{not json", "is not readable JSON"), ("[1, 2]", "must hold"), ('{"r": 16}', "names no base_model_name_or_path")],
)
def test_a_damaged_adapter_config_is_one_error_naming_the_file(tmp_path, content, message):
    from rlvr.training.config import load_recipe, validate

    (tmp_path / "adapter_config.json").write_text(content)
    recipe = validate(load_recipe(["--config", FAST_RECIPE, "--dry_run", "true"]))
    with pytest.raises(ConfigError, match=message) as err:
        ev.load_policy(str(tmp_path), recipe, "cpu")
    assert err.value.field == "--model"
