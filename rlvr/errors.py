"""The one error type for bad user input: it names the field, so a one-line message is enough."""

import argparse
import math
import re


class ConfigError(ValueError):
    """Bad input in a config, dataset or CLI flag. `str()` is a single line: `<field>: <what is wrong>`."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = " ".join(str(message).split())  # never more than one line
        super().__init__(f"{field}: {self.message}")


def cli(main, *args, **kwargs):
    """Run a command-line `main`: bad input ends the process with one line on stderr and exit status 2."""
    import sys

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
    """argparse whose errors are `ConfigError`s naming the flag, instead of a usage dump and exit."""

    def error(self, message):
        raise ConfigError(flag_in_message(message), message)


def _bounded(kind, name: str, low, inclusive: bool):
    def convert(text):
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {name}, got {text!r}") from None
        if math.isnan(value) or value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"must be {name}, got {text!r}")
        return value

    convert.__name__ = name
    return convert


# argparse `type=`s for CLI flags: a 0 or negative count is an error naming the flag, not a silent "last 0".
positive_int = _bounded(int, "a positive integer", 1, True)
non_negative_int = _bounded(int, "an integer >= 0", 0, True)
positive_float = _bounded(float, "a positive number", 0.0, False)
non_negative_float = _bounded(float, "a number >= 0", 0.0, True)
