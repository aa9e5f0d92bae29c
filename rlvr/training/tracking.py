"""wandb without waiting: a run that reports to wandb but has no credentials goes offline and says so once."""

from __future__ import annotations

import netrc
import os


def has_wandb_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        return False


def configure_wandb(report_to: list[str] | str | None) -> str | None:
    """Switch wandb to offline when it has no login (never prompt); return the note printed, if any."""
    reporters = [report_to] if isinstance(report_to, str) else (report_to or [])
    if "wandb" not in reporters and "all" not in reporters:
        return None
    if os.environ.get("WANDB_MODE") or has_wandb_credentials():
        return None
    os.environ["WANDB_MODE"] = "offline"
    note = "wandb: no credentials found (WANDB_API_KEY or ~/.netrc); logging offline. Sync later with `wandb sync`."
    print(note, flush=True)
    return note
