"""Held-out completions scored and summarised as `rlvr evaluate` reports them: the records (`score`) and their summary
(`summarize`: exact match, the mean of every reward component, pass@k, maj@k and the trainer's watches, overall and
per word length). The evaluate command, the held-out evaluation during training (`rlvr.metrics.held_out`) and the tiny
model's SFT check share them, so a figure means the same wherever it is read.

Exact match is the extracted answer equal to the expected one (`rlvr.rewards.functions.exact_answer`), not
correctness == 1.0, which a wrong answer can reach (`step/false_full_credit`). pass@k and maj@k are exact over every
k-subset of a prompt's n samples (`rlvr.metrics.estimators`): pass@1 and maj@1 both equal the exact match.
"""

from __future__ import annotations

import math
from collections import defaultdict

import torch

from rlvr.metrics.estimators import maj_at_k, pass_at_k
from rlvr.metrics.keys import (
    BINARY,
    BY_LENGTH,
    EXACT_MATCH,
    OVERALL,
    PROMPTS,
    SAMPLES,
    maj_key,
    mean_key,
    pass_key,
    step_key,
)
from rlvr.metrics.reward_batch import RewardBatch, is_truncated, reward_components
from rlvr.metrics.step_metrics import compute_step_metrics
from rlvr.rewards.functions import exact_answer, extract_last_answer

DEFAULT_COMPONENTS = ("correctness", "format", "success", BINARY)
WATCHES = ("false_full_credit", "truncated", "truncated_wrong", "hollow_format")  # the trainer's step/* watches


def score(rows: list[dict], completions: list[list[str]], rewards, completion_ids=None, stop_ids=None) -> list[dict]:
    """One record per rollout with every component of the recipe's own reward set (custom rewards included), called
    as GRPOTrainer calls them (prompts, completions, completion_ids and every dataset column), plus `total` and
    `binary` from `rlvr.metrics.reward_batch.reward_components`, the trainer's single source for derived components.
    With the ids and the tokenizer's stop ids (EOS, padding), each record says whether the completion was cut off
    (`rlvr.metrics.reward_batch.is_truncated`, the trainer's test) and how many tokens it has."""
    flat = [
        (row, text, ids)
        for row, samples, id_lists in zip(rows, completions, completion_ids or [None] * len(rows))
        for text, ids in zip(samples, id_lists or [None] * len(samples))
    ]
    conversational = bool(rows) and not isinstance(rows[0]["prompt"], str)
    texts = [[{"role": "assistant", "content": text}] if conversational else text for _, text, _ in flat]
    columns = (
        {key: [row[key] for row, _, _ in flat] for key in rows[0] if key not in ("prompt", "completion")}
        if rows
        else {}
    )
    kwargs = {
        "prompts": [row["prompt"] for row, _, _ in flat],
        "completions": texts,
        "completion_ids": [ids for _, _, ids in flat],
        **columns,
    }
    values = torch.tensor(
        [[float("nan") if v is None else v for v in func(**kwargs)] for func in rewards.funcs], dtype=torch.float32
    ).T.reshape(len(flat), len(rewards.funcs))
    components = reward_components(values, list(rewards.names), torch.tensor(rewards.weights))
    records, index = [], 0
    for prompt_id, (row, samples) in enumerate(zip(rows, completions)):
        for sample_id, text in enumerate(samples):
            ids = flat[index][2]
            record = {
                "prompt_id": prompt_id,
                "sample": sample_id,
                "question": row["question"],
                "answer": row["answer"],
                "difficulty": row["difficulty"],
                "task": row.get("task"),
                "completion": text,
                "completion_tokens": None if ids is None else len(ids),
                "truncated": None if ids is None or stop_ids is None else is_truncated(ids, stop_ids),
            }
            record.update({name: float(values[index].item()) for name, values in components.items()})
            record["exact"] = exact_answer(text, row["answer"])
            records.append(record)
            index += 1
    return records


def watches(rollouts: list[dict]) -> dict[str, float]:
    """The trainer's own `step/*` watches (rlvr/metrics/step_metrics.py) over a set of evaluation records: full
    credit for a wrong answer, the cut-off share overall and among wrong answers, hollow format. A watch the
    records cannot support (no correctness, no token ids) is left out."""
    metrics = compute_step_metrics(RewardBatch.from_records(rollouts, ["correctness"], [1.0], 1))
    if any(r.get("correctness") is None for r in rollouts):
        metrics.pop(step_key("false_full_credit"), None)
    return {name: metrics[step_key(name)] for name in WATCHES if step_key(name) in metrics}


def step_metrics_of(records: list[dict], rewards, num_samples: int) -> dict[str, float]:
    """The trainer's registered `step/*` metrics (rlvr/metrics/step_metrics.py) over all evaluation samples, so train
    and eval report alike (prompts play the role of groups, num_samples of G)."""
    return compute_step_metrics(RewardBatch.from_records(records, rewards.names, rewards.weights, num_samples))


def vote(text: str) -> str | None:
    """A sample's vote in maj@k: its extracted answer compared as `exact_answer` compares it (lower-cased); None (no
    vote) without an <answer>."""
    answer = extract_last_answer(text)
    return None if answer is None else answer.lower()


def summarize(records: list[dict], num_samples: int, ks: list[int], components=DEFAULT_COMPONENTS) -> dict:
    """Exact match, the mean of every reward component, pass@k, maj@k and the `watches` (false full credit, truncation,
    hollow format), overall and per difficulty (word length). pass@k and maj@k are over all `num_samples` samples of
    each prompt (`rlvr.metrics.estimators`)."""
    by_prompt = defaultdict(list)
    for record in records:
        by_prompt[record["prompt_id"]].append(record)

    def block(prompt_ids: list[int]) -> dict:
        rollouts = [r for p in prompt_ids for r in by_prompt[p]]
        correct = [sum(r["exact"] for r in by_prompt[p]) for p in prompt_ids]
        votes = [
            ([vote(r["completion"]) for r in by_prompt[p]], str(by_prompt[p][0]["answer"]).lower()) for p in prompt_ids
        ]
        out = {PROMPTS: len(prompt_ids), SAMPLES: len(rollouts)}
        out[EXACT_MATCH] = sum(r["exact"] for r in rollouts) / len(rollouts)
        for key in components:
            out[mean_key(key)] = scored_mean([r[key] for r in rollouts])
        for k in ks:
            out[pass_key(k)] = sum(pass_at_k(num_samples, c, k) for c in correct) / len(correct)
        for k in ks:
            out[maj_key(k)] = sum(maj_at_k(answers, expected, k) for answers, expected in votes) / len(votes)
        out.update(watches(rollouts))
        return out

    lengths = defaultdict(list)
    for prompt_id, rollouts in by_prompt.items():
        lengths[rollouts[0]["difficulty"]].append(prompt_id)
    return {
        OVERALL: block(list(by_prompt)),
        BY_LENGTH: {str(length): block(ids) for length, ids in sorted(lengths.items(), key=_length_order)},
    }


def scored_mean(values: list) -> float | None:
    """The mean over the samples a reward function scored: a None or NaN (it could not score that one) is left out,
    as TRL's `rewards/<fn>/mean` leaves it out in training; None when it scored none."""
    scored = [v for v in values if v is not None and not math.isnan(v)]
    return sum(scored) / len(scored) if scored else None


def _length_order(item) -> tuple:
    """Integer word lengths in numeric order (3, 4, ..., 10), then any other difficulty by its text."""
    length = item[0]
    return (0, length, "") if isinstance(length, int) else (1, 0, str(length))
