"""`success` is 0/1 (exact answer and full format) where `binary` carries partial credit; MaxRL trains on it; the
reward-hack watch `step/false_full_credit` counts wrong answers that reasoning_gym's scorer pays in full, in training
and in evaluation by word length; `capped_correctness` closes that route."""

import json

import pytest
import reasoning_gym
import torch
from rlvr.rewards import REWARD_REGISTRY, binary, capped_correctness, correctness, exact_answer, success
from rlvr.rewards.registry import ALWAYS_MEASURED, resolve_reward_funcs
from test_rewards import ANSWER, CRAFTED, reasoning_gym_score

from rlvr.analysis.evaluate import format_table
from rlvr.metrics.keys import KNOWN_ORDER
from rlvr.metrics.reward_batch import RewardBatch, reward_components
from rlvr.metrics.scoring import summarize
from rlvr.metrics.step_metrics import compute_step_metrics
from rlvr.training.algorithms import ALGORITHMS, compute_advantages

SCORER = reasoning_gym.get_score_answer_fn("spell_backward")
WORD = "planet"  # 6 letters: six terms of 1/6 sum to 0.9999999999999999, not 1.0, so no -0.2 for a wrong answer
REVERSED = WORD[::-1]
TAGGED = "<think>{0}</think><answer>{0}</answer>"


def meta(word: str) -> str:
    return json.dumps({"source_dataset": "spell_backward", "word": word, "word_len": len(word)})


@pytest.mark.parametrize("text", CRAFTED)
def test_exact_answer_is_reasoning_gyms_exact_branch(text):
    """At 3 letters the partial-credit sum is exactly 1.0, so reasoning_gym scores 1.0 only by equality."""
    assert exact_answer(text, ANSWER) == (reasoning_gym_score(text) == 1.0)


def test_the_right_word_plus_extra_characters_scores_full_credit_in_reasoning_gym():
    hacked = REVERSED + "xyz"
    score = SCORER(hacked, {"answer": REVERSED})
    assert score != 1.0 and torch.tensor(score, dtype=torch.float32).item() == 1.0  # full credit in float32
    assert correctness([TAGGED.format(hacked)], [REVERSED], [meta(WORD)]) == [score]  # bit-identical to reasoning_gym


def test_success_is_0_1_where_binary_carries_partial_credit():
    texts = [
        TAGGED.format(REVERSED),
        TAGGED.format(REVERSED + "xyz"),
        TAGGED.format(REVERSED[:3] + "qqq"),
        f"<answer>{REVERSED}</answer>",
        TAGGED.format(REVERSED.upper()),
    ]
    answers, metas = [REVERSED] * len(texts), [meta(WORD)] * len(texts)
    assert success(texts, answers, metas) == [1.0, 0.0, 0.0, 0.0, 1.0]
    partial = binary(texts, answers, metas)
    assert partial[0] == 1.0 and partial[1] == pytest.approx(1.0) and partial[2] == pytest.approx(0.5)
    assert partial[3] == 0.0  # format incomplete


def test_success_is_measured_in_every_run_and_listed_with_the_built_in_components():
    assert REWARD_REGISTRY["success"] is success and "success" in ALWAYS_MEASURED and "success" in KNOWN_ORDER
    rewards = resolve_reward_funcs(["correctness", "format"], [1.0, 0.5])
    assert rewards.names[-1] == "success" and rewards.weights[-1] == 0.0


def test_maxrl_advantage_uses_success_not_partial_credit():
    """Group of 4 with partial credit [1, 0.5, 0.5, 0] on correctness (binary the same), one exact answer: MaxRL's
    p is the success rate 1/4, so A = (1 - 1/4) / (1/4) = 3 and -1; on binary it would have been 1 and 0 and -1."""
    assert ALGORITHMS["maxrl"].advantage_reward == "success"
    texts = [
        TAGGED.format(REVERSED),
        TAGGED.format(REVERSED[:3] + "qqq"),
        TAGGED.format(REVERSED[:3] + "zzz"),
        TAGGED.format("qqqqqq"),
    ]
    answers, metas = [REVERSED] * 4, [meta(WORD)] * 4
    columns = [correctness(texts, answers, metas), [1.0] * 4, success(texts, answers, metas)]
    components = reward_components(
        torch.tensor(columns).T, ["correctness", "format", "success"], torch.tensor([1.0, 0.5, 0.0])
    )
    assert components["binary"].tolist() == pytest.approx([1.0, 0.5, 0.5, 0.0])
    assert compute_advantages("maxrl", components, 4).tolist() == pytest.approx([3.0, -1.0, -1.0, -1.0])


def hand_batch(texts: list[str], answers: list[str], words: list[str], num_generations: int) -> RewardBatch:
    names = ["correctness", "format", "success"]
    metas = [meta(w) for w in words]
    columns = [REWARD_REGISTRY[name](completions=texts, answer=answers, metadata=metas) for name in names]
    return RewardBatch(
        rewards_per_func=torch.tensor(columns, dtype=torch.float32).T,
        names=names,
        weights=torch.tensor([1.0, 0.5, 0.0]),
        num_generations=num_generations,
        completions=texts,
        rows=[{"answer": a} for a in answers],
        completion_lengths=[len(t) for t in texts],
    )


def test_false_full_credit_counts_the_hacked_completions():
    texts = [
        TAGGED.format(REVERSED + "xyz"),  # wrong, full credit in float32: counted
        TAGGED.format(REVERSED),  # exact: not counted
        TAGGED.format("nus" + "x"),  # 3 letters: reasoning_gym takes 0.2 off, not full: not counted
        TAGGED.format("qq"),
    ]
    batch = hand_batch(texts, [REVERSED, REVERSED, "nus", "nus"], [WORD, WORD, "sun", "sun"], 2)
    metrics = compute_step_metrics(batch)
    assert metrics["step/false_full_credit"] == 0.25
    assert metrics["step/completion_tokens/correct"] == len(texts[1])


def test_evaluation_reports_false_full_credit_by_word_length():
    records = [
        {
            "prompt_id": 0,
            "difficulty": 6,
            "correctness": 1.0,
            "format": 1.0,
            "success": 0.0,
            "binary": 1.0,
            "exact": False,
        },
        {
            "prompt_id": 0,
            "difficulty": 6,
            "correctness": 1.0,
            "format": 1.0,
            "success": 1.0,
            "binary": 1.0,
            "exact": True,
        },
        {
            "prompt_id": 1,
            "difficulty": 3,
            "correctness": 0.8,
            "format": 1.0,
            "success": 0.0,
            "binary": 0.8,
            "exact": False,
        },
        {
            "prompt_id": 1,
            "difficulty": 3,
            "correctness": 1.0,
            "format": 1.0,
            "success": 1.0,
            "binary": 1.0,
            "exact": True,
        },
    ]
    for record, text in zip(records, ("stilts", "stlits", "nus", "nus")):  # what maj@k reads
        record.update(answer=record["difficulty"] == 6 and "stlits" or "nus", completion=f"<answer>{text}</answer>")
    summary = summarize(records, 2, [1])
    assert (
        summary["by_length"]["6"]["false_full_credit"] == 0.5 and summary["by_length"]["3"]["false_full_credit"] == 0.0
    )
    assert summary["overall"]["false_full_credit"] == 0.25 and summary["overall"]["exact_match"] == 0.5
    assert summary["overall"]["mean_success"] == 0.5 and "false_full_credit" in format_table(summary)


def test_capped_correctness_pays_the_hack_less_than_the_exact_answer():
    texts = [TAGGED.format(REVERSED + "xyz"), TAGGED.format(REVERSED), TAGGED.format(REVERSED[:3] + "qqq")]
    answers, metas = [REVERSED] * 3, [meta(WORD)] * 3
    assert REWARD_REGISTRY["capped_correctness"] is capped_correctness
    capped, plain = capped_correctness(texts, answers, metas), correctness(texts, answers, metas)
    assert capped == [0.99, 1.0, plain[2]] and plain[2] == pytest.approx(0.5)
    assert torch.tensor(capped[0], dtype=torch.float32) < torch.tensor(capped[1], dtype=torch.float32)
    rewards = resolve_reward_funcs(["capped_correctness", "format"], [1.0, 0.5])
    assert rewards.names == ["capped_correctness", "format", "correctness", "success"]  # correctness still measured


def test_hack_watch_recipes_and_sweep_plan_equal_samples(tmp_path):
    """The two runs differ only in the trained correctness reward; 3-10 letter words, answers fit, same budget."""
    from conftest import REPO
    from rlvr.recipes.tiny.sft_data import spelled_completion
    from transformers import AutoTokenizer

    from rlvr.analysis.sweep import run_sweep
    from rlvr.inputs import load_recipe_yaml

    plain, capped = (
        load_recipe_yaml(REPO / "recipes" / "tiny" / f"{name}.yaml") for name in ("hack_watch", "hack_watch_capped")
    )
    assert plain["data"]["specs"][0]["config"] == {"min_word_len": 3, "max_word_len": 10}
    assert plain["reward_funcs"] == ["correctness", "format"] and capped["reward_funcs"] == [
        "capped_correctness",
        "format",
    ]
    differing = {key for key in {**plain, **capped} if plain.get(key) != capped.get(key)}
    assert differing == {"reward_funcs", "output_dir"}
    tokenizer = AutoTokenizer.from_pretrained(REPO / plain["model_name_or_path"])
    ten_letters = len(tokenizer(spelled_completion("abcdefghij") + "<|im_end|>")["input_ids"])
    assert plain["max_completion_length"] >= ten_letters + 11  # the main job's margin (37 tokens in 48 for 6 letters)
    result = run_sweep(REPO / "sweeps" / "reward_hack.yaml", out=str(tmp_path), dry_run=True)
    assert result["status"] == {"correctness-s1": "planned", "capped-s1": "planned"}
