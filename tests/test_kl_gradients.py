"""The expected gradient of each KL estimator, computed exactly on a categorical policy, against the divergence it is
said to follow (docs/algorithms.md, "KL estimators"): ours (`rlvr.training.trainer.per_token_kl`, with and without TRL's
importance ratio) and rlhf-book's `policy_gradients/loss.py` kl1 = -d and kl3 = expm1(d) - d, d = log pi - log ref."""

import pytest
import torch

from rlvr.training.trainer import per_token_kl


def expected_gradient(term, theta: torch.Tensor, ref_logits: torch.Tensor, ratio: bool) -> torch.Tensor:
    """E_{x ~ pi}[grad of the per-token loss term at x], summed exactly over the vocabulary (pi's weights detached,
    as a sampled batch's are); `ratio`: the term is multiplied by pi / pi_old with value 1 (TRL's
    use_bias_correction_kl)."""
    theta = theta.clone().requires_grad_(True)
    logp, ref = torch.log_softmax(theta, -1), torch.log_softmax(ref_logits, -1)
    per_token = term(logp, ref) * (torch.exp(logp - logp.detach()) if ratio else 1.0)
    (torch.exp(logp).detach() * per_token).sum().backward()
    return theta.grad


def divergence_gradient(divergence, theta: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    theta = theta.clone().requires_grad_(True)
    divergence(torch.softmax(theta, -1), torch.softmax(ref_logits, -1)).backward()
    return theta.grad


REVERSE_KL = lambda pi, ref: (pi * (pi.log() - ref.log())).sum()  # KL(pi || ref)
FORWARD_KL = lambda pi, ref: (ref * (ref.log() - pi.log())).sum()  # KL(ref || pi)
HALF_CHI2 = lambda pi, ref: 0.5 * ((pi**2 / ref).sum() - 1)  # chi^2(pi || ref) / 2
ZERO = lambda pi, ref: 0.0 * pi.sum()
OURS = {name: (lambda logp, ref, name=name: per_token_kl(logp, ref, name)) for name in ("k1", "k2", "k3")}
RLHF_BOOK = {"kl1": lambda logp, ref: -(logp - ref), "kl3": lambda logp, ref: torch.expm1(logp - ref) - (logp - ref)}


@pytest.mark.parametrize(
    "term, ratio, divergence",
    [
        (OURS["k1"], True, REVERSE_KL),
        (OURS["k3"], True, REVERSE_KL),  # TRL's default: both follow KL(pi || ref)
        (OURS["k1"], False, ZERO),
        (OURS["k2"], False, REVERSE_KL),
        (OURS["k3"], False, FORWARD_KL),
        (RLHF_BOOK["kl1"], False, ZERO),  # rlhf-book puts no ratio on its KL term
        (RLHF_BOOK["kl3"], False, HALF_CHI2),
    ],
)
def test_each_estimators_expected_gradient_is_the_stated_divergences(term, ratio, divergence):
    torch.manual_seed(0)
    theta, ref_logits = torch.randn(7), torch.randn(7)
    got = expected_gradient(term, theta, ref_logits, ratio)
    assert got.tolist() == pytest.approx(divergence_gradient(divergence, theta, ref_logits).tolist(), abs=1e-5)
    if divergence is not ZERO:
        assert got.abs().max() > 1e-2  # a real pull, not a vanishing one


def test_rlhf_books_kl3_is_a_different_penalty_from_ours():
    torch.manual_seed(1)
    theta, ref_logits = torch.randn(7), torch.randn(7)
    ours = expected_gradient(OURS["k3"], theta, ref_logits, ratio=True)
    book = expected_gradient(RLHF_BOOK["kl3"], theta, ref_logits, ratio=False)
    assert (ours - book).abs().max() > 1e-2
