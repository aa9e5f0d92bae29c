"""One scored generation batch (`RewardBatch`) and the callbacks that read it (`RewardBatchCallback`): HF
`TrainerCallback` events never see rewards, so the reward wrapper (`rlvr.metrics.readings`) calls `on_rewards` once per
generation batch, gathered over all processes, and logs what a callback returns through TRL's own metric path."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import TrainerCallback

from rlvr.metrics.keys import ALL_CORRECT, ALL_WRONG, BINARY, PENALTY, TOTAL, reward_key, zero_std_key
from rlvr.rewards.functions import binary_of, exact_answer, success


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

    @classmethod
    def from_records(cls, records: list[dict], names, weights, num_generations: int) -> RewardBatch:
        """A batch from rollout records (evaluation's, rollouts.jsonl's rows: reward columns `names`, None unscorable),
        so evaluation's readings are the trainer's functions on the same kind of batch."""
        cut = [r.get("truncated") for r in records]
        scores = [[float("nan") if r.get(name) is None else r[name] for name in names] for r in records]
        return cls(
            rewards_per_func=torch.tensor(scores, dtype=torch.float32).reshape(len(records), len(names)),
            names=list(names),
            weights=torch.tensor(list(weights), dtype=torch.float32),
            num_generations=num_generations,
            completions=[r.get("completion") or "" for r in records],
            rows=records,
            completion_lengths=[r.get("completion_tokens") or 0 for r in records],
            truncated=None if None in cut else cut,
            mode="eval",
        )

    @property
    def size(self) -> int:
        return self.rewards_per_func.shape[0]

    def components(self) -> dict[str, torch.Tensor]:
        """Every reward component by name (`reward_components`), computed once, whoever reads it."""
        if self._components is None:
            self._components = reward_components(self.rewards_per_func, self.names, self.weights)
        return self._components

    def exact(self) -> torch.Tensor:
        """(N,) bool: `exact_answer` of each row, whatever the format; cached. Rows that already carry it (evaluation
        records' `exact`, computed by the same function) keep theirs."""
        if self._exact is None:
            if self.rows and all(isinstance(row.get("exact"), bool) for row in self.rows):
                flags = [row["exact"] for row in self.rows]
            else:
                flags = [exact_answer(text, row.get("answer")) for text, row in zip(self.completions, self.rows)]
            self._exact = torch.tensor(flags, dtype=torch.bool)
        return self._exact

    def unscored(self) -> dict[str, float]:
        """Per reward function, the share of the batch's completions it returned None or NaN for: not scored, as TRL
        reads it (neither right nor wrong; a group's flatness is decided on its scored rows, `flat_groups`)."""
        missing = torch.isnan(self.rewards_per_func)
        return {name: missing[:, i].float().mean().item() for i, name in enumerate(self.names)}

    def never_scored(self) -> str | None:
        """The first reward function that scored none of the batch's completions (None when each scored one)."""
        missing = (
            torch.isnan(self.rewards_per_func).all(dim=0) if self.size else torch.zeros(len(self.names), dtype=bool)
        )
        return next((name for name, none in zip(self.names, missing.tolist()) if none), None)

    def has_answers(self) -> bool:
        """The rows carry an expected `answer`, so right and wrong are defined (a plain TRL dataset may not)."""
        return any(row.get("answer") is not None for row in self.rows)

    def solved(self) -> torch.Tensor:
        """(N,) bool: the `success` reward's 1.0 (exact answer, all four tags), trained on or not; cached. THE
        definition of a solved completion: the side readings (`zero_std_side/*`, `step/truncated_wrong`) call a
        completion right or wrong by it, and the curriculum's pass rates count it."""
        if self._solved is None:
            answers = [row.get("answer") for row in self.rows]
            self._solved = torch.tensor(success(self.completions, answers), dtype=torch.float32) == 1.0
        return self._solved


class RewardBatchCallback(TrainerCallback):
    """A TrainerCallback that also sees every scored generation batch (from `rlvr.metrics.readings.RewardReadings`).
    A trainer without the readings never calls `on_rewards`: rather than log nothing, silently, the callback stops
    the run after its first optimizer step in one line saying how to attach them."""

    fed = False  # set by the readings at each batch they hand over

    def on_rewards(self, args, state, control, batch: RewardBatch) -> dict[str, float] | None:
        """Return metrics to log for this generation step (or None)."""
        return None

    def on_step_end(self, args, state, control, **kwargs):
        if not self.fed:
            raise RuntimeError(
                f"{type(self).__name__} got no reward batch in a whole training step: a plain trl.GRPOTrainer hands "
                "none to callbacks. Wrap it: `trainer = with_readings(GRPOTrainer(...))` (from rlvr.metrics.readings)"
            )


def group_side(solved) -> str | None:
    """THE definition of a prompt group's side, by its completions' `solved` (exactly right, full format):
    `ALL_WRONG` when none is right, `ALL_CORRECT` when every one is, None when they mix. The batch readings
    (`zero_std_side/*`), the rollouts' `groups/*` series, their figure, the report and the doctor all read it."""
    solved = [bool(s) for s in solved]
    return ALL_WRONG if not any(solved) else ALL_CORRECT if all(solved) else None


ALL_WRONG_ROWS = "all_wrong_rows"  # the training inputs' key of `all_wrong_rows` (`failed_entropy_coef`)


def all_wrong_rows(solved: torch.Tensor, num_generations: int) -> torch.Tensor:
    """(N,) bool: the rows of the groups on `group_side`'s `ALL_WRONG` side, each group's verdict spread over its
    rows (TRL keeps a group's completions contiguous)."""
    sides = [group_side(group) for group in solved.reshape(-1, num_generations).tolist()]
    return torch.tensor([side == ALL_WRONG for side in sides]).repeat_interleave(num_generations)


# Reward components and flat groups, on the gathered rewards: TRL's `RepeatSampler` keeps a prompt's G completions
# contiguous across all processes, so `view(-1, G)` recovers whole groups even when one straddles two processes.


def reward_components(
    rewards_per_func: torch.Tensor, names: list[str], weights: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Each reward column by name, plus `total` (the weighted sum TRL trains on), `binary` (`binary_of`) and `penalty`
    (0 when the overlong penalty is not configured)."""
    columns = {name: rewards_per_func[:, i] for i, name in enumerate(names)}
    total = (rewards_per_func * weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    total[torch.isnan(rewards_per_func).all(dim=1)] = torch.nan  # unscorable rows, as TRL treats them
    columns[TOTAL] = total
    columns.setdefault(PENALTY, torch.zeros_like(total))
    if "correctness" in columns and "format" in columns:
        columns[BINARY] = binary_of(columns["correctness"], columns["format"])
    return columns


def flat_groups(values: torch.Tensor, num_generations: int) -> torch.Tensor:
    """(num_groups,) bool: True where a prompt group's scorable (non-NaN) values are all equal, whatever their value.

    The one definition the zero-std metrics, DAPO's filter and the advantage share. Exact (max == min over the
    scorable rows); a std-based test is not: the float32 std of eight copies of 0.2 is ~1.5e-8, above `isclose`'s
    1e-8, so TRL's `frac_reward_zero_std` misses such groups. Fewer than two scorable rows: no contrast, flat.
    """
    if num_generations < 2:  # a single rollout per prompt has no group contrast by construction
        return torch.ones(values.numel(), dtype=torch.bool, device=values.device)
    grouped = values.reshape(-1, num_generations)
    scorable = ~torch.isnan(grouped)
    high = torch.where(scorable, grouped, torch.full_like(grouped, -torch.inf)).amax(dim=1)
    low = torch.where(scorable, grouped, torch.full_like(grouped, torch.inf)).amin(dim=1)
    return (high == low) | (scorable.sum(dim=1) < 2)


def flat_rows(values: torch.Tensor, num_generations: int) -> torch.Tensor:
    """(N,) bool: `flat_groups` spread over each group's rows (the mask that zeroes a flat group's advantages)."""
    flat = flat_groups(values, num_generations)
    return flat if num_generations < 2 else flat.repeat_interleave(num_generations)


def zero_std_fraction(rewards: torch.Tensor, num_generations: int) -> float:
    """Fraction of prompt groups whose scorable rewards are all equal (`flat_groups`): their advantage is 0. Always
    per group, unlike TRL's `frac_reward_zero_std`, which becomes all-or-nothing under `scale_rewards: batch`."""
    return flat_groups(rewards, num_generations).float().mean().item()


def group_summary(components: dict[str, torch.Tensor], num_generations: int) -> dict[str, float]:
    """`avg_<component>` and `zero_std_frac/<component>` for every component of one generation batch (the components
    of a `RewardBatch`, computed once per batch)."""
    metrics = {}
    for name, values in components.items():
        metrics[reward_key(name)] = torch.nanmean(values).item()
        metrics[zero_std_key(name)] = zero_std_fraction(values, num_generations)
    return metrics
