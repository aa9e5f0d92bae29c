"""Tabular softmax policy maths, batched over any leading axes (runs, seeds, prompts, repeats).

Every function works on whole arrays of groups at once: there is no Python loop over samples.
"""

import numpy as np


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def pass_at_k(p: np.ndarray, k: int) -> np.ndarray:
    """Chance that at least one of k independent samples is correct."""
    return 1.0 - (1.0 - p) ** k


def sample_answers(probs: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling of G answers per group: probs (..., M), uniforms (..., G) -> (..., G).

    Answer j is drawn when cdf[j-1] <= u < cdf[j], so the answer is the number of CDF steps at
    or below u: a batched searchsorted. Shapes broadcast, so one policy row can serve many
    repeats and uniforms can be shared across runs (common random numbers).
    """
    inner_cdf = np.cumsum(probs[..., :-1], axis=-1)  # the last step (1.0) is never below u
    return (uniforms[..., None] >= inner_cdf[..., None, :]).sum(-1)


def policy_gradient(probs: np.ndarray, answers: np.ndarray, advantages: np.ndarray) -> np.ndarray:
    """Group estimate of the policy gradient wrt the logits: mean_i A_i * (onehot(a_i) - pi).

    probs (..., M) broadcastable to the groups, answers and advantages (..., G) -> (..., M).
    The sum of A_i * onehot(a_i) over all groups is one bincount on group-offset indices.
    """
    n_answers, group_size = probs.shape[-1], answers.shape[-1]
    batch = answers.shape[:-1]
    group_offsets = np.arange(int(np.prod(batch))).reshape(batch + (1,)) * n_answers
    advantages = np.broadcast_to(advantages, answers.shape)
    grad = np.bincount(
        (group_offsets + answers).ravel(), weights=advantages.ravel(), minlength=group_offsets.size * n_answers
    ).reshape(batch + (n_answers,))
    grad -= advantages.sum(-1, keepdims=True) * probs
    grad /= group_size
    return grad
