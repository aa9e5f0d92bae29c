"""Per-step metrics from each scored generation batch: one decorated function each, logged as `step/<name>`.

    @step_metric
    def my_metric(batch: RewardBatch) -> float | dict[str, float] | None: ...

is the whole change: called on every generation batch (gathered, G contiguous rows per group), its value is logged
as `step/my_metric` (a dict as `step/my_metric/<key>`, None: nothing this step) and plotted. The same functions run
on evaluation's samples (`rlvr.analysis.evaluate`), so train and eval report alike.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.metrics.keys import STEP_PREFIX as PREFIX
from rlvr.metrics.reward_batch import RewardBatch
from rlvr.rewards.functions import extract_last_answer, format_score

STEP_METRICS: dict[str, Callable[[RewardBatch], float | dict | None]] = {}


def step_metric(fn: Callable[[RewardBatch], float | dict | None]):
    """Register `fn` under its name; it is computed for every scored generation batch."""
    STEP_METRICS[fn.__name__] = fn
    return fn


def compute_step_metrics(batch: RewardBatch) -> dict[str, float]:
    """Every registered metric of one batch, flattened to `step/<name>[/<key>]`."""
    metrics = {}
    for name, fn in STEP_METRICS.items():
        value = fn(batch)
        if isinstance(value, dict):
            metrics.update({f"{PREFIX}{name}/{key}": float(v) for key, v in value.items() if v is not None})
        elif value is not None:
            metrics[f"{PREFIX}{name}"] = float(value)
    return metrics


@step_metric
def completion_tokens(batch: RewardBatch) -> dict | None:
    """Mean completion length of exactly-correct (`RewardBatch.exact`) and of other completions. GRPO's per-sequence 1/|o| normalisation
    penalises long wrong answers less than short ones, so wrong completions drift longer; Dr. GRPO removes that bias.
    This is the curve that shows it (TRL's `completions/mean_length` mixes both)."""
    components = batch.components()
    if "correctness" not in components:
        return None
    lengths = torch.tensor(batch.completion_lengths, dtype=torch.float32)
    exact = batch.exact()
    return {
        "correct": lengths[exact].mean().item() if exact.any() else None,
        "wrong": lengths[~exact].mean().item() if (~exact).any() else None,
    }


def full_credit_but_wrong(correctness: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """(N,) bool: correctness counts as full (>= 1 in float32) while the extracted answer is not exactly right."""
    return (correctness.float().cpu() >= 1.0) & ~exact.cpu()


@step_metric
def false_full_credit(batch: RewardBatch) -> float | None:
    """Reward-hack watch: the fraction of completions with full correctness but a wrong answer (the float32 route
    `rlvr.rewards.functions.exact_answer` describes; `success` and `capped_correctness` do not pay it): whether a
    policy trained on `correctness` finds it. Evaluation reports it by word length."""
    components = batch.components()
    if "correctness" not in components:
        return None
    return full_credit_but_wrong(components["correctness"], batch.exact()).float().mean().item()


@step_metric
def truncated(batch: RewardBatch) -> float | None:
    """The share of completions cut off at `max_completion_length` (`is_truncated`): a cut completion usually scores as
    wrong, so a length budget reads like a worse model. TRL's `completions/clipped_ratio`, also where TRL has none."""
    if batch.truncated is None:
        return None
    return torch.tensor(batch.truncated, dtype=torch.float32).mean().item()


@step_metric
def truncated_wrong(batch: RewardBatch) -> float | None:
    """Among the completions that are not exactly right (`RewardBatch.solved`: success 0), the share that were cut
    off; None when every completion is right (or the rows have no answer). Near 1: the wrong answers are length
    failures, not wrong spellings."""
    if batch.truncated is None or not batch.has_answers():
        return None
    wrong = ~batch.solved()
    if not wrong.any():
        return None
    return torch.tensor(batch.truncated)[wrong].float().mean().item()


def _letters(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalpha())


def think_spells_the_word(think: str, row: dict) -> bool:
    """spell_backward: the think works on the question's word (the expected answer reversed) when at least half of
    its letters are letters of that word, case-folded, everything but letters ignored. `s u n -> n u s` relates to
    `sun`, and so does a wrong attempt built from its letters (`s n u`); filler (`let me think`), a spelling of
    another word (`c o w`) or a think with no letters does not."""
    word = set(_letters(str(row.get("answer") or "")))
    letters = _letters(think)
    return bool(word) and bool(letters) and sum(ch in word for ch in letters) * 2 >= len(letters)


# Per task (the rows' `task` column): whether a think relates to its question. Tasks not listed are judged on empty
# content only: a relatedness rule is built from one task's answer shape and would misjudge another's reasoning.
THINK_RELATES = {"spell_backward": think_spells_the_word}


def hollow_content(text: str, row: dict) -> bool:
    """Full format (all four tags, the format reward's 1.0) around hollow content: no content can be read between
    the tags (they are out of order), the last `<think>` or the last `<answer>` holds only whitespace, or the think
    does not relate to the question (`THINK_RELATES`, for the tasks that define it). The format reward pays such a
    completion in full; this is the reward hack of writing the tags and nothing in them."""
    if format_score(text) != 1.0:
        return False
    think, answer = extract_last_answer(text, "think"), extract_last_answer(text)
    if not think or not answer:  # None (no readable content) or "" (whitespace only, stripped)
        return True
    relates = THINK_RELATES.get(row.get("task"))
    return relates is not None and row.get("answer") is not None and not relates(think, row)


@step_metric
def hollow_format(batch: RewardBatch) -> float:
    """Reward-hack watch: the share of completions with full format but hollow content (`hollow_content`). Read it
    beside `avg_format`: format rising while this rises is the format reward being paid for empty tags."""
    return sum(hollow_content(text, row) for text, row in zip(batch.completions, batch.rows)) / max(batch.size, 1)


@step_metric
def unscored(batch: RewardBatch) -> dict[str, float]:
    """Share of the batch's completions each reward function did not score (returned None or NaN). TRL leaves such a
    completion out of that function's mean and sums the others over it (nansum), so `avg_<name>` is a mean over the
    scored ones only: this says how many those were. Logged for every function (0.0 when it scored them all)."""
    return batch.unscored()
