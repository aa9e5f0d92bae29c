"""The readings in any `trl.GRPOTrainer`: a reward wrapper that turns every scored generation batch into one
`RewardBatch` for the `RewardBatchCallback`s.

    from rlvr.metrics.readings import with_readings
    trainer = with_readings(GRPOTrainer(model=..., reward_funcs=[...], args=training_args, train_dataset=...))

How the batch is gathered over processes, and why the readings reach TRL's logs through the `log_metric` argument
TRL hands every reward function (a callback's `on_log` runs after `Trainer.log` has copied the row into
`log_history`): docs/evaluation-and-reports.md. Our own trainer (`RewardDispatchMixin`) uses the same wrapper.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from accelerate.utils import gather_object
from torch import nn

from rlvr.metrics.held_out import held_out_callback
from rlvr.metrics.keys import ALL_TRUNCATED, GROUP_SIDES, IDENTICAL, TOTAL, UNSCORED_PREFIX, zero_std_side_key
from rlvr.metrics.reward_batch import (
    RewardBatch,
    RewardBatchCallback,
    flat_groups,
    group_side,
    group_summary,
    is_truncated,
)
from rlvr.metrics.step_metrics import compute_step_metrics
from rlvr.rewards.functions import completion_text
from rlvr.rewards.guard import RewardFunctionError
from rlvr.runs.checkpoints import last_complete_checkpoint

ROW_KEYS = ("question", "answer", "difficulty", "task")  # the dataset columns a batch (and the rollouts) keeps


class ScoredColumn:
    """One reward function of the trainer, as TRL calls it; passes its scores on to the `RewardReadings`."""

    def __init__(self, readings: RewardReadings, index: int, func: Callable):
        self.readings, self.index, self.func = readings, index, func
        self.__name__ = getattr(func, "__name__", type(func).__name__)  # TRL logs the reward under this name

    def __call__(self, **kwargs) -> list[float | None]:
        return self.readings.call(self.readings.scored, self.index, kwargs)


class RewardReadings:
    """A GRPOTrainer's reward functions, wrapped in place. TRL calls them in list order on every rank; after the last
    one, `assemble` gathers every process's rows with one collective and hands the `RewardBatch` to `on_batch`
    (default `dispatch`). `call(fn, *args)` runs each wrapped call (our trainer times it as scoring). Reward models
    and async reward functions are refused in one line: TRL scores them where no wrapper sees their values."""

    def __init__(
        self, trainer, on_batch: Callable[[RewardBatch, dict], None] | None = None, call: Callable | None = None
    ):
        for func, name in zip(trainer.reward_funcs, trainer.reward_func_names):
            if (
                isinstance(func, nn.Module)
                or inspect.iscoroutinefunction(func)
                or inspect.iscoroutinefunction(type(func).__call__)  # a callable object with an async __call__
            ):
                raise TypeError(
                    f"readings: reward {name!r} is a reward model or an async function; the readings see "
                    "the scores of plain (synchronous) reward functions only"
                )
        self.trainer = trainer
        self.on_batch = on_batch or self.dispatch
        self.call = call or (lambda fn, *args: fn(*args))
        tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        self.stop_ids = {*trainer.eos_token_ids, tokenizer.pad_token_id}  # TRL's own test for clipped completions
        self.columns = [ScoredColumn(self, i, func) for i, func in enumerate(trainer.reward_funcs)]
        trainer.reward_funcs[:] = self.columns  # the list TRL scores with, in place
        self._scores: dict[int, list] = {}
        self.batch: RewardBatch | None = None  # the last assembled batch

    def column_values(self, index: int, func: Callable, kwargs: dict) -> list:
        """The reward function's own scores for this process's completions (None stays None: TRL's NaN)."""
        return func(**kwargs)

    def scored(self, index: int, kwargs: dict) -> list:
        values = self.column_values(index, self.columns[index].func, kwargs)
        if not isinstance(values, (list, tuple)) or len(values) != len(kwargs["completions"]):
            return values  # TRL refuses it in its own words; the readings do not guess
        self._scores[index] = [float("nan") if v is None else float(v) for v in values]
        if len(self._scores) == len(self.columns):
            scores, self._scores = self._scores, {}
            self.batch = self.assemble(scores, kwargs)
            self.refuse_never_scored(self.batch, kwargs)
            self.on_batch(self.batch, kwargs)
        return values

    def refuse_never_scored(self, batch: RewardBatch, kwargs: dict) -> None:
        """A reward function that scored none of a training step's completions (None or NaN for all) stops the run in
        one line naming it: TRL would train on the other functions as if it were not there, and the readings of it
        would be empty. Decided on the gathered batch, so every process stops alike; the checkpoints stay."""
        if batch.mode != "train" or (name := batch.never_scored()) is None:
            return
        step = getattr(kwargs.get("trainer_state"), "global_step", 0) + 1
        checkpoint, _ = last_complete_checkpoint(self.trainer.args.output_dir)
        kept = f"newest complete checkpoint: {checkpoint}" if checkpoint else "no checkpoint was saved before it"
        raise RewardFunctionError(
            "reward_funcs",
            f"{name} returned None or NaN for all {batch.size} completions of step {step}, so it scored nothing; "
            f"a reward may leave some completions unscored ({UNSCORED_PREFIX}{name}), not all of a step; {kept}",
        )

    def assemble(self, scores: dict[int, list], kwargs: dict) -> RewardBatch:
        """The global batch: every process's rows, in rank order (TRL's gather order, G contiguous rows a group)."""
        trainer = self.trainer
        ids = kwargs.get("completion_ids") or [None] * len(kwargs["completions"])
        local = [
            (
                [scores[i][row] for i in range(len(self.columns))],
                completion_text(completion),
                {key: kwargs[key][row] for key in ROW_KEYS if key in kwargs},
                len(ids[row]) if ids[row] is not None else 0,
                is_truncated(ids[row], self.stop_ids) if ids[row] is not None else None,
            )
            for row, completion in enumerate(kwargs["completions"])
        ]
        rows = gather_object(local)
        training = trainer.model.training
        truncated = [row[4] for row in rows]
        return RewardBatch(
            rewards_per_func=torch.tensor([row[0] for row in rows], dtype=torch.float32).reshape(len(rows), -1),
            names=list(trainer.reward_func_names),
            weights=trainer.reward_weights.detach().cpu(),
            # the one choice of group size (train or eval): the callbacks and the advantages read it from the batch
            num_generations=trainer.num_generations if training else trainer.num_generations_eval,
            completions=[row[1] for row in rows],
            rows=[row[2] for row in rows],
            completion_lengths=[row[3] for row in rows],
            truncated=None if None in truncated else truncated,
            mode="train" if training else "eval",
        )

    def dispatch(self, batch: RewardBatch, kwargs: dict, log: Callable[[str, float], None] | None = None) -> None:
        """Every `RewardBatchCallback` of the trainer reads the batch; what it returns is logged by `log` (default: the
        `log_metric` TRL passed the reward functions, i.e. TRL's own logs)."""
        log = log or kwargs["log_metric"]
        trainer = self.trainer
        for callback in trainer.callback_handler.callbacks:
            if isinstance(callback, RewardBatchCallback):
                callback.fed = True
                metrics = callback.on_rewards(trainer.args, trainer.state, trainer.control, batch=batch)
                for name, value in (metrics or {}).items():
                    log(name, value)


def with_readings(trainer):
    """Any `trl.GRPOTrainer`, with the readings (`batch_readings` every generation batch; with an eval_dataset,
    `rlvr evaluate`'s held-out figures on its evaluation rows): its reward functions wrapped (`RewardReadings`) and a
    `ReadingsCallback` added unless one is there. Returns the trainer."""
    if not any(isinstance(cb, ReadingsCallback) for cb in trainer.callback_handler.callbacks):
        trainer.add_callback(ReadingsCallback())
    if held_out := held_out_callback(trainer):
        trainer.add_callback(held_out)
    trainer.readings = RewardReadings(trainer)
    return trainer


__all__ = ["RewardReadings", "with_readings"]


class ReadingsCallback(RewardBatchCallback):
    """Logs `batch_readings` every generation batch (on a plain `trl.GRPOTrainer`, `with_readings` feeds it)."""

    def on_rewards(self, args, state, control, batch: RewardBatch):
        return batch_readings(batch)


def zero_std_sides(batch: RewardBatch) -> dict[str, float]:
    """Which side the groups flat on `total` are on, each as a fraction of all the batch's groups: `all_wrong` and
    `all_correct` (`group_side` of `RewardBatch.solved`), `all_truncated` (a length budget), `identical` (one text:
    collapsed entropy). The sides overlap; right and wrong need the rows' answers, truncation the completion ids."""
    G = batch.num_generations
    flat = flat_groups(batch.components()[TOTAL], G)
    sides = {}
    if batch.has_answers():
        side = [group_side(group) for group in batch.solved().reshape(-1, G).tolist()]
        for name in GROUP_SIDES:
            sides[name] = flat & torch.tensor([s == name for s in side], dtype=torch.bool)
    if batch.truncated is not None:
        sides[ALL_TRUNCATED] = flat & torch.tensor(batch.truncated, dtype=torch.bool).reshape(-1, G).all(dim=1)
    texts = [batch.completions[i : i + G] for i in range(0, batch.size, G)]
    sides[IDENTICAL] = flat & torch.tensor([len(set(group)) == 1 for group in texts], dtype=torch.bool)
    return {zero_std_side_key(side): mask.float().mean().item() for side, mask in sides.items()}


def batch_readings(batch: RewardBatch) -> dict[str, float]:
    """Everything read off one scored batch: `avg_<component>` and `zero_std_frac/<component>` for every component,
    `zero_std_side/*`, and every registered `step/*` metric (`rlvr/metrics/step_metrics.py`)."""
    summary = group_summary(batch.components(), batch.num_generations)
    return {**summary, **zero_std_sides(batch), **compute_step_metrics(batch)}
