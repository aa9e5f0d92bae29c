"""Reading a user's YAML file: a missing file, bad YAML, a non-mapping or a misspelled key is one named line."""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml

from rlvr.errors import ConfigError


def load_yaml_mapping(path, field: str, expected: str = "a YAML mapping of field: value") -> dict:
    """The mapping in `path`; errors name `field` (the flag or spec entry that gave the path)."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
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


def reject_unknown_keys(raw: dict, known, what: str) -> None:
    """The first key of `raw` not in `known` fails, with the closest known key as a hint."""
    for key in raw:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            raise ConfigError(str(key), f"unknown {what}{f'; did you mean {close[0]!r}?' if close else ''}")
