"""Generate a task as an HF `DatasetDict` (train/test) from a `DataSpec`, or load one from disk or the Hub.

Rows carry what the trainer, the rewards and later analyses need:
  prompt      conversational: optional system turn + the question (TRL applies the chat template)
  question    the raw question text, for printing rollouts
  answer      the oracle answer
  task        the reasoning_gym task that produced the row
  metadata    the reasoning_gym entry's metadata as JSON: enough for the task's own `score_answer` to re-score
  difficulty  the task's difficulty knob for breakdowns (word length for spell_backward) as an int, None if it has
              none; a loaded dataset's string column ('4') is cast to int, so breakdowns sort 3, 4, ..., 10

reasoning_gym is imported inside the functions that build a task: its import costs seconds at start-up.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import yaml
from datasets import Dataset, DatasetDict, Value, concatenate_datasets, load_dataset, load_from_disk
from rlvr.data.spec import HELD_OUT_SETS, TINY_SYSTEM_PROMPT, DataSpec, Level, levels_of, range_attribute

from rlvr.inputs import ConfigError

REQUIRED_COLUMNS = ("prompt", "answer", "metadata")
# The metadata key holding each task's difficulty knob; tasks not listed get difficulty None.
DIFFICULTY_KEYS = {"spell_backward": "word_len"}


def resolve_system_prompt(system_prompt: str | None) -> str | None:
    """A reasoning_gym prompt name ("DeepSeekZero"), "tiny", literal text, or None."""
    from reasoning_gym.utils import SYSTEM_PROMPTS

    if system_prompt is None or system_prompt == "":
        return None
    if system_prompt == "tiny":
        return TINY_SYSTEM_PROMPT
    return SYSTEM_PROMPTS.get(system_prompt, system_prompt)


def make_prompt(question: str, system_prompt: str | None) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return messages + [{"role": "user", "content": question}]


def as_difficulty(value) -> int | None:
    """An integral difficulty as an int: ints, floats such as 4.0, numpy integers and numeric strings ('4'); anything
    else (None, 'hard', 4.5, NaN, booleans) is None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def _entry_to_row(entry: dict, system_prompt: str | None) -> dict:
    metadata = entry.get("metadata", {})
    task = metadata.get("source_dataset", "")
    difficulty = metadata.get(DIFFICULTY_KEYS.get(task, ""), None)
    return {
        "prompt": make_prompt(entry["question"], system_prompt),
        "question": entry["question"],
        "answer": str(entry["answer"]),
        "task": task,
        "metadata": json.dumps(metadata, default=str),
        "difficulty": as_difficulty(difficulty),
    }


def build_dataset(spec: DataSpec) -> DatasetDict:
    """Same spec + seed -> identical rows. `test_size` distinct questions are held out; no question is in both splits."""
    import reasoning_gym
    from reasoning_gym.composite import DatasetSpec

    mixture = reasoning_gym.create_dataset(
        "composite",
        size=spec.size,
        seed=spec.seed,
        datasets=[DatasetSpec(name=t.name, weight=t.weight, config=dict(t.config)) for t in spec.specs],
    )
    system_prompt = resolve_system_prompt(spec.system_prompt)
    rows = [_entry_to_row(entry, system_prompt) for entry in mixture]
    if spec.held_out is not None:  # a named fixed test set: the same prompts whatever the training mix
        test = build_held_out(spec.held_out, spec.system_prompt)
        held_out = set(test["question"])
        return DatasetDict(
            {"train": Dataset.from_list([row for row in rows if row["question"] not in held_out]), "test": test}
        )

    questions = list(dict.fromkeys(row["question"] for row in rows))  # distinct, in generation order
    if len(questions) <= spec.test_size:
        raise ConfigError("data.test_size", f"only {len(questions)} distinct questions were generated; lower test_size")
    held_out = set(random.Random(spec.seed).sample(questions, spec.test_size))
    test = {}  # question -> its first row
    for row in rows:
        if row["question"] in held_out:
            test.setdefault(row["question"], row)
    train = [row for row in rows if row["question"] not in held_out]
    return DatasetDict({"train": Dataset.from_list(train), "test": Dataset.from_list(list(test.values()))})


def load_task_dataset(source: str) -> DatasetDict:
    """A `save_to_disk` folder or a Hub dataset id, checked for the columns the rewards need."""
    try:
        dataset = load_from_disk(source) if Path(source).exists() else load_dataset(source)
    except Exception as err:  # noqa: BLE001 - any loader failure becomes one line naming the field
        raise ConfigError("dataset_name", f"could not load {source!r}: {type(err).__name__}: {err}") from None
    if not isinstance(dataset, DatasetDict) or "train" not in dataset:
        raise ConfigError("dataset_name", f"{source!r} has no 'train' split")
    for split, ds in dataset.items():
        missing = [column for column in REQUIRED_COLUMNS if column not in ds.column_names]
        if missing:
            raise ConfigError("dataset_name", f"split {split!r} of {source!r} lacks columns {missing}")
    return DatasetDict({split: int_difficulty(ds) for split, ds in dataset.items()})


def int_difficulty(ds: Dataset) -> Dataset:
    """The `difficulty` column as int64 (None where a row has none), whatever type the stored dataset gave it."""
    if "difficulty" not in ds.column_names or ds.features["difficulty"] == Value("int64"):
        return ds
    ds = ds.map(lambda row: {"difficulty": as_difficulty(row["difficulty"])})
    return ds.cast_column("difficulty", Value("int64"))


def dataset_card(spec: DataSpec, dataset: DatasetDict) -> str:
    """A Hub dataset card that records the spec and seed, so anyone can regenerate the exact rows."""
    sizes = ", ".join(f"{split}: {len(ds)}" for split, ds in dataset.items())
    return (
        "---\ntags: [reasoning-gym, rlvr, grpo]\n---\n"
        "# reasoning_gym task data for online RL\n\n"
        f"Generated by `python -m rlvr data` from the spec below ({sizes}). "
        "Same spec and seed give identical rows; test questions never appear in train.\n\n"
        f"```yaml\n{yaml.safe_dump({'data': spec.to_dict()}, sort_keys=False)}```\n"
    )


# ---- curriculum level pools and named held-out sets (their definitions: rlvr/data/spec.py) ----

_SAID: set = set()


def build_level_pools(spec, task_index: int = 0, attribute: str | None = None):
    """(DatasetDict, levels kept): `spec.size` rows per level, built by `build_dataset` from the spec with the
    level's range in the task config, train rows concatenated with an int `level` column (index into the levels
    kept). The test split is the named held-out set when the spec names one, else every level's held-out rows."""
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


def split_level_pools(spec):
    """(DatasetDict, levels): the spec's own splits (`build_dataset`: the rows a run without a curriculum trains and
    evaluates on), the train rows with an int `level` column, one level per difficulty value they hold (word length
    for spell_backward). A curriculum over them reweights the lengths of the same rows, so a held-out set stays
    held out."""
    dataset = build_dataset(spec)
    difficulties = dataset["train"]["difficulty"]
    if None in difficulties:
        raise ConfigError("curriculum.pools", "split needs a difficulty on every train row; this task has none")
    values = sorted(set(difficulties))
    index = {value: i for i, value in enumerate(values)}
    train = dataset["train"].add_column("level", [index[d] for d in difficulties])
    return DatasetDict({"train": train, "test": dataset["test"]}), [Level(v, v, v) for v in values]


@lru_cache(maxsize=8)
def build_held_out(name: str, system_prompt: str | None):
    """The named held-out set as a Dataset with the recipe's system prompt; identical rows for the same name."""
    import reasoning_gym

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
