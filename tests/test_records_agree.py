"""A real short run's records agree with each other: rollouts.jsonl and metrics.jsonl number the same steps, and every
logged zero_std_frac/<component> equals a recount from the rollouts of its step (the exact flatness test)."""

from pathlib import Path

import pytest
import torch
from conftest import read_jsonl

from rlvr.metrics.keys import ROLLOUT_FIELDS, ZERO_STD_PREFIX
from rlvr.metrics.reward_batch import zero_std_fraction


def test_logged_zero_std_fractions_equal_a_recount_from_the_rollouts(run_recipe):
    G = 4
    _, out = run_recipe("--max_steps", "3", "--num_generations", str(G))
    rows = [row for row in read_jsonl(Path(out) / "metrics.jsonl") if "loss" in row]
    rollouts = read_jsonl(Path(out) / "rollouts.jsonl")
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert sorted({r["step"] for r in rollouts}) == [1, 2, 3]  # one step numbering for both files
    checked = 0
    for row in rows:
        assert {"avg_success", "zero_std_frac/success", "step/false_full_credit"} <= set(row)
        step_rollouts = [r for r in rollouts if r["step"] == row["step"]]
        assert len(step_rollouts) == 16
        for key in [k for k in row if k.startswith(ZERO_STD_PREFIX)]:
            component = key[len(ZERO_STD_PREFIX) :]
            values = torch.tensor(
                [float("nan") if r[component] is None else r[component] for r in step_rollouts], dtype=torch.float32
            )
            assert row[key] == pytest.approx(zero_std_fraction(values, G), abs=1e-9), (row["step"], key)
            checked += 1
    assert checked >= 3 * 6  # correctness, format, success, binary, total, penalty at every step


def test_rollouts_carry_the_exact_answer_flag_and_readers_prefer_it(run_recipe):
    from rlvr.analysis.zero_std import exact_match

    _, out = run_recipe("--max_steps", "1")
    rollouts = read_jsonl(Path(out) / "rollouts.jsonl")
    assert all(isinstance(r["exact"], bool) for r in rollouts)
    # every field that is not a reward component is in ROLLOUT_FIELDS (the components are the floats)
    assert all(isinstance(v, float) for r in rollouts for k, v in r.items() if k not in ROLLOUT_FIELDS)
    assert set(ROLLOUT_FIELDS) <= set(rollouts[0])
    assert all(r["correctness"] == 1.0 and r["success"] == float(r["format"] == 1.0) for r in rollouts if r["exact"])
    assert exact_match({"exact": False, "correctness": 1.0}) is False  # full credit, wrong answer (the hack route)
    assert exact_match({"correctness": 1.0}) is True  # a rollout written before the flag existed
