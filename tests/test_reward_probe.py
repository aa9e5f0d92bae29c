"""The probe that runs before the model loads warns, in one line, about a reward that is constant on its varied
completions (the classic: `len(c)` on a completion that is a list of chat messages)."""

import json

import pytest
from rlvr.rewards.guard import probe_rewards, probe_texts
from rlvr.rewards.registry import resolve_reward_funcs

META = json.dumps({"source_dataset": "spell_backward", "word": "sun", "word_len": 3})


def brevity(completions, **kwargs):
    """A first custom reward as a new user writes it: shorter is better, by len(c)."""
    return [1.0 / (1 + len(c)) for c in completions]


def rows(conversational: bool) -> list[dict]:
    def prompt(word):
        text = f"Spell this word backward: {word}"
        return [{"role": "user", "content": text}] if conversational else text

    return [{"prompt": prompt(w), "question": w, "answer": w[::-1], "metadata": META} for w in ("sun", "planet")]


def test_len_of_a_message_list_is_constant_and_named_in_one_line(capsys):
    rewards = resolve_reward_funcs(["correctness", "format", "test_reward_probe.brevity"], [1.0, 0.5, 0.1], 512, 128)
    probe_rewards(rewards, rows(conversational=True))
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1  # brevity only: correctness, format, success and the (short-completion) penalty are quiet
    assert lines[0].startswith("warning: reward_funcs: brevity returned 0.5 for every probe completion")
    assert "lists of chat messages" in lines[0] and "rlvr.rewards.functions.completion_text" in lines[0]


def test_the_same_reward_on_plain_text_completions_varies_and_stays_quiet(capsys):
    probe_rewards(resolve_reward_funcs(["correctness", "format", "test_reward_probe.brevity"]), rows(False))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("name", ["correctness", "format", "success", "capped_correctness"])
def test_probe_completions_give_the_built_in_rewards_contrast(name):
    from rlvr.rewards import REWARD_REGISTRY

    texts = probe_texts("nus")
    scores = REWARD_REGISTRY[name](completions=texts, answer=["nus"] * 3, metadata=[META] * 3)
    assert len(set(scores)) > 1
