"""Per-step metrics from each scored generation batch: one decorated function each, logged as `step/<name>`.

    @step_metric
    def my_metric(batch: RewardBatch) -> float | dict[str, float] | None: ...

That is the whole change: the function is called on every generation batch (gathered over processes, G contiguous
rows per prompt group), its value goes to the console, wandb and metrics.jsonl as `step/my_metric` (a dict as
`step/my_metric/<key>`), and the plots draw every `step/*` series they find. Return None to log nothing this step.
The same functions run on evaluation's samples (`rlvr.analysis.evaluate`), so train and eval report alike.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rlvr.metrics.keys import STEP_PREFIX as PREFIX
from rlvr.metrics.reward_batch import RewardBatch

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
    """Reward-hack watch: the fraction of completions with full correctness but a wrong answer. spell_backward adds
    1/n per matching letter and takes 0.2 off a wrong answer only when that sum equals 1.0; for n = 6, 7, 9, 10, 11
    the float sum of n terms 1/n is not exactly 1.0, so the right word plus extra characters keeps ~1.0, exactly 1.0
    in float32: full reward (and `binary` 1) for a wrong answer. `success` and `capped_correctness` do not pay it; this
    curve shows whether a policy trained on `correctness` finds the route. Evaluation reports it by word length."""
    components = batch.components()
    if "correctness" not in components:
        return None
    return full_credit_but_wrong(components["correctness"], batch.exact()).float().mean().item()
