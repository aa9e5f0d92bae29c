"""One scored generation batch (`RewardBatch`) and the callbacks that read it (`RewardBatchCallback`).

HF `TrainerCallback` events never see rewards, so the reward wrapper (`rlvr.metrics.readings.RewardReadings`) calls
`on_rewards` on every callback that subclasses `RewardBatchCallback`, once per generation batch, with the rewards
gathered over all processes. What a callback returns is logged through TRL's own metric path (console, wandb,
metrics.jsonl).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import TrainerCallback

from rlvr.metrics.components import reward_components
from rlvr.rewards.functions import exact_answer, success


def is_truncated(ids, stop_ids) -> bool:
    """A completion was cut off: its last token is not a stop token (EOS, or the padding TRL treats alike), i.e. no
    EOS came within `max_completion_length`. TRL's own test (`completions/clipped_ratio`), on ids that stop at the
    first EOS as TRL's masking leaves them; an empty completion has no EOS either."""
    return len(ids) == 0 or int(ids[-1]) not in stop_ids


@dataclass
class RewardBatch:
    """One scored generation batch, global over processes, rows grouped by prompt (G contiguous rows per group)."""

    rewards_per_func: torch.Tensor  # (N, K)
    names: list[str]  # K reward names, as in the metrics
    weights: torch.Tensor  # (K,) weights of the total
    num_generations: int
    completions: list[str]  # N completion texts
    rows: list[dict]  # N dataset rows (question, answer, difficulty, ...)
    completion_lengths: list[int]  # N completion lengths in tokens
    truncated: list[bool] | None = None  # N: cut off at max_completion_length (`is_truncated`); None: not known
    mode: str = "train"
    round: int = 0  # > 0 for DAPO's extra generation rounds within one step
    extra: dict = field(default_factory=dict)
    _components: dict | None = field(default=None, init=False, repr=False, compare=False)
    _exact: torch.Tensor | None = field(default=None, init=False, repr=False, compare=False)
    _solved: torch.Tensor | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def size(self) -> int:
        return self.rewards_per_func.shape[0]

    def components(self) -> dict[str, torch.Tensor]:
        """Every reward component by name (`reward_components`), computed on first use and cached: one pass over the
        batch, whoever reads it (advantage, metrics, rollouts, step metrics, DAPO's filter)."""
        if self._components is None:
            self._components = reward_components(self.rewards_per_func, self.names, self.weights)
        return self._components

    def exact(self) -> torch.Tensor:
        """(N,) bool: the extracted answer is exactly the row's expected answer (`rlvr.rewards.functions.exact_answer`),
        whatever the format; cached like the components. Rows that already carry it (evaluation records' `exact`,
        computed by the same function) keep theirs."""
        if self._exact is None:
            if self.rows and all(isinstance(row.get("exact"), bool) for row in self.rows):
                flags = [row["exact"] for row in self.rows]
            else:
                flags = [exact_answer(text, row.get("answer")) for text, row in zip(self.completions, self.rows)]
            self._exact = torch.tensor(flags, dtype=torch.bool)
        return self._exact

    def has_answers(self) -> bool:
        """The rows carry an expected `answer`, so right and wrong are defined (a plain TRL dataset may not)."""
        return any(row.get("answer") is not None for row in self.rows)

    def solved(self) -> torch.Tensor:
        """(N,) bool: exactly right, i.e. the `success` reward's 1.0 (the exact answer with all four tags), whether or
        not the run trains on `success`; cached. The side readings (`zero_std_side/*`, `step/truncated_wrong`) call a
        completion right or wrong by this."""
        if self._solved is None:
            answers = [row.get("answer") for row in self.rows]
            self._solved = torch.tensor(success(self.completions, answers), dtype=torch.float32) == 1.0
        return self._solved


class RewardBatchCallback(TrainerCallback):
    """A TrainerCallback that also sees every scored generation batch.

    The batches come from `rlvr.metrics.readings.RewardReadings` (our trainer builds one; `with_readings` gives any
    `trl.GRPOTrainer` one). A trainer without them never calls `on_rewards`: rather than log nothing, silently, the
    callback stops the run after its first optimizer step in one line saying how to attach the readings."""

    fed = False  # set by the readings at each batch they hand over

    def on_rewards(self, args, state, control, batch: RewardBatch) -> dict[str, float] | None:
        """Return metrics to log for this generation step (or None)."""
        return None

    def on_step_end(self, args, state, control, **kwargs):
        if not self.fed:
            raise RuntimeError(
                f"{type(self).__name__} got no reward batch in a whole training step: a plain trl.GRPOTrainer hands "
                "none to callbacks. Wrap it: `trainer = with_readings(GRPOTrainer(...))` (from rlvr.metrics.readings)")
