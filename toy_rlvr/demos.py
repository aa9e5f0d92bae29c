"""The four demos, each a function with its knobs that returns numbers (no printing)."""

from dataclasses import dataclass

import numpy as np

from .estimators import ESTIMATORS, advantages
from .policy import pass_at_k, policy_gradient, sample_answers, softmax
from .task import CORRECT_ANSWER, Task, correct_prob, make_task
from .training import Run, TrainResult, train

# --- Demo 1 -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PassAtKResult:
    level_names: tuple[str, ...]
    ks: tuple[int, ...]
    by_level: np.ndarray  # (levels, ks)
    overall: np.ndarray  # (ks,)


def demo_pass_at_k(task: Task | None = None, ks: tuple[int, ...] = (1, 8, 64)) -> PassAtKResult:
    """How often the initial policy finds the answer in k tries, per level: the signal budget."""
    task = task or make_task()
    per_prompt = np.stack([pass_at_k(correct_prob(task.logits), k) for k in ks], axis=-1)
    return PassAtKResult(task.level_names, tuple(ks), task.mean_by_level(per_prompt.T).T, per_prompt.mean(0))


# --- Demo 2 -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GradientStats:
    """Monte-Carlo statistics of one estimator's gradient, one entry per level's typical prompt."""

    mean: np.ndarray  # of the estimate along the correct answer's logit
    std: np.ndarray
    true: np.ndarray  # pi (1 - pi)
    total_var: np.ndarray  # summed over all logits
    repeats: int

    @property
    def ratio(self) -> np.ndarray:
        return self.mean / self.true

    @property
    def z(self) -> np.ndarray:
        """Bias in standard errors."""
        return (self.mean - self.true) / (self.std / np.sqrt(self.repeats))


@dataclass(frozen=True)
class GradientBiasResult:
    level_names: tuple[str, ...]
    prompt_pass1: np.ndarray  # (levels,) pi of each level's typical prompt
    main_level: int  # index into level_names of the prompt in the main tables
    group_size: int
    stats: dict[float, dict[str, GradientStats]]  # bonus -> estimator -> stats


def demo_gradient_bias(
    task: Task | None = None,
    group_size: int = 8,
    repeats: int = 20_000,
    bonuses: tuple[float, ...] = (0.0, 1.0),
    main_level: str = "medium",
    seed: int = 0,
) -> GradientBiasResult:
    """Repeat one sample-and-estimate step many times at the fixed initial policy.

    The same samples serve every estimator and bonus, so differences are exact, not noise.
    The "value" baseline here is the true expected reward (pi + bonus): fixed, hence unbiased.
    """
    task = task or make_task()
    rng = np.random.default_rng(seed)
    n_levels = len(task.level_names)
    prompts = [task.typical_prompt(level) for level in range(n_levels)]
    probs = softmax(task.logits[prompts])[:, None]  # (levels, 1, answers): same row every repeat
    answers = sample_answers(probs, rng.random((n_levels, repeats, group_size)))
    correct = answers == CORRECT_ANSWER
    pi = probs[:, 0, CORRECT_ANSWER]

    stats = {}
    for bonus in bonuses:
        rewards = correct + bonus
        true_value = (pi + bonus)[:, None]
        stats[bonus] = {}
        for estimator in ESTIMATORS:
            grads = policy_gradient(probs, answers, advantages(estimator, rewards, true_value))
            along_correct = grads[..., CORRECT_ANSWER]
            stats[bonus][estimator] = GradientStats(
                mean=along_correct.mean(-1),
                std=along_correct.std(-1),
                true=pi * (1 - pi),
                total_var=grads.var(1).sum(-1),
                repeats=repeats,
            )
    return GradientBiasResult(task.level_names, pi, task.level_names.index(main_level), group_size, stats)


# --- Demos 3 and 4 ------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingSummary:
    """Seed-averaged final pass@1 of each run, next to the initial policy's."""

    level_names: tuple[str, ...]
    initial_pass1: float
    initial_pass1_by_level: np.ndarray  # (levels,)
    runs: tuple[Run, ...]
    pass1: np.ndarray  # (runs,)
    pass1_by_level: np.ndarray  # (runs, levels)
    zero_signal_frac: np.ndarray  # (runs,)

    def pass1_of(self, run: Run) -> float:
        return float(self.pass1[self.runs.index(run)])


def _summarise(task: Task, result: TrainResult) -> TrainingSummary:
    initial = correct_prob(task.logits)
    return TrainingSummary(
        level_names=task.level_names,
        initial_pass1=float(initial.mean()),
        initial_pass1_by_level=task.mean_by_level(initial),
        runs=result.runs,
        pass1=result.final_pass1.mean(1),
        pass1_by_level=result.final_pass1_by_level.mean(1),
        zero_signal_frac=result.zero_signal_frac.mean(1),
    )


@dataclass(frozen=True)
class EstimatorComparison:
    lr: float
    bonus: float
    no_baseline_lr: float
    grpo_lr: float
    training: TrainingSummary


def demo_training(
    task: Task | None = None,
    lr: float = 2.0,
    bonus: float = 5.0,
    no_baseline_lr: float = 8.0,
    grpo_lr: float = 4.0,
    steps: int = 300,
    prompts_per_step: int = 16,
    group_size: int = 8,
    n_seeds: int = 5,
    seed: int = 0,
) -> EstimatorComparison:
    """Every estimator at one lr, again with a constant bonus, then no baseline vs GRPO at larger lrs."""
    task = task or make_task()
    runs = (
        tuple(Run(e, lr) for e in ESTIMATORS)
        + tuple(Run(e, lr, bonus) for e in ESTIMATORS)
        + (Run("none", no_baseline_lr), Run("grpo", grpo_lr))
    )
    result = train(
        task, runs, group_size=group_size, prompts_per_step=prompts_per_step, steps=steps, n_seeds=n_seeds, seed=seed
    )
    return EstimatorComparison(lr, bonus, no_baseline_lr, grpo_lr, _summarise(task, result))


@dataclass(frozen=True)
class GroupSizeResult:
    group_sizes: tuple[int, ...]
    prompts_per_step: tuple[int, ...]
    training: TrainingSummary  # one run per group size, same order


def demo_group_size(
    task: Task | None = None,
    samples_per_step: int = 128,
    group_sizes: tuple[int, ...] = (2, 4, 8, 16, 32),
    estimator: str = "grpo",
    lr: float = 2.0,
    steps: int = 300,
    n_seeds: int = 5,
    seed: int = 0,
) -> GroupSizeResult:
    """Fixed sample budget, split into more small groups or fewer large ones."""
    task = task or make_task()
    prompts = tuple(samples_per_step // g for g in group_sizes)
    results = [
        train(task, (Run(estimator, lr),), group_size=g, prompts_per_step=p, steps=steps, n_seeds=n_seeds, seed=seed)
        for g, p in zip(group_sizes, prompts)
    ]
    stacked = TrainResult(
        runs=tuple(r.runs[0] for r in results),
        final_pass1=np.concatenate([r.final_pass1 for r in results]),
        final_pass1_by_level=np.concatenate([r.final_pass1_by_level for r in results]),
        zero_signal_frac=np.concatenate([r.zero_signal_frac for r in results]),
    )
    return GroupSizeResult(tuple(group_sizes), prompts, _summarise(task, stacked))
