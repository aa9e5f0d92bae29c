"""Zero-std prediction p^G + (1 - p)^G against hand-built rollouts: observed exact-match flatness, the prediction from
each group's own pass rate and from its peers', their biases, and the per-run figure."""

import itertools
import math

import pytest
import torch
from test_plots_report import metric_rows, write_run

from rlvr.analysis import plots
from rlvr.analysis.loaders import load_run
from rlvr.analysis.zero_std import flat_probability, zero_std_prediction
from rlvr.metrics.reward_batch import zero_std_fraction

# (step, round, group): (difficulty, correctness of the G = 4 completions). Exact match = correctness 1. Steps are
# 1-based, the optimizer step the rollouts are for, as metrics.jsonl numbers them.
GROUPS = {
    (1, 0, 0): (3, [1.0, 1.0, 1.0, 1.0]),  # 4 exact: flat
    (1, 0, 1): (3, [1.0, 0.5, 1.0, 0.0]),  # 2 exact
    (1, 0, 2): (3, [1.0, 0.0, 0.0, 0.0]),  # 1 exact
    (1, 0, 3): (5, [0.2, 0.5, 0.0, 0.2]),  # 0 exact: flat on exact match, mixed on correctness
    (2, 0, 0): (3, [0.75, 0.75, 0.75, 0.75]),  # 0 exact: flat on both
    (2, 1, 0): (3, [1.0, 0.0, 1.0, 1.0]),  # DAPO's second round of the same step: 3 exact
}


def rollouts(groups=GROUPS):
    return [
        {
            "step": step,
            "round": rnd,
            "group": group,
            "difficulty": difficulty,
            "correctness": c,
            "success": float(c == 1.0),
            "completion_tokens": 5,
        }
        for (step, rnd, group), (difficulty, scores) in groups.items()
        for c in scores
    ]


def flat4(p):
    return p**4 + (1 - p) ** 4


def test_closed_form():
    assert flat_probability(0.5, 4) == 0.125 and flat_probability(1.0, 8) == 1.0
    assert flat_probability(0.25, 2) == pytest.approx(0.625)  # 1/16 + 9/16


def test_observed_and_predicted_series_by_hand():
    first, second = zero_std_prediction(rollouts())
    assert (first["step"], first["generated_samples"], second["generated_samples"]) == (1, 16, 24)
    assert first["zero_std_exact/observed"] == 0.5  # groups 0 and 3
    assert first["zero_std_exact/predicted_self"] == pytest.approx((1 + flat4(0.5) + flat4(0.25) + 1) / 4)
    # Peers at the same difficulty, leaving the group out: 3/8, 5/8, 6/8; group 3 is alone at 5 -> all others, 7/12.
    assert first["zero_std_exact/predicted_peers"] == pytest.approx(
        (flat4(3 / 8) + flat4(5 / 8) + flat4(6 / 8) + flat4(7 / 12)) / 4
    )
    # Step 2 pools its two rounds: one flat group (0 exact), one with 3 exact; each is the other's peer.
    assert second["zero_std_exact/observed"] == 0.5
    assert second["zero_std_exact/predicted_self"] == pytest.approx((1 + flat4(0.75)) / 2)
    assert second["zero_std_exact/predicted_peers"] == pytest.approx((flat4(0.75) + 1) / 2)


def test_a_lone_group_has_no_peer_prediction():
    (row,) = zero_std_prediction(rollouts({(1, 0, 0): (3, [1.0, 0.0])}))
    assert row["zero_std_exact/observed"] == 0.0 and row["zero_std_exact/predicted_self"] == 0.5
    assert row["zero_std_exact/predicted_peers"] is None


def test_logged_partial_credit_fraction_is_at_most_the_exact_match_one():
    """Step 1: only group 0 is flat on correctness (the metric the trainer logs), groups 0 and 3 on exact match."""
    values = torch.tensor([c for key, (_, scores) in GROUPS.items() if key[0] == 1 for c in scores])
    assert zero_std_fraction(values, 4) == 0.25 <= zero_std_prediction(rollouts())[0]["zero_std_exact/observed"]


@pytest.mark.parametrize("G", [2, 4, 8])
def test_own_group_prediction_is_biased_upward(G):
    """One group of G draws at pass rate p, every outcome enumerated and weighted by its probability: the observed
    flatness `zero_std_prediction` reports averages to flat(p), its own-group prediction to the binomial plug-in mean
    E[flat(k / G)], which is more than that; for G = 2 the excess is p(1 - p)."""
    for p in (0.1, 0.3, 0.5, 0.9):
        observed = predicted = 0.0
        for outcome in itertools.product([0.0, 1.0], repeat=G):
            weight = math.prod(p if v else 1 - p for v in outcome)
            (row,) = zero_std_prediction(rollouts({(1, 0, 0): (3, list(outcome))}))
            observed += weight * row["zero_std_exact/observed"]
            predicted += weight * row["zero_std_exact/predicted_self"]
        assert observed == pytest.approx(flat_probability(p, G))
        assert predicted == pytest.approx(plug_in_mean(p, G, G))
        assert predicted > observed + 1e-3
        if G == 2:
            assert predicted - observed == pytest.approx(p * (1 - p))


def plug_in_mean(p, samples, G):
    """E[flat(k / samples, G)] for k ~ Binomial(samples, p): what a plug-in prediction averages to."""
    return sum(
        math.comb(samples, k) * p**k * (1 - p) ** (samples - k) * flat_probability(k / samples, G)
        for k in range(samples + 1)
    )


@pytest.mark.parametrize("num_groups", [2, 3, 4])
def test_peer_prediction_bias_is_the_pools_and_shrinks_with_it(num_groups):
    """Every prompt at one p (so pooling loses nothing), G = 2: enumerating every outcome of the step, the observed
    fraction averages to flat(p); the own-group prediction to the plug-in mean over G draws; the peer prediction to
    the plug-in mean over the (num_groups - 1) * G draws of its pool, which approaches flat(p) as the pool grows."""
    p, G = 0.3, 2
    totals = dict.fromkeys(("observed", "predicted_self", "predicted_peers"), 0.0)
    for o in itertools.product([0.0, 1.0], repeat=num_groups * G):
        weight = math.prod(p if v else 1 - p for v in o)
        (row,) = zero_std_prediction(
            rollouts({(1, 0, g): (3, list(o[g * G : (g + 1) * G])) for g in range(num_groups)})
        )
        for key in totals:
            totals[key] += weight * row[f"zero_std_exact/{key}"]
    assert totals["observed"] == pytest.approx(flat_probability(p, G))
    assert totals["predicted_self"] == pytest.approx(plug_in_mean(p, G, G))
    assert totals["predicted_peers"] == pytest.approx(plug_in_mean(p, (num_groups - 1) * G, G))
    if num_groups > 2:
        assert flat_probability(p, G) < totals["predicted_peers"] < totals["predicted_self"]


def test_run_series_and_prediction_figure(tmp_path):
    run_dir = write_run(tmp_path / "G4", metric_rows(), rollouts())
    run = load_run(run_dir)
    assert run.series("zero_std_exact/observed") == ([1, 2], [0.5, 0.5])
    assert run.values("groups/all_correct") == [0.25, 0.0]  # the group rows still carry the old series
    paths = plots.plot_runs([run], tmp_path / "plots", ["step"])
    assert (tmp_path / "plots" / "zero_std_prediction_by_step.png") in paths
    no_rollouts = load_run(write_run(tmp_path / "bare", metric_rows()))
    assert plots.prediction_figure([no_rollouts], "step", tmp_path / "none.png") is None
