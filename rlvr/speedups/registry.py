"""The speed-up names and the recipe field that lists them (`speedups: none | all | a,b`): a leaf, so the recipe
parser reads it without importing the trainers."""

from __future__ import annotations

SPEEDUPS = ("shared_prefix", "group_prompts", "prefix_attention")
LOGPROB_SPEEDUPS = frozenset({"shared_prefix", "group_prompts"})  # either one takes the prefix-once log-prob path


def parse_speedups(value: str | None) -> frozenset[str]:
    """'all' | 'none' | 'a,b' -> the set of enabled speed-ups; raises ValueError naming an unknown one."""
    text = (value or "none").strip().lower()
    if text == "all":
        return frozenset(SPEEDUPS)
    if text in ("none", "off", "false", ""):
        return frozenset()
    names = frozenset(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(names - set(SPEEDUPS))
    if unknown:
        raise ValueError(f"unknown speed-up(s) {unknown}; choose from {list(SPEEDUPS)}, 'all' or 'none'")
    return names
