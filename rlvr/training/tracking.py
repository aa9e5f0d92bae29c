"""wandb without waiting: a run that reports to wandb but has no credentials, or cannot reach the wandb server within
a few seconds, goes offline and says so in one line (wandb itself would prompt, or retry for ~100 s and then raise)."""

from __future__ import annotations

import netrc
import os
from urllib.parse import urlparse

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
    import threading
    import urllib.error
    import urllib.request

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
    reporters = [report_to] if isinstance(report_to, str) else (report_to or [])
    if "wandb" not in reporters and "all" not in reporters:
        return None
    if os.environ.get("WANDB_MODE"):
        return None
    if not has_wandb_credentials():
        note = "wandb: no credentials found (WANDB_API_KEY or ~/.netrc); logging offline. Sync later with `wandb sync`."
    elif not server_reachable(wandb_host(), timeout):
        note = (f"wandb: {wandb_host()} not reachable within {timeout:g} s; logging offline. "
                "Sync later with `wandb sync`.")
    else:
        return None
    os.environ["WANDB_MODE"] = "offline"
    print(note, flush=True)
    return note
