import json

import pytest
import reasoning_gym
from reasoning_gym.utils import extract_answer
from rlvr.rewards import (
    binary,
    capped_correctness,
    correctness,
    format,
    overlong_penalty,
    resolve_reward_funcs,
    success,
)
from rlvr.rewards.functions import completion_text, extract_last_answer

from rlvr.inputs import ConfigError

ANSWER = "nus"
META = json.dumps({"source_dataset": "spell_backward", "word": "sun", "word_len": 3})
CRAFTED = [
    "<think>s u n</think><answer>nus</answer>",
    "<answer>nus</answer>",
    "<answer> nus </answer>",
    "<answer>\nNUS\n</answer>",
    "<answer>nux</answer>",
    "<answer>nu</answer>",
    "<answer>nusx</answer>",
    "<answer>sun</answer><answer>nus</answer>",  # the last answer counts
    "<answer>nus</answer><answer>sun</answer>",
    "<answer>nus",  # unclosed
    "nus</answer>",
    "<answer><answer>nus</answer></answer>",  # nested
    "<answer></answer>",
    "<answer> </answer>",
    "",
    "no tags at all: nus",
    "<think><answer>n</think>us</answer>",
    "<answer>ñus</answer>",
    "<answer>nus🙂</answer>",
    "<ANSWER>nus</ANSWER>",
    "<answer>n\nu\ns</answer>",
    "<think>unclosed <answer>nus</answer>",
    "<answer>\tnus</answer>\n<answer>",
]


REFERENCE_SCORER = reasoning_gym.get_score_answer_fn("spell_backward")


def reasoning_gym_score(text: str) -> float:
    return REFERENCE_SCORER(extract_answer(text), {"answer": ANSWER, "metadata": json.loads(META)})


@pytest.mark.parametrize("text", CRAFTED)
def test_correctness_equals_reasoning_gym(text):
    assert extract_last_answer(text) == extract_answer(text)
    assert correctness([text], answer=[ANSWER], metadata=[META]) == [reasoning_gym_score(text)]


def test_correctness_parity_on_random_completions():
    import random

    rng = random.Random(0)
    pieces = ["<answer>", "</answer>", "<think>", "</think>", "nus", "n", "u", "s", " ", "\n", "x", "é"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(2000)]
    ours = correctness(texts, answer=[ANSWER] * len(texts), metadata=[META] * len(texts))
    assert ours == [reasoning_gym_score(t) for t in texts]


def test_partial_credit_and_other_tasks():
    assert correctness(["<answer>nux</answer>"], answer=["nus"], metadata=[META]) == [pytest.approx(2 / 3)]
    arithmetic = json.dumps({"source_dataset": "basic_arithmetic"})
    assert correctness(
        ["<answer>12</answer>", "<answer>13</answer>"], answer=["12", "12"], metadata=[arithmetic] * 2
    ) == [1.0, 0.0]


def test_format_counts_each_tag():
    assert format(["<think>a</think><answer>b</answer>", "<think>a</think>", "<answer>b", "plain"]) == [
        1.0,
        0.5,
        0.25,
        0.0,
    ]


def test_binary_needs_full_format():
    texts = ["<think>x</think><answer>nus</answer>", "<answer>nus</answer>", "<think></think><answer>nux</answer>"]
    assert binary(texts, answer=[ANSWER] * 3, metadata=[META] * 3) == [1.0, 0.0, pytest.approx(2 / 3)]


def test_conversational_completions_and_split_out_reasoning():
    """TRL passes [{"role": "assistant", "content": ...}]; a response parser moves <think> into reasoning_content."""
    plain = [{"role": "assistant", "content": "<think>s</think><answer>nus</answer>"}]
    parsed = [{"role": "assistant", "reasoning_content": "s u n", "content": "<answer>nus</answer>"}]
    blocks = [{"role": "assistant", "content": [{"type": "text", "text": "<answer>nus</answer>"}]}]
    assert format([plain, parsed, blocks]) == [1.0, 1.0, 0.5]
    assert correctness([plain, parsed, blocks], answer=[ANSWER] * 3, metadata=[META] * 3) == [1.0, 1.0, 1.0]


def test_qwen3_response_parser_output_keeps_the_tags():
    """What TRL 1.16 + transformers 5 hand a reward when the tokenizer has Qwen3's response template."""
    from rlvr.recipes.tiny.model import build_tokenizer
    from trl.chat_template_utils import parse_response, qwen3_template

    tokenizer = build_tokenizer()
    tokenizer.response_template = qwen3_template
    prefix = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    prefix = prefix["input_ids"] if isinstance(prefix, dict) else prefix
    ids = tokenizer("<think>\ns u n</think>\n<answer>nus</answer><|im_end|>", add_special_tokens=False).input_ids
    message = parse_response(tokenizer, ids, prefix=prefix)
    assert "<think>" not in message["content"] and message["reasoning_content"] == "s u n"
    assert format([[message]]) == [1.0]


@pytest.mark.parametrize(
    "completion",
    [None, 42, {"content": None}, [None], [{"role": "assistant"}], [{"content": 3}], b"bytes", float("nan")],
)
def test_rewards_never_raise(completion):
    for fn in (correctness, binary, success, capped_correctness):
        assert fn([completion], answer=[ANSWER], metadata=[META]) == [0.0]
    assert format([completion]) == [0.0]
    assert correctness(["<answer>nus</answer>"], answer=[None], metadata=["not json"]) == [0.0]


class ScanCountingText(str):
    """A completion whose `find` counts the characters it scans (from `start` to the end of the match, or to the end
    of the text): the work of a scan-based extractor, measured without a clock."""

    def find(self, sub, start=0, end=None):
        found = str.find(self, sub, start, len(self) if end is None else end)
        SCANNED.append((len(self) if found < 0 else found + len(sub)) - start)
        return found


SCANNED: list[int] = []
MEGABYTE_TEXTS = ["<answer>" * 130_000, "<answer>" + "x" * 1_000_000, ("<answer>nus</answer>" * 60_000)[:1_000_000]]


def test_megabyte_adversarial_completion_is_scanned_in_linear_time():
    """reasoning_gym's regex rescans to the end for each of the 130,000 unclosed `<answer>`s of the first text
    (~10^11 characters); the extractor reads each character at most twice (an opening search, then a closing one)."""
    for text in MEGABYTE_TEXTS:
        SCANNED.clear()
        expected = extract_last_answer(text)
        assert extract_last_answer(ScanCountingText(text)) == expected
        assert 0 < sum(SCANNED) <= 2 * len(text), (text[:20], sum(SCANNED))
    scores = correctness(MEGABYTE_TEXTS, answer=[ANSWER] * 3, metadata=[META] * 3)
    assert scores[:2] == [0.0, 0.0] and scores[2] == reasoning_gym_score(MEGABYTE_TEXTS[2])


def test_overlong_penalty_is_dapo_soft_penalty():
    penalty = overlong_penalty(max_length=10, cache_length=4)
    assert penalty.__name__ == "penalty"
    assert penalty(completion_ids=[[0] * 6, [0] * 8, [0] * 10, [0] * 11]) == [0.0, -0.5, -1.0, -1.0]


def test_completion_text_shapes():
    assert completion_text("abc") == "abc"
    assert completion_text([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]) == "y"
    assert completion_text(None) == ""


def test_reward_set_measures_components_and_adds_penalty():
    rewards = resolve_reward_funcs(["correctness", "format"], [1.0, 0.5], 512, 128)
    assert rewards.names == ["correctness", "format", "penalty", "success"] and rewards.weights == [1.0, 0.5, 1.0, 0.0]
    only = resolve_reward_funcs(["correctness"])
    assert only.names == ["correctness", "format", "success"] and only.weights == [1.0, 0.0, 0.0]  # measured only
    custom = resolve_reward_funcs(["rewards.functions.binary", "format"], [1.0, 0.1])
    assert custom.names == ["binary", "format", "correctness", "success"]


@pytest.mark.parametrize(
    "names, weights, overlong, field",
    [
        (["correctness", "nope"], None, (None, None), "reward_funcs[1]"),
        (["correctness", "format"], [1.0], (None, None), "reward_weights"),
        (["penalty"], None, (None, None), "reward_funcs[0]"),
        (["correctness"], None, (100, 200), "overlong_cache_length"),
        (["no_such_module.fn"], None, (None, None), "reward_funcs[0]"),
    ],
)
def test_reward_config_errors_name_the_field(names, weights, overlong, field):
    with pytest.raises(ConfigError) as err:
        resolve_reward_funcs(names, weights, *overlong)
    assert err.value.field == field
