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
    """Mean completion length of exactly-correct and of wrong completions. GRPO's per-sequence 1/|o| normalisation
    penalises long wrong answers less than short ones, so wrong completions drift longer; Dr. GRPO removes that bias.
    This is the curve that shows it (TRL's `completions/mean_length` mixes both)."""
    components = batch.components()
    if "correctness" not in components:
        return None
    lengths = torch.tensor(batch.completion_lengths, dtype=torch.float32)
    exact = components["correctness"].cpu() == 1.0
    return {
        "correct": lengths[exact].mean().item() if exact.any() else None,
        "wrong": lengths[~exact].mean().item() if (~exact).any() else None,
    }
