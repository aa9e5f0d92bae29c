"""The one error type for bad user input: it names the field, so a one-line message is enough."""

import argparse


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
    flag = next((word.strip("',:") for word in message.split() if word.startswith("--")), "arguments")
    return flag.split("/")[0]


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are `ConfigError`s naming the flag, instead of a usage dump and exit."""

    def error(self, message):
        raise ConfigError(flag_in_message(message), message)
