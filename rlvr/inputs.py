"""The one error path for bad user input, shared by every command: a `ConfigError` names the field, `cli()` turns it
into one stderr line `error: <field>: ...` and exit status 2, and the readers below turn a bad file into one.

Every file the repo reads back (recipes, sweep specs, run folders' YAML, JSON and JSONL records, TRL's pickled
arguments) goes through these readers, so missing, a folder, binary, invalid, nested past `MAX_NESTING` or of the
wrong shape is one line naming the file, whoever wrote it. A run folder can come from anywhere: nothing here builds an
object a file names, except the allow-listed classes `read_allowed_pickle` is given.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import stat
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import yaml


class ConfigError(ValueError):
    """Bad input in a config, dataset or CLI flag. `str()` is a single line: `<field>: <what is wrong>`."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = " ".join(str(message).split())  # never more than one line
        super().__init__(f"{field}: {self.message}")


def cli(main, *args, **kwargs):
    """Run a command-line `main`: bad input ends the process with one line on stderr and exit status 2."""
    try:
        return main(*args, **kwargs)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def flag_in_message(message: str) -> str:
    """The flag or positional an argparse message is about: `argument --k: ...`, `required: --config`, else `--x`."""
    named = re.search(r"argument (\S+?)(?:/\S+)?:", message) or re.search(r"required: (\S+?),?(?:\s|$)", message)
    if named:
        return named.group(1)
    flag = next((word.strip("',:[]") for word in message.split() if word.strip("'[").startswith("--")), "arguments")
    return flag.split("/")[0].split("=")[0]


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are `ConfigError`s naming the flag, instead of a usage dump and exit. A `description`
    given as a module docstring is cut to its first paragraph, on one line: `--help` states what the command does
    without the docstring's usage and notes, and without ending mid-sentence where the first line wraps."""

    def __init__(self, *args, description: str | None = None, **kwargs):
        if description:
            description = " ".join(description.strip().split("\n\n")[0].split())
        super().__init__(*args, description=description, **kwargs)

    def error(self, message):
        raise ConfigError(flag_in_message(message), message)


def _bounded(kind, name: str, low, inclusive: bool, high=math.inf):
    def convert(text):
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {name}, got {text!r}") from None
        if not math.isfinite(value) or value < low or (value == low and not inclusive) or value > high:
            raise argparse.ArgumentTypeError(f"must be {name}, got {text!r}")
        return value

    convert.__name__ = name
    return convert


# argparse `type=`s for CLI flags: a 0 or negative count is an error naming the flag, not a silent "last 0".
positive_int = _bounded(int, "a positive integer", 1, True)
non_negative_int = _bounded(int, "an integer >= 0", 0, True)
positive_float = _bounded(float, "a finite number > 0", 0.0, False)
non_negative_float = _bounded(float, "a finite number >= 0", 0.0, True)
tcp_port = _bounded(int, "a TCP port, 1-65535", 1, True, high=65535)


MAX_NESTING = 64  # levels of lists and mappings in a file read back; a recipe has 5, a record row 3


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping, and nesting past `MAX_NESTING`. Plain YAML lets the
    last key win silently, so two `learning_rate:` lines in a recipe would train with whichever came second; and its
    composer recurses once per level, so a file of a few thousand `[` would end in a RecursionError."""

    depth = 0

    def compose_node(self, parent, index):
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise NestingError(self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKeyError(str(key), seen[key], line)
                seen[key] = line
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
        return super().construct_mapping(node, deep=deep)


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: str, first: int, second: int):
        self.key, self.first, self.second = key, first, second
        super().__init__(f"duplicate key {key!r} (lines {first} and {second})")


class NestingError(yaml.YAMLError):
    def __init__(self, line: int):
        self.line = line
        super().__init__(f"nested deeper than {MAX_NESTING} levels (line {line})")


MAX_YAML_VALUES = 100_000  # a recipe is a few hundred values; a sweep spec or accelerate config fewer


def expanded_size(node, limit: int = MAX_YAML_VALUES) -> int:
    """How many values the composed YAML graph becomes once every alias (and `<<:` merge) is expanded, counted on
    the graph itself (each node once, memoised), so a bomb is measured in microseconds and never built. A node that
    contains itself (`&a [*a]`) expands without end: limit + 1."""
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    stack = [node]
    while stack:
        current = stack[-1]
        children = (
            [child for pair in current.value for child in (pair if isinstance(pair, tuple) else (pair,))]
            if isinstance(current, (yaml.SequenceNode, yaml.MappingNode))
            else []
        )
        if id(current) not in entered:
            entered.add(id(current))
            pending = [child for child in children if id(child) not in sizes]
            if any(id(child) in entered for child in pending):
                return limit + 1  # recursive: an alias inside its own anchor
            stack.extend(pending)
            continue
        stack.pop()
        if id(current) not in sizes:
            sizes[id(current)] = min(limit + 1, 1 + sum(sizes.get(id(child), limit + 1) for child in children))
    return sizes[id(node)]


def read_yaml(path, field: str):
    """Any YAML file the repo reads (recipes, sweep specs, accelerate configs, a run's config.yaml): its value. A
    duplicate key, nesting past MAX_NESTING (counted before the composer recurses into it) or aliases that expand past
    MAX_YAML_VALUES are one `ConfigError` (a duplicate key names the key as the field); missing, a folder, binary or
    invalid raise as `Path.read_text` and yaml do, which `load_yaml_mapping` turns into one."""
    refuse_special_file(path, field)
    loader = UniqueKeyLoader(Path(path).read_text())  # a SafeLoader subclass: no arbitrary objects
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if expanded_size(node) > MAX_YAML_VALUES:
            raise ConfigError(
                field,
                f"{path} expands to more than {MAX_YAML_VALUES} values through its aliases "
                f"(&anchor / *alias); a recipe is a few hundred: refused before building it",
            )
        return loader.construct_document(node)
    except DuplicateKeyError as err:
        raise ConfigError(err.key, f"given twice in {path} (lines {err.first} and {err.second}); keep one") from None
    except NestingError as err:
        raise ConfigError(
            field,
            f"{path} is nested deeper than {MAX_NESTING} levels (line {err.line}): refused before reading it further",
        ) from None
    finally:
        loader.dispose()


def mapping_field(raw, field: str, known, example: str) -> dict:
    """A spec field given as a YAML mapping or, from the command line, a JSON object string: the dict, with every
    key in `known`. Errors name the field (`data`, `curriculum`) or the unknown key (`data.sizes`)."""
    if isinstance(raw, str):
        try:
            raw = parse_json(raw)
        except ValueError as err:
            raise ConfigError(field, f"expected a mapping or JSON object, got {raw[:80]!r} ({err.args[0]})") from None
    if not isinstance(raw, dict):
        raise ConfigError(field, f"expected a mapping like {example}, got {raw!r}")
    for key in raw:
        if key not in known:
            raise ConfigError(f"{field}.{key}", f"unknown field; expected one of {', '.join(sorted(known))}")
    return raw


def load_yaml_mapping(path, field: str, expected: str = "a YAML mapping of field: value") -> dict:
    """The mapping in `path`; errors name `field` (the flag or spec entry that gave the path)."""
    try:
        raw = read_yaml(path, field)
    except FileNotFoundError:
        raise ConfigError(field, f"no such file: {path}") from None
    except IsADirectoryError:
        raise ConfigError(field, f"{path} is a directory, not a YAML file") from None
    except UnicodeDecodeError:
        raise ConfigError(field, f"{path} is not a text file") from None
    except OSError as err:
        raise ConfigError(field, f"cannot read {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(field, f"invalid YAML in {path}: {' '.join(str(err).split())}") from None
    if not isinstance(raw, dict):
        raise ConfigError(field, f"{path} must hold {expected}")
    return raw


def check_writable_folder(path, field: str) -> None:
    """`path` is a folder that exists and is writable, or one `mkdir -p` could create: the nearest existing ancestor
    is a folder a file can be created in (tried with a temporary file, removed at once: `os.access` says yes to root
    on a read-only mount), and each name still to create fits the file system. Fails here, before anything loads,
    not as a traceback after the model has loaded."""
    target = Path(os.path.abspath(os.path.expanduser(str(path))))
    if os.path.exists(target) and not target.is_dir():  # os.path.exists: False (not an error) for a too-long name
        raise ConfigError(field, f"{path} is a file, not a folder")
    existing = next(p for p in (target, *target.parents) if os.path.exists(p) or p == Path(p.anchor))
    if not existing.is_dir():
        raise ConfigError(field, f"cannot create {path}: {existing} is a file, not a folder")
    try:
        longest = os.pathconf(existing, "PC_NAME_MAX")
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as err:
        raise ConfigError(field, f"cannot write to {path}: {existing}: {err.strerror or err}") from None
    for name in target.relative_to(existing).parts:
        if len(os.fsencode(name)) > longest:
            raise ConfigError(
                field,
                f"{path}: the name {name[:20]}... is {len(os.fsencode(name))} bytes, longer "
                f"than the {longest} the file system allows",
            )


NAME_MAX = 255  # bytes in one path part on the file systems runs are written to (ext4, xfs, NFS)


def name_inside(folder, name, field: str, what: str = "name") -> Path:
    """THE check for a name that comes from a file or a spec and becomes a path part inside `folder` (a sweep's name
    and labels, a weight index's shards, a run id, a Slurm jobs.json entry): a non-empty string on one line, one
    path part (no `/`, `\\`, NUL), not `.` or `..`, at most NAME_MAX bytes. Returns `folder / name`; anything else is
    one `ConfigError` on `field`, so nothing is written or opened outside the folder."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(field, f"{what} must be a non-empty string, got {str(name)[:40]!r}")
    problem = (
        "is `.` or `..`"
        if name in (".", "..")
        else "holds a path separator"
        if any(c in name for c in "/\\")
        else "holds a control character (a newline, NUL, ...)"
        if any(ord(c) < 32 or ord(c) == 127 for c in name)
        else f"is longer than {NAME_MAX} bytes"
        if len(name.encode(errors="replace")) > NAME_MAX
        else None
    )
    if problem:
        raise ConfigError(field, f"{what} {name[:60]!r} {problem}: it must name one entry inside {folder}")
    return Path(folder) / name


def refuse_special_file(path, field: str) -> None:
    """A FIFO, socket or device where a file is read is one `ConfigError` on `field`, never opened: opening a FIFO
    waits for a writer forever, and a device can be read without end. Missing or unreadable: the read says so."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ConfigError(field, f"{path} is not a regular file (a FIFO, socket or device): not read")


def read_text(path, field: str) -> str:
    """A text file a flag names: missing, a folder, binary, unreadable or not a regular file is one `ConfigError` on
    `field`."""
    refuse_special_file(path, field)
    try:
        return Path(path).read_text()
    except UnicodeDecodeError:
        raise ConfigError(field, f"{path} is not a text file") from None
    except OSError as err:
        raise ConfigError(field, f"cannot read {path}: {err.strerror or err}") from None


def nesting_depth(value) -> int:
    """Levels of lists and dicts in a parsed value, counted without recursion (a list of numbers: 1)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        current, depth = stack.pop()
        children = current.values() if isinstance(current, dict) else current if isinstance(current, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_NESTING:
            stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_json(text: str):
    """`json.loads` for text a file held: nesting past MAX_NESTING is a ValueError like any other malformed JSON (the
    decoder itself recurses once per level, so a few thousand `[` would end in a RecursionError)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels") from None
    if nesting_depth(value) > MAX_NESTING:
        raise ValueError(f"nested deeper than {MAX_NESTING} levels")
    return value


JSON_KINDS = {dict: "a JSON object", list: "a JSON list"}


def read_json(path, field: str, expected: type | None = None):
    """A JSON file the repo reads back (an evaluation, a summary, run.json): missing, a folder, binary, invalid JSON,
    nested past MAX_NESTING, or not of the `expected` type (dict or list): one `ConfigError` on `field`."""
    text = read_text(path, field)
    try:
        value = parse_json(text)
    except ValueError as err:
        raise ConfigError(field, f"{path} is not readable JSON ({' '.join(str(err).split())})") from None
    if expected is not None and not isinstance(value, expected):
        raise ConfigError(
            field, f"{path} must hold {JSON_KINDS[expected]}, not {type(value).__name__} {str(value)[:40]}"
        )
    return value


def read_allowed_pickle(path, field: str, allowed: list):
    """The object in a `torch.save` file (TRL's training_args.bin) built by torch's weights-only unpickler, which
    calls nothing but tensor rebuilders and the `allowed` classes (their `__new__`, then their `__dict__` filled in;
    enums looked up by value): a file naming anything else (`os.system`, a class of its own) is refused without
    running it. Any failure is one `ConfigError` on `field`."""
    # start-up: torch costs seconds to import (7.5 s measured on 2 loaded cores); only this file needs it
    import torch

    refuse_special_file(path, field)
    try:
        with torch.serialization.safe_globals(allowed), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about the pickle's format; the error below says what matters
            # a zip (torch.save's format) is memory-mapped: a checkpoint's optimizer state is checked, not read
            return torch.load(path, weights_only=True, map_location="cpu", mmap=zipfile.is_zipfile(path))
    except Exception as err:  # noqa: BLE001 - nothing but allow-listed code ran: any failure is the file's content
        raise ConfigError(field, f"{path} not read: {unpickling_reason(err)}") from None


def unpickling_reason(err: BaseException) -> str:
    """The line of torch's weights-only refusal that says what the file held (`GLOBAL posix.system ... blocked`,
    `Unsupported operand 103`), without its paragraphs of advice; another error as `one_line` gives it."""
    text = str(err)
    if not text.startswith("Weights only load failed"):
        return one_line(err)[:200]
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    paragraphs = [p for p in paragraphs if not p.startswith("Check the documentation")]
    reason = (
        " ".join(paragraphs).split("WeightsUnpickler error:")[-1]
        if "WeightsUnpickler error:" in text
        else paragraphs[-1]
    )
    reason = reason.split(" Please use ")[0].strip()
    return reason[:200]


def one_line(err: BaseException) -> str:
    """A library's exception as one line: its type and its message with every run of whitespace collapsed."""
    return f"{type(err).__name__}: {' '.join(str(err).split())}".rstrip(": ")


def reject_unknown_keys(raw: dict, known, what: str) -> None:
    """The first key of `raw` not in `known` fails, with the closest known key as a hint."""
    for key in raw:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            raise ConfigError(str(key), f"unknown {what}{f'; did you mean {close[0]!r}?' if close else ''}")


BASE_KEY = "base"  # `base: recipes/tiny/grpo.yaml`: start from that recipe, override with this file's fields


def _deep_merge(base: dict, override: dict) -> dict:
    """Mappings merge key by key (a child's `data: {size: 100}` keeps the base's specs); anything else replaces."""
    merged = dict(base)
    for key, value in override.items():
        merged[key] = (
            _deep_merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def load_recipe_yaml(path, field_name: str = "--config", _seen: tuple = ()) -> dict:
    """A recipe file as one mapping, with its `base:` chain resolved (paths relative to the file, then to the cwd)."""
    if os.path.isdir(path):
        raise ConfigError(field_name, f"{path} is a directory, not a recipe YAML file")
    raw = load_yaml_mapping(path, field_name)
    base = raw.pop(BASE_KEY, None)
    if base is None:
        return raw
    if not isinstance(base, str):
        raise ConfigError(BASE_KEY, f"must be the path of another recipe YAML, got {base!r} in {path}")
    candidates = [Path(path).parent / base, Path(base)]
    base_path = next((c for c in candidates if c.is_file()), None)
    if base_path is None:
        raise ConfigError(BASE_KEY, f"no such recipe file: {base!r} (from {path})")
    if base_path.resolve() in _seen:
        raise ConfigError(BASE_KEY, f"{path} inherits from itself through {base!r}")
    parent = load_recipe_yaml(base_path, BASE_KEY, (*_seen, Path(path).resolve(), base_path.resolve()))
    return _deep_merge(parent, raw)
