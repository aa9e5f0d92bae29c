"""Trackers without surprises: live curves with no account (TensorBoard), and wandb without waiting.

TensorBoard (`report_to: tensorboard`, or `--report_to tensorboard` on any recipe) is the live view that needs no
account and no network: transformers' TensorBoardCallback writes every logged row (TRL's keys and ours:
`avg_<component>`, `zero_std_frac/<component>`, `step/*`, `time/*`, under `train/`) to event files in the run folder as
the run goes, and `tensorboard --logdir <output_dir>/tensorboard --host 127.0.0.1` serves them to a browser, refreshing
every 30 s.
Chosen over trackio, which TRL also supports, because it is one pip package with no web framework behind it (trackio
brings gradio and its dependency tree), its viewer is a page served from the installed package with nothing fetched
from the internet, and the event files it reads are the run's own files.

wandb: a run that reports to wandb but has no credentials, or cannot reach the wandb server within a few seconds, goes
offline and says so in one line (wandb itself would prompt, or retry for ~100 s and then raise)."""

from __future__ import annotations

import difflib
import importlib.util
import netrc
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

from rlvr.inputs import ConfigError, check_writable_folder

REACH_TIMEOUT_S = 5.0
DEFAULT_HOST = "https://api.wandb.ai"


def has_wandb_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators(urlparse(wandb_host()).hostname or "api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        return False


def wandb_host() -> str:
    return os.environ.get("WANDB_BASE_URL") or DEFAULT_HOST


def server_reachable(url: str, timeout: float = REACH_TIMEOUT_S) -> bool:
    """The server answers an HTTP request (any status) within `timeout` seconds in all, DNS included. A bare TCP
    connect is not enough: proxies and sandboxes accept connections to hosts they cannot reach."""
    answered = threading.Event()

    def ask():
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout)
            answered.set()
        except urllib.error.HTTPError:  # 401/404/...: a server did answer
            answered.set()
        except (OSError, ValueError):  # DNS failure, refused, unreachable, timeout, bad URL
            pass

    worker = threading.Thread(target=ask, daemon=True)
    worker.start()
    worker.join(timeout)
    return answered.is_set()


def configure_wandb(report_to: list[str] | str | None, timeout: float = REACH_TIMEOUT_S) -> str | None:
    """Switch wandb to offline when it has no login (never prompt) or no server in reach; return the note printed."""
    reporters = reporters_of(report_to)
    if "wandb" not in reporters and "all" not in reporters:
        return None
    if os.environ.get("WANDB_MODE"):
        return None
    if not has_wandb_credentials():
        note = "wandb: no credentials found (WANDB_API_KEY or ~/.netrc); logging offline. Sync later with `wandb sync`."
    elif not server_reachable(wandb_host(), timeout):
        note = (
            f"wandb: {wandb_host()} not reachable within {timeout:g} s; logging offline. Sync later with `wandb sync`."
        )
    else:
        return None
    os.environ["WANDB_MODE"] = "offline"
    print(note, flush=True)
    return note


TENSORBOARD_DIR = "tensorboard"  # <output_dir>/tensorboard: the event files of every (resumed) leg of a run
LIVE_VIEW_PORT = 6006
_LOG_DIRS_SET_HERE: set[str] = set()  # so a second run in the same process gets its own folder, not the first's


def reporters_of(report_to: list[str] | str | None) -> list[str]:
    return [report_to] if isinstance(report_to, str) else list(report_to or [])


def configure_tensorboard(report_to: list[str] | str | None, output_dir: str) -> str | None:
    """With `report_to: tensorboard`: check it is installed (one line and exit 2 otherwise, before any model loads),
    write its event files to `<output_dir>/tensorboard` (not transformers' dated `runs/<date>_<host>` folder, so the
    viewer's command is the same for every run and a resumed run continues the same curves), and print the command
    that opens the live view. Returns that line, or None when the run does not report to TensorBoard."""
    if "tensorboard" not in reporters_of(report_to):
        return None
    log_dir = os.environ.get("TENSORBOARD_LOGGING_DIR")
    if log_dir is None or log_dir in _LOG_DIRS_SET_HERE:  # the user's own TENSORBOARD_LOGGING_DIR wins
        log_dir = str(Path(output_dir) / TENSORBOARD_DIR)
        os.environ["TENSORBOARD_LOGGING_DIR"] = log_dir  # read by transformers' TensorBoardCallback
        _LOG_DIRS_SET_HERE.add(log_dir)
    note = (
        f"live curves: tensorboard --logdir {log_dir} --host 127.0.0.1 --port {LIVE_VIEW_PORT}, then open "
        f"http://127.0.0.1:{LIVE_VIEW_PORT} (scalars under train/: avg_*, zero_std_frac/*, step/*)"
    )
    print(note, flush=True)
    return note


def check_trackers(report_to: list[str] | str | None, output_dir: str | None) -> None:
    """Every tracker named is one transformers knows and is installed, and TensorBoard's folder can be made
    (`output_dir` None: a dry run, which writes nothing): a typo or a log folder under a file is one line before
    anything is written, not a traceback once the model has loaded."""
    known = ["all", "none", *INTEGRATION_TO_CALLBACK]
    for name in reporters_of(report_to):
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=1)
            raise ConfigError(
                "report_to",
                f"unknown tracker {name!r}{f'; did you mean {close[0]!r}?' if close else ''}"
                f" (one of {', '.join(known)})",
            )
    if "tensorboard" not in reporters_of(report_to):
        return
    if importlib.util.find_spec("tensorboard") is None:
        raise ConfigError(
            "report_to", "tensorboard is not installed: pip install 'rlvr-recipes[live]' (or pip install tensorboard)"
        )
    mine = os.environ.get("TENSORBOARD_LOGGING_DIR")
    if mine is not None and mine not in _LOG_DIRS_SET_HERE:
        check_writable_folder(mine, "TENSORBOARD_LOGGING_DIR")
    elif output_dir:
        check_writable_folder(Path(output_dir) / TENSORBOARD_DIR, "report_to")


def configure_trackers(report_to: list[str] | str | None, output_dir: str) -> None:
    """Every tracker the run reports to, checked, then set up before the model loads."""
    check_trackers(report_to, output_dir)
    configure_tensorboard(report_to, output_dir)
    configure_wandb(report_to)
