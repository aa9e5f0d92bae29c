"""TRL's GRPOTrainer plus what every algorithm of the registry shares: the reward-batch hook (every scored generation
batch goes to the `RewardBatchCallback`s), time accounting, verbatim completions, the algorithm dispatch, and a
curriculum's sampler when the recipe has one (rlvr/training/curriculum.py).

The dispatch reads `args.algorithm`: an algorithm with its own advantage estimator (RLOO, REINFORCE, MaxRL) gets its
advantages from `compute_advantages`, one without an importance ratio gets the plain -A * log pi loss. Everything
else (sampling, TRL's advantages, loss, logging) is TRL's. DAPO and PPO subclass this trainer.
"""

from __future__ import annotations

import time
from collections import defaultdict

from accelerate.utils import gather_object
from trl import GRPOTrainer

from rlvr.rewards.text import completion_text
from rlvr.metrics.components import reward_components
from rlvr.metrics.keys import COUNTERS
from rlvr.metrics.reward_batch import RewardBatch, RewardBatchCallback
from rlvr.training.budget import SampleScheduleMixin
from rlvr.training.curriculum import CurriculumSamplerMixin
from rlvr.training.kl import KLEstimatorMixin
from rlvr.training.speed import SharedPrefixMixin

ROW_KEYS = ("question", "answer", "difficulty", "task")  # the dataset columns rollouts keep


class RewardHooksMixin:
    """Dispatches gathered rewards to reward callbacks, logs what they return, and accounts for wall time.

    Time accounting (seconds per log window, logged as `time/*`): `generation` is sampling completions,
    `scoring` the reward functions, `logprobs` the extra forward passes for old/reference log-probs, and
    `optimization` the forward/backward/step on the buffered batch. `time/generation_share` is generation's share.
    """

    def _timed(self, account: str, fn, *args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            if not hasattr(self, "_time_accounts"):
                self._time_accounts = defaultdict(float)
            self._time_accounts[account] += time.perf_counter() - start

    def _generate(self, prompts):
        return self._timed("generation", super()._generate, prompts)

    def _generate_and_score_completions(self, inputs):
        return self._timed("rollout", super()._generate_and_score_completions, inputs)

    def training_step(self, model, inputs, num_items_in_batch):
        return self._timed("step", super().training_step, model, inputs, num_items_in_batch)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = self._timed(
            "scoring", super()._calculate_rewards, inputs, prompts, completions, completion_ids_list
        )
        self._scored_rewards = rewards_per_func  # gathered (N, K): what advantage overrides and DAPO's filter read
        self.dispatch_reward_batch(inputs, completions, completion_ids_list, rewards_per_func)
        return rewards_per_func

    def time_accounting(self) -> dict[str, float]:
        """Seconds spent per phase since the last log, then reset. Rollouts happen inside training steps."""
        spent = getattr(self, "_time_accounts", None) or {}
        self._time_accounts = defaultdict(float)
        generation, scoring, rollout = spent.get("generation", 0.0), spent.get("scoring", 0.0), spent.get("rollout", 0.0)
        total = spent.get("step", 0.0) or rollout
        if total == 0.0:
            return {}
        return {
            "time/generation_s": generation,
            "time/scoring_s": scoring,
            "time/logprobs_s": max(rollout - generation - scoring, 0.0),
            "time/optimization_s": max(total - rollout, 0.0),
            "time/total_s": total,
            "time/generation_share": generation / total,
        }

    def dispatch_reward_batch(self, inputs, completions, completion_ids_list, rewards_per_func):
        callbacks = [cb for cb in self.callback_handler.callbacks if isinstance(cb, RewardBatchCallback)]
        if not callbacks:
            return
        mode = "train" if self.model.training else "eval"
        batch = RewardBatch(
            rewards_per_func=rewards_per_func,
            names=list(self.reward_func_names),
            weights=self.reward_weights,
            num_generations=self.num_generations if mode == "train" else self.num_generations_eval,
            completions=gather_object([completion_text(c) for c in completions]),
            rows=gather_object([{k: row.get(k) for k in ROW_KEYS} for row in inputs]),
            completion_lengths=gather_object([len(ids) for ids in completion_ids_list]),
            mode=mode,
            round=getattr(self, "_sampling_round", 0),
        )
        for callback in callbacks:
            metrics = callback.on_rewards(self.args, self.state, self.control, batch=batch)
            for name, value in (metrics or {}).items():
                self._metrics[mode][name].append(value)

    def log(self, logs, start_time=None):
        for metrics in self._metrics.values():
            for name in COUNTERS:  # cumulative: a log window keeps the last value, not the mean
                if metrics.get(name):
                    metrics[name] = metrics[name][-1:]
        if self.model.training:
            logs.update(self.time_accounting())
        super().log(logs, start_time)


class RawCompletionsMixin:
    """Rewards see the text the model wrote, tags included.

    With a response parser on the tokenizer (transformers 5 `response_template`, e.g. Qwen3's), TRL hands reward
    functions `{"reasoning_content", "content"}` with `<think>...</think>` cut out, and an empty think block vanishes
    without a trace, so the format reward could not tell it from a missing one. Without tool calling the parser buys
    nothing, so it is switched off and TRL decodes completions verbatim.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.tools:
            for attribute in ("response_template", "response_schema"):
                if getattr(self._tokenizer, attribute, None) is not None:
                    setattr(self._tokenizer, attribute, None)


class AlgorithmMixin:
    """The registry's advantage estimator and loss form for `args.algorithm` (see rlvr/training/algorithms.py)."""

    def _generate_and_score_completions(self, inputs):
        from rlvr.training.algorithms import compute_advantages

        output = super()._generate_and_score_completions(inputs)
        num_generations = self.num_generations if self.model.training else self.num_generations_eval
        components = reward_components(self._scored_rewards, self.reward_func_names, self.reward_weights)
        advantages = compute_advantages(self.args.algorithm, components, num_generations)
        if advantages is not None:  # gathered over processes: keep this process's rows
            start = self.accelerator.process_index * len(inputs)
            output["advantages"] = advantages[start : start + len(inputs)].to(output["advantages"].device)
        return output

    def _compute_loss(self, model, inputs):
        from rlvr.training.algorithms import ALGORITHMS

        if not ALGORITHMS[self.args.algorithm].ratio:
            # With old log-probs = current log-probs (detached), TRL's clipped surrogate reduces to exactly
            # -A * grad log pi, whatever the clip range.
            inputs = {key: value for key, value in inputs.items() if key != "old_per_token_logps"}
        return super()._compute_loss(model, inputs)


class RLVRTrainer(RewardHooksMixin, AlgorithmMixin, KLEstimatorMixin, RawCompletionsMixin, SharedPrefixMixin,
                  SampleScheduleMixin, CurriculumSamplerMixin, GRPOTrainer):
    """TRL's GRPOTrainer with the reward-batch hook, time accounting, verbatim completions, the algorithm dispatch, a
    choice of KL estimator, the speed-ups `speedups` enables (rlvr/training/speed.py) and a learning-rate schedule
    over generated samples under `max_generated_samples` (rlvr/training/budget.py). The algorithm's loss form comes
    first (without a ratio, the KL term sees none either); the speed-ups sit right above TRL's passes."""
