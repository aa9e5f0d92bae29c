"""The data spec, in the upstream form `{size, seed, specs: [{name, weight, config}]}`, validated before any model loads.

Validation instantiates each reasoning_gym config and runs its own `validate()`, so a bad task option (say
`min_word_len > max_word_len`) fails here with reasoning_gym's message, naming the field.

It also says what the difficulty levels and the named fixed held-out sets are; building their rows (per-level pools,
the held-out Dataset) is `rlvr.data.generate`'s. Levels come from the task's registered curriculum
(`reasoning_gym.factory.create_curriculum`; for spell_backward `word_len`, levels 3, 5, 7, 9, 11); level i covers its
value up to the next level's minus one, so levels tile the range (docs/curriculum.md). A held-out set is named once in
`HELD_OUT_SETS` and built the same way for every recipe that names it (`data.held_out`), so runs trained on different
mixes are measured on the same prompts. reasoning_gym is imported inside the functions that need it: its import costs
seconds at start-up.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from rlvr.inputs import ConfigError, mapping_field, one_line

# ---------------------------------------------------------------- difficulty levels and named held-out sets


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


# ---------------------------------------------------------------- the spec

# A short system prompt for byte-level tiny models: reasoning_gym's DeepSeekZero prompt alone is ~600 byte tokens.
TINY_SYSTEM_PROMPT = "Reverse the word. Reply as <think>letters</think><answer>word</answer>."


PROMPT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")  # one identifier-like word: a name, never prompt text


def prompt_names() -> tuple[str, ...]:
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return ("tiny", *SYSTEM_PROMPTS)


def check_prompt_name(value: str | None, field_name: str) -> None:
    """How a name is told from literal text: a single identifier-like word (`DeepSeekZero`, `tiny`) is a prompt name
    and must be a known one; anything else (with a space or punctuation) is the system prompt's text. So a typo such
    as `DeepSeekZer0` is refused with the closest name instead of becoming the literal system prompt."""
    if not value or not PROMPT_NAME.match(value) or value in prompt_names():
        return
    close = difflib.get_close_matches(value, prompt_names(), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(
        field_name,
        f"{value!r} is not a known prompt name ({', '.join(prompt_names())}); {hint}"
        "a literal system prompt is text with a space in it",
    )


@dataclass
class TaskSpec:
    """One reasoning_gym task in the mixture: `name`, relative `weight`, and the task's own config options."""

    name: str
    weight: float = 1.0
    config: dict[str, Any] = field(default_factory=dict)


DATA_FIELDS = ("specs", "size", "seed", "test_size", "system_prompt", "held_out")  # a recipe's `data:` keys
DATA_EXAMPLE = "{specs: [{name: spell_backward}]}"


@dataclass
class DataSpec:
    """What to generate: `size` rows drawn from the weighted `specs`, `test_size` distinct questions held out."""

    specs: list[TaskSpec]
    size: int = 3000
    seed: int = 42
    test_size: int = 200
    # A reasoning_gym SYSTEM_PROMPTS key ("DeepSeekZero"), the literal text of a prompt, "tiny", or None for no system turn.
    system_prompt: str | None = "DeepSeekZero"
    # A named fixed held-out set (HELD_OUT_SETS above): it becomes the test split, whatever the training
    # mix, and its questions are removed from train; test_size is then unused. None: test_size rows of the mix.
    held_out: str | None = None

    @classmethod
    def from_dict(cls, raw: dict | str, field_name: str = "data") -> DataSpec:
        """Parse and validate the YAML/JSON mapping; every error names its field, e.g. `data.specs[0].config`."""
        raw = mapping_field(raw, field_name, DATA_FIELDS, DATA_EXAMPLE)
        if not raw.get("specs"):
            raise ConfigError(f"{field_name}.specs", "needs at least one task, e.g. [{name: spell_backward}]")
        specs = [_parse_task(item, f"{field_name}.specs[{i}]") for i, item in enumerate(raw["specs"])]
        spec = cls(specs=specs, **{k: v for k, v in raw.items() if k != "specs"})
        spec.validate(field_name)
        return spec

    def validate(self, field_name: str = "data") -> None:
        for name in ("size", "test_size", "seed"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "seed" else 1):
                raise ConfigError(f"{field_name}.{name}", f"must be a positive integer, got {value!r}")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise ConfigError(
                f"{field_name}.system_prompt", f"must be a prompt name or text, got {self.system_prompt!r}"
            )
        check_prompt_name(self.system_prompt, f"{field_name}.system_prompt")
        if self.held_out is not None and self.held_out not in HELD_OUT_SETS:
            raise ConfigError(
                f"{field_name}.held_out",
                f"unknown held-out set {self.held_out!r}; choose one of {', '.join(HELD_OUT_SETS)}",
            )
        if self.test_size >= self.size:
            raise ConfigError(
                f"{field_name}.test_size", f"must be smaller than size ({self.size}), got {self.test_size}"
            )
        names = [task.name for task in self.specs]
        if len(set(names)) != len(names):
            raise ConfigError(f"{field_name}.specs", f"each task may appear once, got {names}")
        for i, task in enumerate(self.specs):
            _validate_task(task, f"{field_name}.specs[{i}]")

    def to_dict(self) -> dict:
        return asdict(self)


def _parse_task(item: Any, where: str) -> TaskSpec:
    if isinstance(item, str):
        item = {"name": item}
    if not isinstance(item, dict):
        raise ConfigError(where, f"expected {{name, weight, config}}, got {item!r}")
    unknown = set(item) - {"name", "weight", "config"}
    if unknown:
        raise ConfigError(f"{where}.{min(unknown)}", "unknown field; expected name, weight, config")
    if "name" not in item:
        raise ConfigError(f"{where}.name", "is required")
    config = item.get("config") or {}
    if not isinstance(config, dict):
        raise ConfigError(f"{where}.config", f"expected a mapping, got {config!r}")
    return TaskSpec(name=item["name"], weight=item.get("weight", 1.0), config=dict(config))


def _validate_task(task: TaskSpec, where: str) -> None:
    from reasoning_gym.data import read_data_file
    from reasoning_gym.factory import DATASETS

    if task.name not in DATASETS:
        close = [name for name in DATASETS if task.name.lower() in name or name in task.name.lower()]
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{where}.name", f"unknown reasoning_gym task {task.name!r}{hint}")
    if not isinstance(task.weight, (int, float)) or isinstance(task.weight, bool) or task.weight <= 0:
        raise ConfigError(f"{where}.weight", f"must be a positive number, got {task.weight!r}")
    _, config_cls = DATASETS[task.name]
    try:
        config = config_cls(**task.config)
    except TypeError as err:
        raise ConfigError(f"{where}.config", f"not an option of {task.name}: {err}") from None
    try:
        if hasattr(config, "validate"):
            config.validate()
    except (AssertionError, ValueError, TypeError) as err:  # TypeError: e.g. min_word_len: three vs an int bound
        raise ConfigError(f"{where}.config", str(err) or "rejected by reasoning_gym") from None
    try:  # the task's own limits, which validate() does not know: one item is made, as training would
        DATASETS[task.name][0](replace(config, size=1, seed=0))[0]
    except Exception as err:  # noqa: BLE001 - whatever the task raises, the config is what cannot work
        lengths = {len(w) for w in read_data_file(config.data_file).split()} if hasattr(config, "data_file") else ()
        known = (
            f"; reasoning_gym's {config.data_file} has words of {min(lengths)} to {max(lengths)} letters"
            if lengths
            else ""
        )
        raise ConfigError(
            f"{where}.config", f"{task.name} cannot make a question from it ({one_line(err)}){known}"
        ) from None
