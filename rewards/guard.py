"""Reward functions are user code: check them before the model loads, and name them when they fail mid-run.

TRL calls each reward function inside the training step, so one that raises, returns None, strings or the wrong
number of scores ends the run minutes in with a traceback from deep in TRL, naming nothing. Two guards:
`probe_rewards` (before any model loads, also in a dry run) calls each function as TRL does on probe completions and
turns a bad return into a `ConfigError`, and a constant one into a warning line; `guard_rewards` (at run time) wraps
each function so a failure finds the offending completion, writes `reward_error.json` and stops in one line.
Both bound each call by `reward_time_limit` (`time_limit`: a SIGALRM timer, and faulthandler's hard stop for code that
never returns to Python). What each covers and cannot: docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import inspect
import json
import math
import numbers
import signal
import sys
import threading
from pathlib import Path

from transformers import TrainerState

from rlvr.inputs import ConfigError
from rlvr.runs import layout

PROBE_ROWS = 2
HARD_STOP_GRACE = 60  # seconds past the limit before faulthandler ends a process whose reward never returned


class RewardFunctionError(ConfigError):
    """A reward function failed during training (a ConfigError: the `cli` wrapper prints it as one line)."""


class RewardTimeout(BaseException):
    """Raised inside a reward call that ran past `reward_time_limit` (see the module docstring)."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Bound the enclosed call to `seconds` (None or 0: no bound): RewardTimeout at the limit, faulthandler's hard stop
    HARD_STOP_GRACE later if the call never comes back to Python."""
    if not seconds:
        yield
        return
    try:  # on the process's own stderr (file descriptor 2), whatever sys.stderr was redirected to
        faulthandler.dump_traceback_later(seconds + HARD_STOP_GRACE, exit=True, file=sys.__stderr__)
        hard_stop = True
    except (AttributeError, ValueError, OSError, RuntimeError):  # no usable stderr (pythonw): the timer only
        hard_stop = False
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:

        def on_alarm(signum, frame):
            raise RewardTimeout

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if in_main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        if hard_stop:
            faulthandler.cancel_dump_traceback_later()


def probe_texts(answer) -> list[str]:
    """Empty, well formed (the right answer in the right tags) and malformed completions: they differ in length,
    correctness (0, 1, 0), format (0, 1, 0.75) and success, so no sensible reward is constant on them."""
    return ["", f"<think>{answer}</think><answer>{answer}</answer>", "</answer><think>\x00<answer>"]


def call_kwargs(rows: list[dict], texts: list[str]) -> dict:
    """Arguments exactly as TRL's `_calculate_rewards` passes them: prompts, completions, completion_ids, every dataset
    column but prompt as a list, the trainer state and the two logging hooks."""
    conversational = isinstance(rows[0].get("prompt"), list)
    keys = [key for key in rows[0] if key not in ("prompt", "completion", "completion_ids")]
    return {
        "prompts": [row.get("prompt") for row in rows],
        "completions": [[{"role": "assistant", "content": text}] if conversational else text for text in texts],
        "completion_ids": [list(text.encode())[:32] for text in texts],
        **{key: [row[key] for row in rows] for key in keys},
        "trainer_state": TrainerState(),
        "log_extra": lambda *args, **kwargs: None,
        "log_metric": lambda *args, **kwargs: None,
    }


def output_problem(output, expected: int) -> str | None:
    """What is wrong with a reward function's return value, or None if it is a list of numbers-or-None of the length."""
    if not isinstance(output, (list, tuple)):
        return f"returned {type(output).__name__} {_short(output)}, not a list"
    if len(output) != expected:
        return f"returned {len(output)} scores for {expected} completions"
    bad = next((v for v in output if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Real))), None)
    if bad is not None:
        return f"returned {type(bad).__name__} {_short(bad)} among its scores"
    return None


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _name(func) -> str:
    return getattr(func, "__name__", type(func).__name__)


def _plain(func) -> bool:
    """Only synchronous Python callables are probed and wrapped (TRL runs async ones and reward models itself)."""
    return callable(func) and not inspect.iscoroutinefunction(func) and not hasattr(func, "forward")


def probe_rewards(reward_set, rows: list[dict], seconds: float | None = None) -> None:
    """Call every reward once on probe completions for the first dataset rows; a bad one is a one-line ConfigError
    (so is one that takes longer than `seconds`)."""
    rows = [dict(row) for row in rows[:PROBE_ROWS]]
    if not rows:
        return
    batch_rows = [row for row in rows for _ in range(3)]
    texts = [text for row in rows for text in probe_texts(row.get("answer", ""))]
    kwargs = call_kwargs(batch_rows, texts)
    for func in reward_set.funcs:
        if not _plain(func):
            continue
        try:
            with time_limit(seconds):
                output = func(**kwargs)
        except RewardTimeout:
            raise ConfigError(
                "reward_funcs",
                f"{_name(func)} did not return within reward_time_limit {seconds:g} s on "
                f"{len(texts)} probe completions",
            ) from None
        except Exception as err:  # noqa: BLE001 - user code: any exception is the finding
            raise ConfigError(
                "reward_funcs", f"{_name(func)} raised {type(err).__name__}: {err} on probe completions {texts[:3]!r}"
            ) from None
        if problem := output_problem(output, len(texts)):
            raise ConfigError(
                "reward_funcs",
                f"{_name(func)} {problem} on probe completions (expected a list of {len(texts)} numbers or None)",
            )
        if (warning := constant_warning(_name(func), output, isinstance(rows[0].get("prompt"), list))) is not None:
            print(warning, file=sys.stderr, flush=True)


CONSTANT_BY_DESIGN = ("penalty",)  # the overlong penalty is 0 on every completion shorter than its threshold


def constant_warning(name: str, output: list, conversational: bool) -> str | None:
    """One line when a reward returned the same value for every probe completion (None otherwise)."""
    values = {v for v in output if v is not None and not math.isnan(v)}  # None and NaN: not scored (TRL's reading)
    if not values and output:
        return (
            f"warning: reward_funcs: {name} returned None or NaN for every probe completion: it may leave some "
            f"completions unscored, but a training step in which it scores none stops the run"
        )
    if name in CONSTANT_BY_DESIGN or len(values) != 1 or len(output) < 2:
        return None
    shape = "lists of chat messages ([{'role': 'assistant', 'content': ...}])" if conversational else "strings"
    return (
        f"warning: reward_funcs: {name} returned {values.pop()!r} for every probe completion, so it would train on "
        f"a constant; completions here are {shape}: take the text with "
        f"rlvr.rewards.functions.completion_text(c)"
    )


def _one(kwargs: dict, i: int, size: int) -> dict:
    return {k: [v[i]] if isinstance(v, list) and len(v) == size else v for k, v in kwargs.items()}


def _offender(func, kwargs: dict, size: int) -> tuple[int, str]:
    """The first completion that makes `func` fail on its own, and how it fails; (0, ...) if none does alone."""
    for i in range(size):
        try:
            problem = output_problem(func(**_one(kwargs, i, size)), 1)
        except Exception as err:  # noqa: BLE001
            problem = f"raised {type(err).__name__}: {err}"
        if problem:
            return i, problem
    return 0, "failed only on the whole batch"


def guard_rewards(funcs: list, output_dir: str, seconds: float | None = None) -> list:
    """The reward functions, each wrapped so a failure mid-run (or a call longer than `seconds`) is one named line
    plus `reward_error.json`."""
    return [_guarded(func, output_dir, seconds) if _plain(func) else func for func in funcs]


def _guarded(func, output_dir: str, seconds: float | None = None):
    name = _name(func)

    @functools.wraps(func)
    def guarded(*args, **kwargs):
        size = len(kwargs.get("completions") or [])
        timed_out = False
        try:
            with time_limit(seconds):
                output = func(*args, **kwargs)
            problem = output_problem(output, size)
        except RewardTimeout:
            problem, timed_out = f"did not return within reward_time_limit {seconds:g} s", True
        except Exception as err:  # noqa: BLE001 - user code
            problem = f"raised {type(err).__name__}: {err}"
        if problem is None:
            return output
        state = kwargs.get("trainer_state")
        step = getattr(state, "global_step", None)
        if timed_out:  # re-scoring one completion at a time could take the limit once per completion
            index, alone = None, f"not searched: the call on all {size} completions timed out"
        else:
            index, alone = _offender(func, kwargs, size) if size else (0, problem)
        found = index is not None and size
        record = {
            "function": name,
            "step": step,
            "problem": problem,
            "offending_index": index,
            "offending_problem": alone,
            "completion": kwargs["completions"][index] if found else None,
            "row": {
                k: v[index]
                for k, v in kwargs.items()
                if isinstance(v, list) and len(v) == size and k not in ("completions", "completion_ids")
            }
            if found
            else None,
        }
        path = Path(output_dir) / layout.REWARD_ERROR
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=2, default=str, ensure_ascii=False) + "\n")
        what = "the call is described" if timed_out else "the completion and its row are"
        raise RewardFunctionError(
            "reward_funcs", f"{name} {problem} at step {step}; {what} in {path} (the last checkpoint is untouched)"
        )

    guarded.__name__ = name  # TRL names metrics (and DAPO finds its filter reward) by __name__
    return guarded
