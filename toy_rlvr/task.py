"""The toy task: prompts at four difficulty levels, 16 candidate answers each, answer 0 correct.

The policy is tabular softmax (one logit row per prompt), so nothing here is learned by a
network: everything that happens in training is down to how the advantage is estimated.
"""

from dataclasses import dataclass

import numpy as np

from .policy import softmax

CORRECT_ANSWER = 0

# (name, lowest initial pass@1, highest initial pass@1). Each prompt's pass@1 is drawn
# uniformly in log-odds inside its range; "very hard" is chosen so that pass@1 is about 0.01
# while pass@64 is about one half: the right answer is there, just rarely sampled.
LEVELS = (
    ("very hard", 0.005, 0.02),
    ("hard", 0.03, 0.12),
    ("medium", 0.3, 0.6),
    ("easy", 0.8, 0.95),
)


@dataclass(frozen=True)
class Task:
    """Initial policy logits (prompts, answers) and each prompt's level index."""

    logits: np.ndarray
    level: np.ndarray
    level_names: tuple[str, ...]

    @property
    def n_prompts(self) -> int:
        return self.logits.shape[0]

    @property
    def n_answers(self) -> int:
        return self.logits.shape[1]

    def mean_by_level(self, per_prompt: np.ndarray) -> np.ndarray:
        """Average a (..., prompts) array within each level -> (..., levels)."""
        return np.stack(
            [per_prompt[..., self.level == i].mean(-1) for i in range(len(self.level_names))],
            axis=-1,
        )

    def typical_prompt(self, level: int) -> int:
        """The prompt of a level whose initial pass@1 is closest to the level's median."""
        members = np.flatnonzero(self.level == level)
        p = correct_prob(self.logits[members])
        return int(members[np.argmin(np.abs(p - np.median(p)))])


def correct_prob(logits: np.ndarray) -> np.ndarray:
    """pass@1 of each prompt: the policy's probability of the correct answer."""
    return softmax(logits)[..., CORRECT_ANSWER]


def make_task(
    n_prompts: int = 200,
    n_answers: int = 16,
    levels: tuple = LEVELS,
    wrong_logit_scale: float = 0.5,
    seed: int = 0,
) -> Task:
    """Build the initial policy: random wrong-answer logits, correct logit set to hit pass@1."""
    rng = np.random.default_rng(seed)
    level = np.repeat(np.arange(len(levels)), n_prompts // len(levels))
    bounds = np.array([lv[1:] for lv in levels])
    bound_log_odds = np.log(bounds / (1 - bounds))
    target_log_odds = rng.uniform(bound_log_odds[level, 0], bound_log_odds[level, 1])

    logits = rng.normal(0.0, wrong_logit_scale, size=(level.size, n_answers))
    wrong_mass = np.exp(np.delete(logits, CORRECT_ANSWER, axis=1)).sum(1)
    # p = e^c / (e^c + wrong_mass)  <=>  c = log-odds(p) + log(wrong_mass)
    logits[:, CORRECT_ANSWER] = target_log_odds + np.log(wrong_mass)
    return Task(logits=logits, level=level, level_names=tuple(lv[0] for lv in levels))
