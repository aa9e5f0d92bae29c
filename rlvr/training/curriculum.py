"""An online curriculum: each generation step's prompts are drawn by difficulty level, with level weights that follow
the policy's measured pass rate per level (docs/curriculum.md: levels, policies, fields, metrics).

`CurriculumSpec` checks the recipe's `curriculum:` block; `Controller` keeps the running pass rates and turns them
into level weights; `CurriculumSampler` is TRL's RepeatSampler layout with the prompts drawn by those weights;
`CurriculumCallback` feeds the controller from the reward-batch hook, logs `curriculum/*` and is saved in checkpoints.

Why resume is exact (docs/curriculum.md, "Timing and resume"): chunk c is drawn with the weights after steps
0..c-2 (`weights_for`) and an RNG seeded by (seed, c) alone, so a resumed dataloader's replayed chunks change nothing.
Dataloader workers would fetch further ahead than one batch, so a curriculum requires dataloader_num_workers 0.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import asdict, dataclass, fields

from torch.utils.data import Sampler
from transformers.trainer_callback import ExportableState
from trl import GRPOTrainer

from rlvr.data.generate import build_level_pools, split_level_pools
from rlvr.data.spec import Level, levels_of
from rlvr.inputs import ConfigError, mapping_field
from rlvr.metrics.keys import CURRICULUM_PREFIX as PREFIX
from rlvr.metrics.reward_batch import RewardBatch, RewardBatchCallback

POLICIES = ("threshold", "informative", "failing")
POOLS = ("generated", "split")  # per-level pools generated from the task's levels, or the data spec's own train split
MODES = ("inclusive", "upper_bound")  # reasoning_gym.coaching RangeAttributeMode values the threshold mix supports
HISTORY = 3  # weight snapshots kept: the lag needs the previous one (the newest when a chunk is fetched a step later)
UNMEASURED = 0.5  # the pass rate assumed for a level with no scored completion yet (the most informative p)


@dataclass
class CurriculumSpec:
    """The recipe's `curriculum:` block. The task and its levels come from the recipe's data spec (one task) and
    reasoning_gym's curriculum for it."""

    policy: str = "threshold"
    attribute: str | None = None  # the task curriculum's range attribute; None = its only one (word_len)
    start_level: int = 0  # threshold: the level index to start at, and the lowest it falls back to
    window: int = 64  # scored completions per level in the running pass rate
    advance_above: float = 0.8  # threshold: advance when the current level's pass rate exceeds this
    fall_back_below: float = 0.1  # threshold: fall back when it drops under this
    mode: str = "inclusive"  # threshold: the levels in the mix (reasoning_gym RangeAttributeMode)
    floor: float = 0.05  # informative, failing: share of the mix spread uniformly over every level
    pools: str = "generated"  # split: the levels are the train split's own difficulty values, its rows their pools

    @classmethod
    def from_dict(cls, raw, field_name: str = "curriculum") -> CurriculumSpec:
        raw = mapping_field(raw, field_name, {f.name for f in fields(cls)}, "{policy: threshold}")
        spec = cls(**raw)
        spec.validate(field_name)
        return spec

    def validate(self, field_name: str = "curriculum") -> None:
        def number(name, low, high, integer=False):
            value = getattr(self, name)
            kind = int if integer else (int, float)
            if (
                not isinstance(value, kind)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or not low <= value <= high
            ):
                what = "an integer" if integer else "a number"
                raise ConfigError(f"{field_name}.{name}", f"must be {what} in [{low:g}, {high:g}], got {value!r}")

        if self.policy not in POLICIES:
            raise ConfigError(f"{field_name}.policy", f"must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.pools not in POOLS:
            raise ConfigError(f"{field_name}.pools", f"must be one of {', '.join(POOLS)}, got {self.pools!r}")
        if self.mode not in MODES:
            raise ConfigError(f"{field_name}.mode", f"must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.attribute is not None and not isinstance(self.attribute, str):
            raise ConfigError(f"{field_name}.attribute", f"must be an attribute name, got {self.attribute!r}")
        number("start_level", 0, 1e9, integer=True)
        number("window", 1, 1e9, integer=True)
        number("advance_above", 0, 1)
        number("fall_back_below", 0, 1)
        number("floor", 0, 1)
        if self.fall_back_below >= self.advance_above:
            raise ConfigError(
                f"{field_name}.fall_back_below",
                f"must be below advance_above ({self.advance_above}), got {self.fall_back_below}",
            )

    def to_dict(self) -> dict:
        return asdict(self)


def check_curriculum(spec: CurriculumSpec, data_spec, training) -> None:
    """What a curriculum needs from the rest of the recipe, each a one-line error naming the field."""
    if data_spec is None:
        raise ConfigError("curriculum", "needs an inline data spec (data:), not dataset_name: levels are generated")
    if len(data_spec.specs) != 1:
        raise ConfigError("data.specs", f"a curriculum draws one task by level; got {len(data_spec.specs)} tasks")
    if training.dataloader_num_workers:
        raise ConfigError(
            "dataloader_num_workers",
            "must be 0 with a curriculum: workers fetch batches before the pass rates they should follow exist",
        )
    if getattr(training, "dynamic_sampling", False):
        raise ConfigError(
            "curriculum",
            "does not combine with DAPO's dynamic_sampling (its extra prompts are "
            "drawn uniformly, outside the curriculum)",
        )


def informative_fraction(p: float, num_generations: int) -> float:
    """Predicted fraction of non-flat groups of G independent 0/1 outcomes at pass rate p: 1 - p^G - (1 - p)^G."""
    return 1.0 - p**num_generations - (1.0 - p) ** num_generations


class Controller:
    """Running pass rates per level and the policy's level weights; all state JSON-serializable (`state`)."""

    def __init__(self, spec: CurriculumSpec, levels: list[Level], num_generations: int, sizes: list[int] | None = None):
        self.spec, self.levels, self.num_generations = spec, levels, num_generations
        sizes = sizes or [1] * len(levels)  # rows per level's pool: `failing` weighs a level's failures by its share
        self.shares = [size / sum(sizes) for size in sizes]
        self.outcomes = [deque(maxlen=spec.window) for _ in levels]
        self.level = min(spec.start_level, len(levels) - 1)
        self.at_level = 0  # completions scored at the current level since arriving there
        self.steps = 0  # generation steps observed
        self.history = {0: self.compute_weights()}  # steps observed -> weights after them

    def level_of(self, difficulty) -> int | None:
        return next((i for i, level in enumerate(self.levels) if level.covers(difficulty)), None)

    def pass_rate(self, index: int) -> float | None:
        window = self.outcomes[index]
        return sum(window) / len(window) if window else None

    def compute_weights(self) -> list[float]:
        n = len(self.levels)
        if self.spec.policy == "threshold":
            active = range(self.level + 1) if self.spec.mode == "inclusive" else [self.level]
            return [1.0 / len(active) if i in active else 0.0 for i in range(n)]
        rates = [UNMEASURED if p is None else p for p in (self.pass_rate(i) for i in range(n))]
        if self.spec.policy == "failing":  # where the errors are: the level's share of the rows x its failure rate
            need = [share * (1.0 - p) for share, p in zip(self.shares, rates)]
        else:
            need = [informative_fraction(p, self.num_generations) for p in rates]
        total = sum(need)
        shares = [v / total for v in need] if total > 0 else [1.0 / n] * n
        return [(1.0 - self.spec.floor) * s + self.spec.floor / n for s in shares]

    def move(self) -> None:
        """Threshold policy: advance or fall back once a full window has been measured at the current level. It
        never falls below `start_level`: that is where the schedule was told the policy can learn."""
        if self.spec.policy != "threshold" or self.at_level < self.spec.window:
            return
        rate = self.pass_rate(self.level)
        if rate > self.spec.advance_above and self.level + 1 < len(self.levels):
            self.level, self.at_level = self.level + 1, 0
        elif rate < self.spec.fall_back_below and self.level > self.spec.start_level:
            self.level, self.at_level = self.level - 1, 0

    def observe(self, difficulties: list, outcomes: list[bool], new_step: bool) -> None:
        """One scored batch (a step's first round when `new_step`); the weights after it are recorded for the step."""
        for difficulty, success in zip(difficulties, outcomes):
            index = self.level_of(difficulty)
            if index is None:
                continue
            self.outcomes[index].append(int(success))
            self.at_level += index == self.level
        self.steps += new_step
        self.move()
        self.history[self.steps] = self.compute_weights()
        for old in [s for s in self.history if s <= self.steps - HISTORY]:
            del self.history[old]

    def weights_for(self, chunk: int) -> list[float]:
        """The weights that draw generation step `chunk`: those after steps 0..chunk-2 (one step of lag, see the
        module docstring). A chunk whose snapshot is gone is one a resumed dataloader skips: its draw is discarded."""
        wanted = max(chunk - 1, 0)
        return self.history.get(wanted) or self.history[max(self.history)]

    def metrics(self, drew: list[float]) -> dict[str, float]:
        """`curriculum/*`: the weights that drew this step, the pass rate per level (level value in the key), and the
        level: threshold's current one, else the weight-averaged level value."""
        out = {}
        for i, level in enumerate(self.levels):
            out[f"{PREFIX}weight/{level.value}"] = drew[i]
            rate = self.pass_rate(i)
            if rate is not None:
                out[f"{PREFIX}pass_rate/{level.value}"] = rate
        out[f"{PREFIX}level"] = float(
            self.levels[self.level].value
            if self.spec.policy == "threshold"
            else sum(w * level.value for w, level in zip(drew, self.levels))
        )
        return out

    def state(self) -> dict:
        return {
            "outcomes": [list(window) for window in self.outcomes],
            "level": self.level,
            "at_level": self.at_level,
            "steps": self.steps,
            "history": {str(k): v for k, v in self.history.items()},
        }

    def load_state(self, state: dict) -> None:
        self.outcomes = [deque(window, maxlen=self.spec.window) for window in state["outcomes"]]
        self.level, self.at_level, self.steps = state["level"], state["at_level"], state["steps"]
        self.history = {int(k): v for k, v in state["history"].items()}


def draw_chunk(seed: int, chunk: int, weights: list[float], pools: list[list[int]], size: int) -> list[int]:
    """`size` dataset indices for generation step `chunk`: a level by `weights`, then a row of it, uniformly. The RNG
    is seeded by (seed, chunk) alone, so a chunk's draw never depends on which chunks were drawn before it."""
    rng = random.Random(f"{seed}:{chunk}")
    usable = [w if pools[i] else 0.0 for i, w in enumerate(weights)]
    levels = rng.choices(range(len(pools)), weights=usable, k=size)
    return [pools[level][rng.randrange(len(pools[level]))] for level in levels]


class CurriculumSampler(Sampler):
    """TRL's RepeatSampler layout with curriculum-drawn prompts: per chunk, `batch_size` prompts, the chunk repeated
    `repeat_count` times, every index `mini_repeat_count` times in a row. An epoch is as many chunks as RepeatSampler
    would make of the dataset; chunks are numbered across epochs (`set_epoch`, which the Trainer calls)."""

    def __init__(
        self,
        levels_column: list[int],
        num_levels: int,
        weights_for,
        mini_repeat_count: int,
        batch_size: int,
        repeat_count: int,
        seed: int,
    ):
        self.pools = [[i for i, level in enumerate(levels_column) if level == index] for index in range(num_levels)]
        self.weights_for = weights_for  # chunk -> weights: looked up at draw time (a resume replaces the controller)
        self.mini_repeat_count, self.batch_size, self.repeat_count = mini_repeat_count, batch_size, repeat_count
        self.seed = seed
        self.chunks_per_epoch = len(levels_column) // batch_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.chunks_per_epoch * self.batch_size * self.repeat_count * self.mini_repeat_count

    def __iter__(self):
        for i in range(self.chunks_per_epoch):
            chunk = self.epoch * self.chunks_per_epoch + i
            indices = draw_chunk(self.seed, chunk, self.weights_for(chunk), self.pools, self.batch_size)
            for _ in range(self.repeat_count):
                for index in indices:
                    for _ in range(self.mini_repeat_count):
                        yield index


class CurriculumCallback(RewardBatchCallback, ExportableState):
    """Feeds every scored training batch to the controller, logs `curriculum/*`, and is saved in checkpoints."""

    def __init__(self, spec: dict, levels: list[list[int]], num_generations: int, sizes: list[int] | None = None):
        self.spec, self.levels, self.num_generations, self.sizes = spec, levels, num_generations, sizes
        self.controller = Controller(
            CurriculumSpec(**spec), [Level(*level) for level in levels], num_generations, sizes
        )

    @property
    def controller_state(self) -> dict:
        return self.controller.state()

    @controller_state.setter
    def controller_state(self, state: dict) -> None:  # ExportableState restore sets attributes by name
        self.controller.load_state(state)

    def on_rewards(self, args, state, control, batch: RewardBatch):
        if batch.mode != "train":
            return None
        step = self.controller.steps - (batch.round > 0)  # this generation step's index (a later round: the same)
        drew = self.controller.weights_for(step)
        # a pass is a solved completion (`RewardBatch.solved`, the readings' one definition)
        self.controller.observe(
            [row.get("difficulty") for row in batch.rows], batch.solved().tolist(), batch.round == 0
        )
        return self.controller.metrics(drew)

    def state(self) -> dict:
        return {
            "args": {
                "spec": self.spec,
                "levels": self.levels,
                "num_generations": self.num_generations,
                "sizes": self.sizes,
            },
            "attributes": {"controller_state": self.controller_state},
        }


class CurriculumSamplerTrainer(GRPOTrainer):
    """The train sampler is the curriculum's (`CurriculumSampler`) when a `CurriculumCallback` is registered, TRL's
    otherwise. A layer of its own (`with_curriculum`): only a recipe with a `curriculum:` trains with it."""

    def curriculum_callback(self) -> CurriculumCallback | None:
        return next((cb for cb in self.callback_handler.callbacks if isinstance(cb, CurriculumCallback)), None)

    def _get_train_sampler(self, dataset=None):
        if self.curriculum_callback() is None:
            return super()._get_train_sampler(dataset)
        dataset = self.train_dataset if dataset is None else dataset
        return CurriculumSampler(
            levels_column=list(dataset["level"]),
            num_levels=len(self.curriculum_callback().levels),
            weights_for=lambda chunk: self.curriculum_callback().controller.weights_for(chunk),
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            seed=self.args.seed,
        )


def with_curriculum(trainer_class: type) -> type:
    """`trainer_class` with the curriculum's sampler: `CurriculumSamplerTrainer` subclasses GRPOTrainer, so the MRO
    places it right above TRL, below every mixin of the repo's trainer."""
    return type(
        f"{trainer_class.__name__}WithCurriculum", (trainer_class, CurriculumSamplerTrainer), {"__module__": __name__}
    )


def curriculum_callback_for(
    spec: CurriculumSpec, levels: list[Level], num_generations: int, sizes: list[int] | None = None
) -> CurriculumCallback:
    return CurriculumCallback(spec.to_dict(), [[lv.value, lv.low, lv.high] for lv in levels], num_generations, sizes)


def build_curriculum_data(spec: CurriculumSpec, data_spec):
    """(DatasetDict, levels, rows per level): the per-level pools of the data spec's task
    (`rlvr.data.generate.build_level_pools`), or with `pools: split` its own train split by difficulty
    (`split_level_pools`); start_level must name one of the levels kept."""
    if spec.pools == "split":
        if spec.attribute is not None:
            raise ConfigError("curriculum.attribute", "is for generated pools; split pools level by the difficulty")
        dataset, levels = split_level_pools(data_spec)
    else:
        levels_of(data_spec.specs[0].name, spec.attribute)  # the attribute exists: one line before any generation
        dataset, levels = build_level_pools(data_spec, attribute=spec.attribute)
    if spec.start_level >= len(levels):
        raise ConfigError(
            "curriculum.start_level",
            f"must be below the number of levels ({len(levels)}: "
            f"{', '.join(str(lv.value) for lv in levels)}), got {spec.start_level}",
        )
    sizes = [0] * len(levels)
    for level in dataset["train"]["level"]:
        sizes[level] += 1
    return dataset, levels, sizes
