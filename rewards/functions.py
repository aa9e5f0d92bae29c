"""The reward components, as plain TRL reward functions: `fn(completions, **dataset_columns) -> list[float]`.

    correctness  reasoning_gym's own `score_answer` on the last <answer>...</answer> (partial credit per position)
    format       0.25 for each of <think>, </think>, <answer>, </answer> present
    penalty      DAPO's soft overlong penalty on completion length in tokens (TRL's implementation)
    binary       correctness * (format == 1); a metric, not a training reward

Every function returns one float per completion and never raises: a completion it cannot score gets 0.0.
"""

from __future__ import annotations

import json
from functools import lru_cache

from rlvr.rewards.text import completion_text, extract_last_answer

FORMAT_TAGS = ("<think>", "</think>", "<answer>", "</answer>")


@lru_cache(maxsize=None)
def _scorer(task: str):
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(task)


def score_completion(text: str, answer: str, metadata: dict) -> float:
    """The task's own score for one completion text; 0.0 when the task's scorer fails."""
    try:
        entry = {"answer": answer, "metadata": metadata}
        return float(_scorer(metadata.get("source_dataset", "spell_backward"))(extract_last_answer(text), entry))
    except Exception:  # noqa: BLE001 - reasoning_gym scorers can raise on odd answers; a reward must not
        return 0.0


def _metadata(raw) -> dict:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if raw else {}
        return parsed if isinstance(parsed, dict) else {}
    except (TypeError, ValueError):
        return {}


def correctness(completions, answer, metadata=None, **kwargs) -> list[float]:
    """reasoning_gym's score for the last <answer> of each completion; no answer tag scores 0."""
    metadata = metadata if metadata is not None else [None] * len(completions)
    return [
        score_completion(completion_text(c), str(a), _metadata(m)) if a is not None else 0.0
        for c, a, m in zip(completions, answer, metadata)
    ]


def format_score(text: str) -> float:
    return sum(0.25 for tag in FORMAT_TAGS if tag in text)


def format(completions, **kwargs) -> list[float]:  # noqa: A001 - the component's name in configs and metrics
    """0.25 per tag present, 1.0 for a completion with all four."""
    return [format_score(completion_text(c)) for c in completions]


def binary(completions, answer, metadata=None, **kwargs) -> list[float]:
    """Strict success: full partial-credit correctness only when the format is complete."""
    scores = correctness(completions, answer, metadata)
    return [s * (format_score(completion_text(c)) == 1.0) for s, c in zip(scores, completions)]


def overlong_penalty(max_length: int, cache_length: int):
    """DAPO's soft overlong penalty: 0 up to max_length - cache_length tokens, then linear to -1 at max_length."""
    from trl.rewards import get_soft_overlong_punishment

    penalty = get_soft_overlong_punishment(max_completion_len=max_length, soft_punish_cache=cache_length)
    penalty.__name__ = "penalty"  # instance attribute: TRL logs the reward under this name
    return penalty
