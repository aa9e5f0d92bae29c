"""Zero-std groups from rollouts.jsonl: which side a flat group is on (`group_outcomes`), and how often flat groups
are expected (`zero_std_prediction`)."""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean

from rlvr.metrics.keys import (
    EXACT_SERIES,
    GENERATED_SAMPLES,
    GENERATED_TOKENS,
    GROUP_SIDES,
    MIXED,
    exact_key,
    group_key,
)
from rlvr.metrics.reward_batch import group_side


def rollout_steps(rollouts: list[dict]) -> list[tuple[dict, list[list[dict]]]]:
    """Per generation step (metrics.jsonl's 1-based numbering), in order: the row's x values (samples and tokens
    generated up to that step, as the trainer's ledger counts them) and the step's prompt groups, DAPO's extra rounds
    included."""
    groups, samples, tokens = defaultdict(list), defaultdict(int), defaultdict(int)
    for r in rollouts:
        groups[(r["step"], r.get("round", 0), r["group"])].append(r)
        samples[r["step"]] += 1
        tokens[r["step"]] += r.get("completion_tokens") or 0
    by_step = defaultdict(list)
    for (step, _, _), members in groups.items():
        by_step[step].append(members)
    steps, seen_samples, seen_tokens = [], 0, 0
    for step in sorted(by_step):
        seen_samples += samples[step]
        seen_tokens += tokens[step]
        x = {"step": step, GENERATED_SAMPLES: seen_samples, GENERATED_TOKENS: seen_tokens}
        steps.append((x, by_step[step]))
    return steps


def group_outcomes(rollouts: list[dict]) -> list[dict]:
    """Per optimizer step, the fraction of prompt groups that are all wrong, all correct (`group_side`, by each
    rollout's `success`: the definition the batch readings' `zero_std_side/*` use) or mixed. A group flat on total
    and all wrong counts in both `groups/all_wrong` and `zero_std_side/all_wrong`."""
    rows = []
    for x, groups in rollout_steps(rollouts):
        sides = [
            group_side(s)
            for s in ([r["success"] == 1.0 for r in g if r.get("success") is not None] for g in groups)
            if s
        ]
        n = len(sides) or 1
        rows.append({**x, **{group_key(side or MIXED): sides.count(side) / n for side in (*GROUP_SIDES, None)}})
    return rows


def flat_probability(p: float, num_generations: int) -> float:
    """P(all G outcomes equal) for G independent 0/1 draws with success probability p: p^G + (1 - p)^G."""
    return p**num_generations + (1 - p) ** num_generations


def exact_match(rollout: dict) -> bool:
    """A rollout's exact match: its `exact` field (the extracted answer is exactly right), written by runs since it
    exists; older rollouts fall back to correctness == 1.0, which a wrong answer can reach (step/false_full_credit)."""
    return bool(rollout["exact"]) if "exact" in rollout else rollout.get("correctness") == 1.0


def zero_std_prediction(rollouts: list[dict]) -> list[dict]:
    """Per step, the fraction of groups with zero std on exact match (`exact_match`), observed and predicted.

    The closed form p^G + (1 - p)^G holds for 0/1 outcomes, so the comparison is on exact match, not on partial-credit
    correctness: `observed` (all G outcomes equal); `predicted_self`, p = the group's own rate k/G (biased upward:
    x^G is convex; a flat group predicts itself as 1); `predicted_peers`, p = the rate of the step's other groups at
    the same difficulty (all others where none shares it), independent of the group's own draws.
    """
    rows = []
    for x, groups in rollout_steps(rollouts):
        outcomes = []  # (difficulty, exact-match outcomes) per scored group
        for g in groups:
            exact = [float(exact_match(r)) for r in g if r.get("correctness") is not None]
            if exact:
                outcomes.append((g[0].get("difficulty"), exact))
        row = {**x, **dict.fromkeys(EXACT_SERIES)}
        if outcomes:
            row[exact_key("observed")] = fmean([float(len(set(e)) == 1) for _, e in outcomes])
            row[exact_key("predicted_self")] = fmean([flat_probability(sum(e) / len(e), len(e)) for _, e in outcomes])
            predicted = [
                flat_probability(peers, len(e))
                for i, (_, e) in enumerate(outcomes)
                if (peers := peer_rate(outcomes, i)) is not None
            ]
            row[exact_key("predicted_peers")] = fmean(predicted) if predicted else None
        rows.append(row)
    return rows


def peer_rate(outcomes: list[tuple], index: int) -> float | None:
    """Exact-match rate of the other groups at group `index`'s difficulty, or of all other groups if none shares it."""
    others = [o for i, o in enumerate(outcomes) if i != index]
    same = [e for difficulty, e in others if difficulty == outcomes[index][0]]
    pool = [v for e in (same or [e for _, e in others]) for v in e]
    return sum(pool) / len(pool) if pool else None
