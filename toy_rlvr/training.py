"""Train the tabular policy, many runs x seeds at once (leading axes), one Python loop over steps.

Runs share each seed's prompt draws and uniforms (common random numbers), so differences
between runs come from the estimators, not from luck.
"""

from dataclasses import dataclass

import numpy as np

from .estimators import LABELS, advantages
from .policy import policy_gradient, sample_answers, softmax
from .task import CORRECT_ANSWER, Task, correct_prob


@dataclass(frozen=True)
class Run:
    """One training configuration: estimator, learning rate, constant reward bonus."""

    estimator: str
    lr: float
    bonus: float = 0.0

    @property
    def label(self) -> str:
        bonus = f", bonus {self.bonus:g}" if self.bonus else ""
        return f"{LABELS[self.estimator]}, lr {self.lr:g}{bonus}"


@dataclass(frozen=True)
class TrainResult:
    """Per run and seed: final pass@1 (overall, by level) and zero-signal group fraction."""

    runs: tuple[Run, ...]
    final_pass1: np.ndarray  # (runs, seeds)
    final_pass1_by_level: np.ndarray  # (runs, seeds, levels)
    zero_signal_frac: np.ndarray  # (runs, seeds), averaged over steps


def train(
    task: Task,
    runs: tuple[Run, ...],
    group_size: int = 8,
    prompts_per_step: int = 16,
    steps: int = 300,
    n_seeds: int = 5,
    value_lr: float = 0.5,
    seed: int = 0,
) -> TrainResult:
    """Each step: draw prompts (no repeats), sample G answers each, add lr x gradient to their rows.

    The n_seeds replicates are independent streams of one seeded generator; the value baseline
    V starts at 0 and moves toward each group's mean reward with value_lr (only "value" runs use it).
    """
    rng = np.random.default_rng(seed)
    n_runs = len(runs)
    lr = np.array([r.lr for r in runs])[:, None, None, None]
    bonus = np.array([r.bonus for r in runs])[:, None, None, None]
    runs_by_estimator = {
        e: np.array([i for i, r in enumerate(runs) if r.estimator == e])
        for e in dict.fromkeys(r.estimator for r in runs)
    }

    prompt_draws = rng.random((steps, n_seeds, task.n_prompts)).argsort(-1)[..., :prompts_per_step]
    uniform_draws = rng.random((steps, n_seeds, prompts_per_step, group_size))
    seed_index = np.arange(n_seeds)[:, None]

    logits = np.broadcast_to(task.logits, (n_runs, n_seeds) + task.logits.shape).copy()
    values = np.zeros((n_runs, n_seeds, task.n_prompts))
    zero_signal_groups = np.zeros((n_runs, n_seeds))
    advantage = np.empty((n_runs, n_seeds, prompts_per_step, group_size))

    for prompts, uniforms in zip(prompt_draws, uniform_draws):
        probs = softmax(logits[:, seed_index, prompts])
        answers = sample_answers(probs, uniforms)
        rewards = (answers == CORRECT_ANSWER) + bonus
        baseline = values[:, seed_index, prompts]
        for estimator, idx in runs_by_estimator.items():
            advantage[idx] = advantages(estimator, rewards[idx], baseline[idx])
        logits[:, seed_index, prompts] += lr * policy_gradient(probs, answers, advantage)
        values[:, seed_index, prompts] += value_lr * (rewards.mean(-1) - baseline)
        zero_signal_groups += (rewards.min(-1) == rewards.max(-1)).sum(-1)

    final = correct_prob(logits)
    return TrainResult(
        runs=tuple(runs),
        final_pass1=final.mean(-1),
        final_pass1_by_level=task.mean_by_level(final),
        zero_signal_frac=zero_signal_groups / (steps * prompts_per_step),
    )
