"""CPU / tiny-model speed-ups: how a step is computed, never what it computes (same samples, same loss up to float
rounding). Opt-in: a recipe names them in its `speedups:` field (`none`, the default, `all`, or a comma list), and
they enter the trainer in one place, `shared_prefix.with_speedups`, which `trainer_for` calls only when a recipe names
one; a trainer built without speed-ups has no class of this package in its MRO. The GPU recipes do not name them: they
were never measured exact or faster on a GPU.

  shared_prefix     the prompt prefix every row shares runs once, at batch size 1, in generation and log-prob passes
  group_prompts     rows that share their whole prompt (a GRPO group) run that prompt's rest once per group
  prefix_attention  generation attends the prefix's single copy of keys and values (prefix_attention.py)
  gqa_attention     transformers' SDPA attention reads each key/value head once instead of a copy per query head
                    (gqa_attention.py)

What each does, where it applies and what it bought: docs/speed.md and docs/measurements/speed.md.

The names and the recipe field that lists them live here, in the package itself and importing nothing, so the
recipe parser reads them without importing any speed-up implementation; it imports this package only when a recipe
names a speed-up, so a GPU recipe loads none of it.
"""

from __future__ import annotations

SPEEDUPS = ("shared_prefix", "group_prompts", "prefix_attention", "gqa_attention")
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
