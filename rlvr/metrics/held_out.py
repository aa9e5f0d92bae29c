"""Held-out accuracy during training, scored as `rlvr evaluate` scores it.

Why TRL's loop (`eval_strategy: steps`, `eval_steps`, `num_generations_eval`; the recipe's `eval_prompts` picks the
first N held-out prompts) and not one of our own: it is what a TRL user sets, its rows are `eval_*` (wandb and
TensorBoard draw `eval/*`), and its batches are scored by the recipe's rewards, so the readings see them, on a plain
TRL trainer too (`with_readings`). `HeldOutCallback` adds `rlvr evaluate`'s figures (`HELD_OUT` in keys.py), from
`rlvr.metrics.scoring.summarize`, the summary `rlvr evaluate` writes, over the whole evaluation: TRL averages a
per-batch value over batches, which would weigh word lengths by batch, so they are returned once, when the last
held-out completion is in.
"""

from __future__ import annotations

from rlvr.metrics.keys import BY_LENGTH, EXACT_MATCH, HELD_OUT, OVERALL, held_out_length_key
from rlvr.metrics.reward_batch import RewardBatch, RewardBatchCallback
from rlvr.metrics.scoring import summarize


class HeldOutCallback(RewardBatchCallback):
    """Collects an evaluation's scored completions (held-out prompts x num_generations_eval) and returns the
    `HELD_OUT` figures when all are in."""

    def __init__(self, completions: int):
        self.completions = completions
        self.records: list[dict] = []

    def on_rewards(self, args, state, control, batch: RewardBatch):
        if batch.mode != "eval":
            return None
        exact, truncated = batch.exact().tolist(), batch.truncated or [None] * batch.size
        components = {name: values.tolist() for name, values in batch.components().items()}
        for i, (row, text, length) in enumerate(zip(batch.rows, batch.completions, batch.completion_lengths)):
            self.records.append(
                {
                    "prompt_id": len(self.records) // batch.num_generations,
                    "exact": exact[i],
                    "answer": row.get("answer"),
                    "difficulty": row.get("difficulty"),
                    "completion": text,
                    "completion_tokens": length,
                    "truncated": truncated[i],
                    **{name: values[i] for name, values in components.items()},
                }
            )
        if len(self.records) < self.completions:
            return None
        records, self.records = self.records[: self.completions], []  # beyond: a distributed sampler's padding
        return held_out_figures(summarize(records, batch.num_generations, [1], list(components)))


def held_out_figures(summary: dict) -> dict[str, float]:
    """`rlvr evaluate`'s summary as `HELD_OUT` keys: overall, and exact match per word length when there are several."""
    figures = {name: summary[OVERALL][name] for name in HELD_OUT if name in summary[OVERALL]}
    if len(lengths := summary[BY_LENGTH]) > 1:
        figures.update({held_out_length_key(length): block[EXACT_MATCH] for length, block in lengths.items()})
    return figures


def held_out_callback(trainer) -> HeldOutCallback | None:
    """The callback for a trainer with one sized eval_dataset (TRL evaluates it every eval_steps), else None."""
    dataset = trainer.eval_dataset
    if dataset is None or isinstance(dataset, dict) or not hasattr(dataset, "__len__"):
        return None
    return HeldOutCallback(len(dataset) * trainer.num_generations_eval)
