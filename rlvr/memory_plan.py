"""Kept so `python -m rlvr.memory_plan` and old imports still work: the planner is the `rlvr.planning` package."""

from rlvr.planning import *  # noqa: F401,F403


if __name__ == "__main__":
    from rlvr.errors import cli

    cli(main)
