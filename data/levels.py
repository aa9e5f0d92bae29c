"""Difficulty levels from reasoning_gym's own curricula and the named fixed held-out sets: what they are. Building
their rows (per-level pools, the held-out Dataset) is `rlvr.data.generate`'s, so this module stays a leaf.

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

from dataclasses import dataclass

from rlvr.inputs import ConfigError


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
    # start-up: reasoning_gym costs ~5 s to import (measured); only code that builds a task pays it
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
