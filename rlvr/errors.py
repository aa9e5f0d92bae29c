"""The one error type for bad user input: it names the field, so a one-line message is enough."""


class ConfigError(ValueError):
    """Bad input in a config, dataset or CLI flag. `str()` is a single line: `<field>: <what is wrong>`."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = " ".join(str(message).split())  # never more than one line
        super().__init__(f"{field}: {self.message}")
