"""Difficulty levels from reasoning_gym's own curricula, per-level prompt pools, and the named fixed held-out sets.

Levels are not defined here: they come from the task's registered curriculum (`reasoning_gym.factory.
create_curriculum`). For spell_backward that is `SpellBackwardCurriculum`'s range attribute `word_len` with levels
3, 5, 7, 9, 11 and the config fields min_word_len / max_word_len. Level i covers the attribute values from its own
value up to the next level's minus one (3-4, 5-6, 7-8, 9-10, 11), so consecutive levels tile the whole range with
no gap. A level the task cannot generate (reasoning_gym's word list stops at 10 letters, so level 11 has no word)
is dropped, and said so, when the pools are built.

A held-out set is named once in `HELD_OUT_SETS` and built the same way for every recipe that names it
(`data.held_out`): runs trained on different mixes, or on a curriculum, are measured on the same prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from rlvr.cli import ConfigError


@dataclass(frozen=True)
class Level:
    """One difficulty level: its reasoning_gym level value (the label in metrics) and the attribute range it covers."""

    value: int
    low: int
    high: int

    def covers(self, difficulty) -> bool:
        return isinstance(difficulty, (int, float)) and self.low <= difficulty <= self.high


def range_attribute(task: str, attribute: str | None, where: str = "curriculum.attribute"):
    """The task's registered curriculum attribute (a reasoning_gym RangeAttributeDefinition); one line if none."""
    from reasoning_gym.coaching.attributes import RangeAttributeDefinition
    from reasoning_gym.factory import create_curriculum, has_curriculum

    if not has_curriculum(task):
        raise ConfigError(where, f"reasoning_gym registers no curriculum for task {task!r}")
    attributes = create_curriculum(task).attributes
    name = attribute or (next(iter(attributes)) if len(attributes) == 1 else None)
    if name not in attributes:
        raise ConfigError(where, f"{attribute!r} is not an attribute of {task}'s curriculum ({', '.join(attributes)})")
    definition = attributes[name]
    if not isinstance(definition, RangeAttributeDefinition):
        raise ConfigError(where, f"{task}'s {name!r} is not a range attribute (lower and upper config fields)")
    return definition


def levels_of(task: str, attribute: str | None = None) -> list[Level]:
    """Every level of the attribute, each covering [its value, the next level's value - 1]."""
    values = list(range_attribute(task, attribute).levels)
    return [Level(v, v, (values[i + 1] - 1) if i + 1 < len(values) else v) for i, v in enumerate(values)]


_SAID: set = set()


def build_level_pools(spec, task_index: int = 0, attribute: str | None = None):
    """(DatasetDict, levels kept): `spec.size` rows per level, built by `build_dataset` from the spec with the
    level's range in the task config, train rows concatenated with an int `level` column (index into the levels
    kept). The test split is the named held-out set when the spec names one, else every level's held-out rows."""
    from datasets import DatasetDict, concatenate_datasets

    from rlvr.data.generate import build_dataset

    task = spec.specs[task_index]
    definition = range_attribute(task.name, attribute)
    kept, trains, tests, skipped = [], [], [], []
    for level in levels_of(task.name, definition.name):
        config = {**task.config, definition.lower_field_name: level.low, definition.upper_field_name: level.high}
        level_spec = replace(spec, specs=[replace(task, config=config)], seed=spec.seed + level.value)
        try:
            data = build_dataset(level_spec)
        except (IndexError, ValueError, ConfigError):  # no item at this level (an empty word list), or too few
            skipped.append(level.value)
            continue
        trains.append(data["train"].add_column("level", [len(kept)] * len(data["train"])))
        tests.append(data["test"])
        kept.append(level)
    if skipped and (task.name, tuple(skipped)) not in _SAID:  # once per process: every validation rebuilds pools
        _SAID.add((task.name, tuple(skipped)))
        print(f"[curriculum] {task.name} has no items at {definition.name} level(s) {skipped}: dropped", flush=True)
    if not kept:
        raise ConfigError("curriculum", f"{task.name} generates no item at any {definition.name} level")
    test = tests[0] if spec.held_out is not None else concatenate_datasets(tests)
    return DatasetDict({"train": concatenate_datasets(trains), "test": test}), kept


@dataclass(frozen=True)
class HeldOutSet:
    """`per_value` distinct questions at each attribute value in `values` (a balanced set: every length counts the
    same), drawn with `seed`, never with a training seed's draws in mind: training drops these questions instead."""

    task: str
    attribute: str
    values: tuple
    per_value: int
    seed: int


# One source of truth for the fixed held-out sets a recipe or sweep can name (`data.held_out`).
# spell_backward_3_10: every word length of the curriculum's 3-11 range that reasoning_gym's word list has
# (words3to10.txt: no 11-letter word), 40 words each.
HELD_OUT_SETS = {
    "spell_backward_3_10": HeldOutSet("spell_backward", "word_len", tuple(range(3, 11)), 40, 7),
}


@lru_cache(maxsize=8)
def build_held_out(name: str, system_prompt: str | None):
    """The named held-out set as a Dataset with the recipe's system prompt; identical rows for the same name."""
    import reasoning_gym
    from datasets import Dataset

    from rlvr.data.generate import _entry_to_row, resolve_system_prompt

    held = HELD_OUT_SETS[name]
    definition = range_attribute(held.task, held.attribute, "data.held_out")
    prompt = resolve_system_prompt(system_prompt)
    rows = []
    for value in held.values:
        config = {definition.lower_field_name: value, definition.upper_field_name: value}
        entries = reasoning_gym.create_dataset(held.task, size=held.per_value * 20, seed=held.seed + value, **config)
        seen = {}
        for entry in entries:
            seen.setdefault(entry["question"], entry)
            if len(seen) == held.per_value:
                break
        rows += [_entry_to_row(entry, prompt) for entry in seen.values()]
    return Dataset.from_list(rows)
