"""Zero-std groups from rollouts.jsonl: which side a flat group is on, and how often flat groups are expected.

`group_outcomes` counts the step's prompt groups by their correctness outcomes; `zero_std_prediction` sets the
observed fraction of groups flat on exact match beside its closed-form prediction from pass rates.
"""

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
from rlvr.rewards.functions import group_side


def rollout_steps(rollouts: list[dict]) -> list[tuple[dict, list[list[dict]]]]:
    """Per generation step, in order: the row's x values and the step's prompt groups (each a list of its rollouts).

    A rollout's `step` is the optimizer step it was generated for, numbered as metrics.jsonl numbers it (1-based);
    `generated_samples` / `generated_tokens` count every rollout up to that step, as the trainer's ledger does.
    DAPO's extra rounds are groups of the same step.
    """
    groups = defaultdict(list)
    for r in rollouts:
        groups[(r["step"], r.get("round", 0), r["group"])].append(r)
    by_step = defaultdict(list)
    for (step, _, _), members in groups.items():
        by_step[step].append(members)
    samples, tokens = defaultdict(int), defaultdict(int)
    for r in rollouts:
        samples[r["step"]] += 1
        tokens[r["step"]] += r.get("completion_tokens") or 0
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
        sides = [group_side(s) for s in ([r["success"] == 1.0 for r in g if r.get("success") is not None]
                                          for g in groups) if s]
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

    The closed form p^G + (1 - p)^G holds for 0/1 outcomes. Correctness has partial credit: the logged
    `zero_std_frac/correctness` counts a group scoring 0.5 G times as flat and a group of 0.2s and 0.5s as mixed,
    neither of which a pass rate can predict. So the comparison is made on exact match (correctness == 1), 0/1:
      * `zero_std_exact/observed`: groups whose G exact-match outcomes are all equal (all 0 or all 1);
      * `zero_std_exact/predicted_self`: p = the group's own exact-match rate k/G. Biased upward: x^G is convex, so
        E[(k/G)^G] > p^G (for G = 2 the prediction is too high by p(1 - p)); a flat group predicts itself as 1;
      * `zero_std_exact/predicted_peers`: p = the exact-match rate of the step's other groups at the same difficulty
        (all other groups where none shares it), leave-one-group-out, so independent of the group's own draws. Its
        plug-in bias is that of the pool's sample, which shrinks as the pool grows; pooling prompts of different
        pass rates errs the other way (mean(p_i^G) >= mean(p_i)^G).
    Against the observed series, they say how well the picture of G independent draws at a per-prompt pass rate holds. A group flat on correctness is flat on exact match too (all 1, or all 0), so the
    logged `zero_std_frac/correctness` is at most `zero_std_exact/observed`; the gap is the groups that differ only
    in partial credit.
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
            predicted = [flat_probability(peers, len(e)) for i, (_, e) in enumerate(outcomes)
                         if (peers := peer_rate(outcomes, i)) is not None]
            row[exact_key("predicted_peers")] = fmean(predicted) if predicted else None
        rows.append(row)
    return rows


def peer_rate(outcomes: list[tuple], index: int) -> float | None:
    """Exact-match rate of the other groups at group `index`'s difficulty, or of all other groups if none shares it."""
    others = [o for i, o in enumerate(outcomes) if i != index]
    same = [e for difficulty, e in others if difficulty == outcomes[index][0]]
    pool = [v for e in (same or [e for _, e in others]) for v in e]
    return sum(pool) / len(pool) if pool else None
