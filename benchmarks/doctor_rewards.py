"""A deliberately hackable reward for `benchmarks/doctor_cases.py`: it pays the four tags, more the less is inside
them, so the shortest way to full reward is `<think></think><answer></answer>`: full format, hollow content.

    reward_funcs: [benchmarks.doctor_rewards.hollow_tags]     # never train a real model on this
"""

from __future__ import annotations

import re

from rlvr.rewards.functions import completion_text, format_score

CONTENT_BUDGET = 40  # characters inside the tags at which the brevity part pays 0
INSIDE_TAGS = re.compile(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", re.DOTALL)


def hollow_tags(completions, **kwargs) -> list[float]:
    """format (0.25 per tag) times the share of the content budget left unused: 1.0 for empty tags."""
    scores = []
    for completion in completions:
        text = completion_text(completion)
        match = INSIDE_TAGS.search(text)
        used = len(match.group(1).strip()) + len(match.group(2).strip()) if match else CONTENT_BUDGET
        scores.append(format_score(text) * max(0.0, 1.0 - used / CONTENT_BUDGET))
    return scores
