"""Held-out accuracy during training, scored as `rlvr evaluate` scores it.

    eval_strategy: steps       # TRL's own evaluation loop, every eval_steps optimizer steps
    eval_steps: 10
    eval_prompts: 32           # the first 32 held-out prompts (the recipe's test split): one fixed subset
    num_generations_eval: 2    # samples per held-out prompt

Why TRL's loop and not one of our own: a TRL user sets `eval_strategy`/`eval_steps` and expects `eval_*` rows (wandb
and TensorBoard draw them as `eval/*`). GRPOTrainer then samples the held-out prompts with the training sampler and
scores them with the recipe's reward functions, so the readings (`rlvr.metrics.readings`) see every evaluation batch,
with `with_readings` on a plain TRL trainer too. `HeldOutCallback` adds what TRL does not log and `rlvr evaluate`
reports: exact match, mean correctness and pass@1, overall and by word length (`HELD_OUT` in rlvr/metrics/keys.py),
computed by `rlvr.analysis.evaluate.summarize` over all the evaluation's completions. TRL averages a value logged
per batch over the evaluation's batches, which would weigh word lengths by batch; so the figures are returned once,
when the last completion of the held-out set is in. README's before/after figures stay the full `rlvr evaluate`.
"""

from __future__ import annotations

from rlvr.analysis.evaluate import summarize
from rlvr.metrics.keys import HELD_OUT, held_out_length_key
from rlvr.metrics.reward_batch import RewardBatch, RewardBatchCallback


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
            self.records.append({"prompt_id": len(self.records) // batch.num_generations, "exact": exact[i],
                                 "difficulty": row.get("difficulty"), "completion": text, "completion_tokens": length,
                                 "truncated": truncated[i], **{name: values[i] for name, values in components.items()}})
        if len(self.records) < self.completions:
            return None
        records, self.records = self.records[:self.completions], []  # beyond: a distributed sampler's padding
        return held_out_figures(summarize(records, batch.num_generations, [1], list(components)))


def held_out_figures(summary: dict) -> dict[str, float]:
    """`rlvr evaluate`'s summary as `HELD_OUT` keys: overall, and exact match per word length when there are several."""
    figures = {name: summary["overall"][name] for name in HELD_OUT if name in summary["overall"]}
    if len(lengths := summary["by_length"]) > 1:
        figures.update({held_out_length_key(length): block["exact_match"] for length, block in lengths.items()})
    return figures


def held_out_callback(trainer) -> HeldOutCallback | None:
    """The callback for a trainer with one sized eval_dataset (TRL evaluates it every eval_steps), else None."""
    dataset = trainer.eval_dataset
    if dataset is None or isinstance(dataset, dict) or not hasattr(dataset, "__len__"):
        return None
    return HeldOutCallback(len(dataset) * trainer.num_generations_eval)
