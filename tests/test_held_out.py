"""Held-out accuracy during training (rlvr/metrics/held_out.py): `rlvr evaluate`'s figures from TRL's evaluation
batches, hand-counted; a real run writes them without changing its training rows; a plain TRL trainer gets them
with `with_readings`; the doctor names a reward that rises while held-out exact match does not, and only then."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import REPO, read_jsonl
from rlvr.rewards.registry import resolve_reward_funcs
from test_doctor import healthy_rows, write_run
from test_readings import load_example

from rlvr.analysis import doctor
from rlvr.analysis.loaders import load_run, read_evaluation
from rlvr.inputs import ConfigError
from rlvr.metrics.callbacks import format_line
from rlvr.metrics.held_out import HeldOutCallback, held_out_figures
from rlvr.metrics.keys import (
    BY_LENGTH,
    EXACT_MATCH,
    OVERALL,
    PROMPTS,
    RECORD_FIELDS,
    SAMPLES,
    is_timing,
    maj_key,
    pass_key,
)
from rlvr.metrics.reward_batch import RewardBatch
from rlvr.metrics.scoring import score, summarize

WORDS = [("sun", "nus", 3), ("star", "rats", 4), ("moon", "noom", 4)]


def said(answer: str, word: str) -> str:
    return f"<think>{' '.join(word)} -> {' '.join(answer)}</think><answer>{answer}</answer>"


# prompt by prompt, G = 2: sun right + wrong, star right + right, moon right + wrong: 4 of 6 exact, 3 of 4 at 4 letters
COMPLETIONS = [
    [said("nus", "sun"), said("nsu", "sun")],
    [said("rats", "star")] * 2,
    [said("noom", "moon"), said("nomo", "moon")],
]


def eval_batch(prompts: list[int], mode: str = "eval") -> RewardBatch:
    rewards = resolve_reward_funcs(["correctness", "format"], [1.0, 0.5], None, None)
    rows = [{"question": WORDS[p][0], "answer": WORDS[p][1], "difficulty": WORDS[p][2]} for p in prompts for _ in "ab"]
    texts = [text for p in prompts for text in COMPLETIONS[p]]
    scores = torch.tensor([f(texts, answer=[r["answer"] for r in rows]) for f in rewards.funcs], dtype=torch.float32).T
    return RewardBatch(
        scores,
        list(rewards.names),
        torch.tensor(rewards.weights),
        2,
        texts,
        rows,
        [30] * len(texts),
        [False] * len(texts),
        mode=mode,
    )


def test_the_figures_are_rlvr_evaluates_over_the_whole_evaluation_hand_counted():
    callback = HeldOutCallback(completions=6)
    assert callback.on_rewards(None, None, None, eval_batch([0, 1, 2], mode="train")) is None  # training: not read
    assert callback.on_rewards(None, None, None, eval_batch([0, 1])) is None  # 4 of 6 in: nothing logged yet
    figures = callback.on_rewards(None, None, None, eval_batch([2]))
    assert figures["exact_match"] == figures["pass@1"] == pytest.approx(4 / 6)
    assert figures["exact_match/3"] == 0.5 and figures["exact_match/4"] == 0.75
    rows = [{"prompt": w, "question": w, "answer": a, "difficulty": d} for w, a, d in WORDS]
    rewards = resolve_reward_funcs(["correctness", "format"], [1.0, 0.5], None, None)
    records = score(rows, COMPLETIONS, rewards)  # `rlvr evaluate`'s own scoring of the same completions
    assert figures == pytest.approx(held_out_figures(summarize(records, 2, [1])))
    assert callback.records == []  # the next evaluation starts afresh


def test_one_schema_for_the_records_and_the_summary_that_the_readers_check(tmp_path):
    """Every field of a record that is not a reward component is in RECORD_FIELDS (the components are the floats);
    the summary is OVERALL and BY_LENGTH blocks, each with its counts and figures, and `read_evaluation` takes it."""
    rows = [{"prompt": w, "question": w, "answer": a, "difficulty": d} for w, a, d in WORDS]
    records = score(rows, COMPLETIONS, resolve_reward_funcs(["correctness", "format"], [1.0, 0.5], None, None))
    assert set(RECORD_FIELDS) <= set(records[0])
    assert {"correctness", "format", "total"} <= {k for k in records[0] if k not in RECORD_FIELDS}
    assert all(isinstance(v, float) for r in records for k, v in r.items() if k not in RECORD_FIELDS)
    summary = summarize(records, 2, [1, 2])
    assert set(summary) == {OVERALL, BY_LENGTH} and list(summary[BY_LENGTH]) == ["3", "4"]
    for block in (summary[OVERALL], *summary[BY_LENGTH].values()):
        assert {PROMPTS, SAMPLES, EXACT_MATCH, pass_key(2), maj_key(2)} <= set(block)
    assert (summary[OVERALL][PROMPTS], summary[OVERALL][SAMPLES]) == (3, 6)
    path = tmp_path / "after.json"
    path.write_text(json.dumps(summary))
    assert read_evaluation(path) == summary
    path.write_text(json.dumps({**summary, BY_LENGTH: {"3": 0.5}}))
    with pytest.raises(ConfigError, match=BY_LENGTH):
        read_evaluation(path)


def test_the_console_line_of_an_evaluation_row_shows_held_out_exact_match():
    line = format_line({"eval_avg_correctness": 0.5, "eval_exact_match": 0.25}, 10, 140, None, prefix="eval_")
    assert line.startswith("eval step 10/140") and "held-out exact 0.250" in line


# ---- the doctor: proxy vs truth ------------------------------------------------------------------------------------


def with_held_out(rows: list[dict], exact) -> list[dict]:
    """Every fifth step evaluated: held-out exact match `exact(step)`."""
    return [{**row, "eval_exact_match": exact(row["step"])} if row["step"] % 5 == 0 else row for row in rows]


def divergences(folder) -> list[doctor.Finding]:
    return [f for f in doctor.diagnose(folder).problems if f.what.startswith("proxy and truth diverge")]


def test_the_doctor_names_a_reward_that_rises_while_held_out_stays_flat(tmp_path):
    healthy = with_held_out(healthy_rows(), lambda step: 0.2 + 0.4 * step / 30)  # reward and truth rise together
    assert divergences(write_run(tmp_path / "healthy", healthy)) == []
    hacked = with_held_out(healthy_rows(), lambda step: 0.06 - 0.001 * step + 0.01 * (step == 10))
    [finding] = divergences(write_run(tmp_path / "hacked", hacked))
    assert finding.step == 5 and "avg_total rose +0.172" in finding.what and "moved -2.5%" in finding.what
    assert "best 6.0% at step 10" in finding.what and "checkpoint of step 10" in finding.remedy
    without = [{k: v for k, v in row.items() if k != "eval_exact_match"} for row in hacked]
    assert divergences(write_run(tmp_path / "no-eval", without)) == []  # no held-out keys: nothing guessed
    assert "held_out" in doctor.diagnose(tmp_path / "no-eval").skipped


def test_the_doctor_reads_a_plain_trl_runs_evaluation_rows(tmp_path):
    history = [{"step": s, "loss": 0.0, "reward": 0.5 + 0.01 * s} for s in range(1, 31)]
    history += [{"step": s, "eval_loss": 0.0, "eval_exact_match": 0.1} for s in range(5, 31, 5)]  # TRL's own rows
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 30, "log_history": history}))
    [finding] = divergences(tmp_path)
    assert "mean reward rose" in finding.what and "(eval_exact_match) moved +0.0%" in finding.what


# ---- real runs ------------------------------------------------------------------------------------------------------

EVAL = [
    "--eval_strategy",
    "steps",
    "--eval_steps",
    "2",
    "--eval_prompts",
    "4",
    "--num_generations_eval",
    "2",
    "--per_device_eval_batch_size",
    "8",
]


def test_a_run_that_evaluates_writes_the_figures_and_trains_exactly_as_without(run_recipe, tmp_path):
    steps = ("--max_steps", "4", "--beta", "0.04")  # a KL term: the reference pass runs in training and evaluation
    _, plain = run_recipe(*steps, output_dir=tmp_path / "plain")
    with_passes, evaluated = run_recipe(*steps, *EVAL, output_dir=tmp_path / "evaluated")
    rows = read_jsonl(f"{evaluated}/metrics.jsonl")
    evaluations = [row for row in rows if "eval_runtime" in row]
    assert [row["step"] for row in evaluations] == [2, 4]
    assert all(
        {"eval_exact_match", "eval_pass@1", "eval_mean_correctness", "eval_loss", "eval_kl"} <= set(row)
        for row in evaluations
    )
    training = lambda rs: [{k: v for k, v in r.items() if not is_timing(k)} for r in rs if "loss" in r]
    assert training(rows) == training(read_jsonl(f"{plain}/metrics.jsonl"))  # a forked RNG: the same samples
    assert [row.get("eval_exact_match") for row in load_run(evaluated).rows] == [
        None,
        evaluations[0]["eval_exact_match"],
        None,
        evaluations[1]["eval_exact_match"],
    ]  # joined to their step

    # eval_log_probs: false: the same run and held-out figures, without TRL's two log-prob passes and their keys
    without, scored_only = run_recipe(*steps, *EVAL, "--eval_log_probs", "false", output_dir=tmp_path / "scored-only")
    passes_keys = ("eval_loss", "eval_kl", "eval_entropy", "eval_clip_ratio")
    lean = read_jsonl(f"{scored_only}/metrics.jsonl")
    assert not any(key.startswith(passes_keys) for row in lean for key in row)
    figures = lambda rs: [
        {k: v for k, v in r.items() if not is_timing(k) and not k.startswith(passes_keys)} for r in rs
    ]
    assert figures(lean) == figures(rows)
    for trainer, passes in ((without, 0), (with_passes, 2)):  # the reference's and the policy's
        calls, pass_ = [], trainer._get_per_token_logps_and_entropies
        trainer._get_per_token_logps_and_entropies = lambda *a, calls=calls, pass_=pass_, **k: (
            calls.append(1) or pass_(*a, **k)
        )
        trainer.evaluate()
        assert len(calls) == passes * len(trainer.get_eval_dataloader()) > 0 or passes == 0 == len(calls)
        assert trainer.beta == with_passes.args.beta  # put back after the evaluation


def test_with_readings_a_plain_trl_trainer_gets_the_same_figures(tmp_path):
    out = tmp_path / "plain"
    trainer = load_example().main(
        [
            "--output_dir",
            str(out),
            "--gradient_accumulation_steps",
            "2",
            "--max_steps",
            "2",
            "--max_completion_length",
            "40",
            "--eval_strategy",
            "steps",
            "--eval_steps",
            "2",
            "--per_device_eval_batch_size",
            "8",
            "--num_completions_to_print",
            "0",
        ],
        model=str(REPO / "models" / "tiny-speller"),
    )
    [evaluation] = [row for row in trainer.state.log_history if "eval_runtime" in row]
    assert 0 <= evaluation["eval_exact_match"] == evaluation["eval_pass@1"] <= 1
    assert {key for key in evaluation if key.startswith("eval_exact_match/")}  # the 8 words span lengths
