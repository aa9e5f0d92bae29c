"""Which estimator of KL(policy || reference) the loss's KL term uses: `kl_estimator: k1 | k2 | k3`.

TRL 1.16's GRPOTrainer has only k3. Schulman's estimators ("Approximating KL Divergence", 2020), per completion
token, with d = logp - ref (the policy's minus the reference's log-prob of the sampled token):

    k1 = d                      unbiased for the KL value, can be negative, high variance
    k2 = d^2 / 2                biased, low variance, >= 0
    k3 = exp(-d) + d - 1        unbiased, >= 0 (TRL's)

In the loss they are differentiated, and what matters is the expected gradient. On-policy, per token with the
context held fixed, and with TRL's `use_bias_correction_kl` (default true: the term is multiplied by the
differentiable importance ratio, whose value is 1 on-policy):

    use_bias_correction_kl: true    k1, k3 -> grad KL(pi || ref)      k2 -> grad KL(pi || ref) + E[d^2/2 grad logp]
    use_bias_correction_kl: false   k1 -> 0 (noise only)               k2 -> grad KL(pi || ref)
                                    k3 -> grad KL(ref || pi) (the forward KL)

so with TRL's default, k1 and k3 pull toward the reference alike (differing in variance), and k2 adds a bias. The
logged `kl` is the chosen estimator's masked mean, as TRL logs k3's.

How, without copying TRL's 250-line `_compute_loss`: TRL adds `beta * k3 * ratio` to every token's loss before the
loss-type aggregation, and every aggregation is linear. So the mixin lets TRL compute its loss, captures the policy's
per-token log-probs (with their graph) from `_get_per_token_logps_and_entropies` during that call, and adds
`beta * (k - k3) * ratio` aggregated as TRL aggregates that loss type. `tests/test_kl_estimator.py` checks the
aggregation and the ratio against TRL's own for every loss type (loss(beta) - loss(0) == the aggregated k3 term), so
a TRL upgrade that changes either fails there.
"""

from __future__ import annotations

import torch

KL_ESTIMATORS = ("k1", "k2", "k3")


def per_token_kl(logp: torch.Tensor, ref: torch.Tensor, estimator: str) -> torch.Tensor:
    """Schulman's k1, k2 or k3 per token; k3 is written exactly as TRL writes it, so the two agree bit for bit."""
    if estimator == "k1":
        return logp - ref
    if estimator == "k2":
        return 0.5 * (logp - ref) ** 2
    if estimator == "k3":
        return torch.exp(ref - logp) - (ref - logp) - 1
    raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {estimator!r}")


def importance_weight(trainer, logp: torch.Tensor, inputs: dict, mask: torch.Tensor) -> torch.Tensor | float:
    """The factor TRL puts on its per-token KL: the importance ratio under `use_bias_correction_kl`, else 1."""
    if not trainer.args.use_bias_correction_kl:
        return 1.0
    old = inputs.get("old_per_token_logps")
    log_ratio = logp - (logp.detach() if old is None else old)
    if trainer.importance_sampling_level == "sequence":
        log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    return torch.exp(log_ratio)


def aggregate_like_trl(trainer, per_token: torch.Tensor, mask: torch.Tensor, inputs: dict) -> torch.Tensor:
    """A per-token loss term reduced to the scalar TRL's `_compute_loss` would add for it under `trainer.loss_type`."""
    training = trainer.model.training
    accumulation = trainer.current_gradient_accumulation_steps if training else 1.0
    loss_type, masked = trainer.loss_type, per_token * mask
    if loss_type in ("grpo", "sapo"):
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / accumulation
    if loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0) / accumulation
    if loss_type == "dr_grpo":
        return masked.sum() / (per_token.size(0) * trainer.max_completion_length) / accumulation
    if loss_type in ("cispo", "dapo", "vespo"):
        normalizer = inputs["num_items_in_batch"].clamp(min=1.0) / trainer.accelerator.num_processes
        if training:
            normalizer = normalizer * accumulation / trainer.args.steps_per_generation
        return masked.sum() / normalizer
    if loss_type == "luspo":
        return masked.sum(-1).mean() / accumulation
    raise ValueError(f"kl_estimator {trainer.args.kl_estimator} does not know how loss_type {loss_type!r} aggregates")


class KLEstimatorMixin:
    """Swaps TRL's k3 KL term for the configured estimator (see the module docstring)."""

    _captured_logps: list | None = None

    @property
    def kl_estimator(self) -> str:
        return self.args.kl_estimator  # RLVRConfig's field: every config of the registry has it

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._captured_logps is not None:
            self._captured_logps.append(result[0])
        return result

    def _compute_loss(self, model, inputs):
        if self.beta == 0.0 or self.kl_estimator == "k3":
            return super()._compute_loss(model, inputs)
        self._captured_logps = []
        try:
            loss = super()._compute_loss(model, inputs)
            (logp,) = self._captured_logps  # TRL's one forward pass of the policy in this call
        finally:
            self._captured_logps = None
        ref = inputs["ref_per_token_logps"]
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        weight = importance_weight(self, logp, inputs, mask)
        chosen = per_token_kl(logp, ref, self.kl_estimator) * weight
        k3 = per_token_kl(logp, ref, "k3") * weight
        loss = loss + self.beta * aggregate_like_trl(self, chosen - k3, mask, inputs)
        totals = self.accelerator.reduce(torch.stack([(chosen.detach() * mask).sum(), mask.sum().float()]), "sum")
        self._metrics["train" if self.model.training else "eval"]["kl"][-1] = (totals[0] / totals[1].clamp(min=1.0)).item()
        return loss
