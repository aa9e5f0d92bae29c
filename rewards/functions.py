"""The reward components, as plain TRL reward functions: `fn(completions, **dataset_columns) -> list[float]`.

    correctness  reasoning_gym's own `score_answer` on the last <answer>...</answer> (partial credit per position)
    format       0.25 for each of <think>, </think>, <answer>, </answer> present
    penalty      DAPO's soft overlong penalty on completion length in tokens (TRL's implementation)
    success      1.0 when the extracted answer is exactly the expected one and the format is full, else 0.0: the 0/1
                 success indicator (MaxRL's reward, `avg_success`); always measured
    capped_correctness  opt-in: correctness capped at 0.99 unless the answer is exact (closes the full-credit route for
                 wrong answers that `step/false_full_credit` watches)
    binary       correctness * (format == 1), as the course homework defines it: partial credit (spell_backward
                 scores per letter), so it is NOT 0/1; a metric, not a training reward (derived in
                 `rlvr.metrics.reward_batch`)

Every function returns one float per completion and never raises: a completion it cannot score gets 0.0.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from trl.rewards import get_soft_overlong_punishment

FORMAT_TAGS = ("<think>", "</think>", "<answer>", "</answer>")


@cache
def _scorer(task: str):
    # reasoning_gym is imported here, not at start-up: its import costs seconds
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


def format(completions, **kwargs) -> list[float]:
    """0.25 per tag present, 1.0 for a completion with all four."""
    return [format_score(completion_text(c)) for c in completions]


def exact_answer(text: str, answer) -> bool:
    """The last <answer> of `text` is exactly the expected answer: reasoning_gym spell_backward's own exact branch
    (both lower-cased, the answer stripped as its `extract_answer` strips it), the case it scores 1.0 by equality.
    Not `correctness == 1.0`: the partial-credit sum of n terms 1/n is not exactly 1.0 for n = 6, 7, 9, 10, 11, so
    the right word plus extra characters escapes the -0.2 for wrong answers and rounds to exactly 1.0 in float32."""
    extracted = extract_last_answer(text)
    return extracted is not None and answer is not None and extracted.lower() == str(answer).lower()


def success(completions, answer, metadata=None, **kwargs) -> list[float]:
    """1.0 when the answer is exactly right (`exact_answer`) and the format is full (all four tags), else 0.0: the
    0/1 success indicator MaxRL's (b - mean) / mean is derived for. `binary` is its partial-credit counterpart."""
    texts = [completion_text(c) for c in completions]
    return [float(exact_answer(t, a) and format_score(t) == 1.0) for t, a in zip(texts, answer)]


CAPPED_BELOW_EXACT = 0.99  # the most a not-exactly-right answer earns under capped_correctness


def capped_correctness(completions, answer, metadata=None, **kwargs) -> list[float]:
    """Opt-in reward (`reward_funcs: [capped_correctness, format]`): reasoning_gym's partial credit, capped at 0.99
    unless the answer is exactly right, so the right word plus extra characters (full credit in float32, see
    `exact_answer`) no longer ties the exact answer. `correctness` stays bit-identical to reasoning_gym."""
    scores = correctness(completions, answer, metadata)
    texts = [completion_text(c) for c in completions]
    return [s if exact_answer(t, a) else min(s, CAPPED_BELOW_EXACT) for s, t, a in zip(scores, texts, answer)]


def binary_of(correctness, format):
    """THE definition of `binary`: correctness * (format == 1), as the course homework defines it: partial credit, not
    0/1 (see `success`). Floats or tensors alike: the reward function below and the trainer's derived component
    (`rlvr.metrics.reward_batch.reward_components`) both compute it here."""
    return correctness * (format == 1.0)


def binary(completions, answer, metadata=None, **kwargs) -> list[float]:
    """`binary_of` per completion, as a reward function (a dotted-path reward: `rewards.functions.binary`)."""
    scores = correctness(completions, answer, metadata)
    return [float(binary_of(s, format_score(completion_text(c)))) for s, c in zip(scores, completions)]


def overlong_penalty(max_length: int, cache_length: int):
    """DAPO's soft overlong penalty: 0 up to max_length - cache_length tokens, then linear to -1 at max_length."""
    penalty = get_soft_overlong_punishment(max_completion_len=max_length, soft_punish_cache=cache_length)
    penalty.__name__ = "penalty"  # instance attribute: TRL logs the reward under this name
    return penalty


# Completion text: TRL passes strings for text prompts and `[{"role": "assistant", "content": ...}]` for chat ones.
# A tokenizer with a response parser (Qwen3's, under TRL's `add_response_schema`) moves `<think>...</think>` out of
# `content` into `reasoning_content`; it is put back so the format reward sees the tags the model wrote.

THINKING_KEYS = ("reasoning_content", "thinking", "reasoning")


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: [{"type": "text", "text": ...}, ...]
        return "".join(_content_text(part.get("text", "") if isinstance(part, dict) else part) for part in content)
    return str(content)


def _message_text(message: Any) -> str:
    if not isinstance(message, dict):
        return _content_text(message)
    content = _content_text(message.get("content"))
    reasoning = next((message[key] for key in THINKING_KEYS if message.get(key)), None)
    if reasoning is not None and "<think>" not in content:
        content = f"<think>{_content_text(reasoning)}</think>{content}"
    return content


def completion_text(completion: Any) -> str:
    """The completion as one string; never raises (None and odd shapes become their best text, or "")."""
    try:
        if isinstance(completion, list):
            return "".join(
                _message_text(m)
                for m in completion
                if not isinstance(m, dict) or m.get("role", "assistant") == "assistant"
            )
        return _message_text(completion)
    except Exception:  # noqa: BLE001 - a reward must never raise on a completion
        return ""


def extract_last_answer(text: str, tag: str = "answer") -> str | None:
    """reasoning_gym's `extract_answer` (the last `<answer>...</answer>`, stripped) in linear time.

    reasoning_gym's regex `<answer>\\s?(.*?)\\s?</answer>` rescans to the end for every unclosed opening tag, which
    is quadratic on adversarial completions; this scan yields the same matches (leftmost opening, first closing
    after it, non-overlapping) and the same result after `strip()`.
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    last, position = None, 0
    while True:
        start = text.find(opening, position)
        if start < 0:
            return last
        end = text.find(closing, start + len(opening))
        if end < 0:
            return last
        last = text[start + len(opening) : end].strip()
        position = end + len(closing)
