"""`kl_estimator`: Schulman's k1/k2/k3 on hand-built log-probs; our k3, aggregated and weighted by the importance
ratio as the mixin does, equals TRL's own KL term (TRL's loss with beta minus its loss without) for every loss type;
k1 and k2 move the loss by the expected amount and are what `kl` logs. Under k3 the mixin hands the loss to TRL
unchanged (`LossTermsMixin._compute_loss` returns `super()`'s), which is why there is no separate k3 test here."""

import pytest
import torch
from test_algorithms import CORRECTNESS, FORMAT, build, prompts, scripted_rewards

from rlvr.inputs import ConfigError
from rlvr.training.trainer import aggregate_like_trl, importance_weight, per_token_kl

BETA = 0.04


def test_estimators_on_hand_built_logprobs():
    logp, ref = torch.tensor([-1.0, -2.0, -0.5]), torch.tensor([-1.5, -1.0, -0.5])  # d = logp - ref = 0.5, -1, 0
    assert per_token_kl(logp, ref, "k1").tolist() == pytest.approx([0.5, -1.0, 0.0])
    assert per_token_kl(logp, ref, "k2").tolist() == pytest.approx([0.125, 0.5, 0.0])
    # k3 = exp(-d) + d - 1: e^-0.5 - 0.5 = 0.1065307, e^1 - 2 = 0.7182818, 0
    assert per_token_kl(logp, ref, "k3").tolist() == pytest.approx([0.1065307, 0.7182818, 0.0], abs=1e-6)
    with pytest.raises(ValueError, match="kl_estimator"):
        per_token_kl(logp, ref, "k4")


def kl_batch(trainer, seed=0):
    """A scored batch whose reference and old log-probs are moved off the policy's (a fresh ref copy equals it)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        scripted_rewards(monkeypatch, list(zip(CORRECTNESS, FORMAT)))
        batch = trainer._generate_and_score_completions(prompts(trainer, 2, 4))
    generator = torch.Generator().manual_seed(seed)
    shape = batch["completion_mask"].shape
    batch["ref_per_token_logps"] = batch["ref_per_token_logps"] + 0.3 * torch.randn(shape, generator=generator)
    batch["old_per_token_logps"] = batch["ref_per_token_logps"].detach() + 0.1 * torch.randn(shape, generator=generator)
    return batch


def loss_at(trainer, batch, beta=BETA, estimator=None):
    saved_beta, saved_estimator = trainer.beta, trainer.args.kl_estimator
    trainer.beta, trainer.args.kl_estimator = beta, estimator or saved_estimator
    try:
        with torch.no_grad():
            return trainer._compute_loss(trainer.model, batch).double()
    finally:
        trainer.beta, trainer.args.kl_estimator = saved_beta, saved_estimator


def policy_logps(trainer, batch):
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        return trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, attention, batch["completion_ids"].shape[1]
        )[0]


@pytest.fixture(scope="module")
def built(tiny_model_dir, tmp_path_factory):
    """One trainer and one generated batch for the module: the tests only run forward and backward passes."""
    trainer = build(tiny_model_dir, tmp_path_factory.mktemp("kl"), "grpo", "--beta", str(BETA), "--kl_estimator", "k3")
    return trainer, kl_batch(trainer)


@pytest.fixture
def trainer(built):
    """The module's trainer, with the knobs a test turns put back afterwards."""
    trainer = built[0]
    knobs = (trainer.loss_type, trainer.importance_sampling_level, trainer.args.use_bias_correction_kl)
    yield trainer
    trainer.loss_type, trainer.importance_sampling_level, trainer.args.use_bias_correction_kl = knobs
    trainer.args.kl_estimator, trainer.beta = "k3", BETA


@pytest.fixture
def batch(built):
    return dict(built[1])


@pytest.mark.parametrize("bias_correction", [True, False])
@pytest.mark.parametrize("level", ["token", "sequence"])
def test_aggregation_and_ratio_match_trls_kl_term_for_every_loss_type(trainer, batch, bias_correction, level):
    """TRL's loss with beta minus its loss without is beta times its aggregated k3 term: ours must equal that."""
    trainer.args.use_bias_correction_kl, trainer.importance_sampling_level = bias_correction, level
    logp, mask = policy_logps(trainer, batch), batch["completion_mask"]
    k3 = per_token_kl(logp, batch["ref_per_token_logps"], "k3") * importance_weight(trainer, logp, batch, mask)
    every = bias_correction and level == "token"  # TRL's defaults: every aggregation; the other ratios on two
    for loss_type in (
        ("grpo", "bnpo", "dr_grpo", "dapo", "luspo", "sapo", "cispo", "vespo") if every else ("grpo", "dapo")
    ):
        trainer.loss_type = loss_type
        expected = (BETA * aggregate_like_trl(trainer, k3, mask, batch)).item()
        assert abs(expected) > 1e-4, loss_type  # the perturbed log-probs make the term visible
        assert (loss_at(trainer, batch) - loss_at(trainer, batch, beta=0.0)).item() == pytest.approx(
            expected, rel=1e-4
        ), loss_type


@pytest.mark.parametrize("estimator", ["k1", "k2"])
@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
def test_k1_k2_move_the_loss_by_the_expected_amount_and_are_logged(trainer, batch, estimator, loss_type):
    """By hand for grpo (mean over sequences of each one's token mean) and dapo (token sum / tokens in the batch)."""
    trainer.loss_type = loss_type
    logp, mask, ref = policy_logps(trainer, batch), batch["completion_mask"], batch["ref_per_token_logps"]
    ratio = torch.exp(logp - batch["old_per_token_logps"])  # use_bias_correction_kl is TRL's default
    difference = (per_token_kl(logp, ref, estimator) - per_token_kl(logp, ref, "k3")) * ratio * mask
    if loss_type == "grpo":
        expected = (difference.sum(-1) / mask.sum(-1)).mean()
    else:
        expected = difference.sum() / batch["num_items_in_batch"]
    k3_loss = loss_at(trainer, batch, estimator="k3")
    assert (loss_at(trainer, batch, estimator=estimator) - k3_loss).item() == pytest.approx(
        BETA * expected.item(), rel=1e-4
    )
    logged = (per_token_kl(logp, ref, estimator) * ratio * mask).sum() / mask.sum()
    assert trainer._metrics["train"]["kl"][-1] == pytest.approx(logged.item(), rel=1e-5)


def gradients(trainer, loss_fn):
    trainer.model.zero_grad()
    loss_fn().backward()
    return [p.grad.clone() for p in trainer.model.parameters() if p.grad is not None]


def test_k2_gradient_equals_the_hand_written_loss(trainer, batch):
    """Gradient, not just value: TRL's policy loss + beta * (grpo-aggregated k2 * ratio), written out by hand."""
    mask, ref = batch["completion_mask"], batch["ref_per_token_logps"]
    trainer.args.kl_estimator = "k2"
    ours = gradients(trainer, lambda: trainer._compute_loss(trainer.model, batch))

    def by_hand():
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logp = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, mask.shape[1])[0]
        k2 = 0.5 * (logp - ref) ** 2 * torch.exp(logp - batch["old_per_token_logps"]) * mask
        trainer.beta = 0.0
        try:
            policy = trainer._compute_loss(trainer.model, batch)
        finally:
            trainer.beta = BETA
        return policy + BETA * (k2.sum(-1) / mask.sum(-1)).mean()

    hand = gradients(trainer, by_hand)
    assert len(ours) == len(hand) > 0
    assert all(torch.allclose(a, b, rtol=1e-4, atol=1e-7) for a, b in zip(ours, hand))
    trainer.args.kl_estimator = "k3"  # and k3's gradient differs: the option reaches the update
    assert any(
        not torch.allclose(a, b, rtol=1e-4, atol=1e-7)
        for a, b in zip(ours, gradients(trainer, lambda: trainer._compute_loss(trainer.model, batch)))
    )


def test_rloo_without_ratio_gets_the_estimator_too(tiny_model_dir, tmp_path, batch):
    trainer = build(tiny_model_dir, tmp_path, "rloo", "--beta", str(BETA), "--kl_estimator", "k1")
    """RLOO drops the old log-probs (no ratio), so the KL term's ratio is 1: the shift is beta * (k1 - k3), grpo-averaged."""
    logp, mask, ref = policy_logps(trainer, batch), batch["completion_mask"], batch["ref_per_token_logps"]
    shift = ((per_token_kl(logp, ref, "k1") - per_token_kl(logp, ref, "k3")) * mask).sum(-1) / mask.sum(-1)
    k1, k3 = loss_at(trainer, batch, estimator="k1"), loss_at(trainer, batch, estimator="k3")
    assert (k1 - k3).item() == pytest.approx(BETA * shift.mean().item(), rel=1e-4)


def test_unknown_estimator_is_a_one_line_config_error(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError) as err:
        build(tiny_model_dir, tmp_path, "grpo", "--kl_estimator", "k4")
    assert err.value.field == "kl_estimator"
