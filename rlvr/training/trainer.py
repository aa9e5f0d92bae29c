"""TRL's GRPOTrainer plus what every algorithm of the registry shares: the reward-batch hook (every scored generation
batch goes to the `RewardBatchCallback`s), time accounting, verbatim completions, and the algorithm dispatch.

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
from rlvr.metrics.keys import COUNTERS
from rlvr.metrics.reward_batch import RewardBatch, RewardBatchCallback
from rlvr.training.budget import SampleScheduleMixin
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
        self._reward_batch = self.reward_batch(inputs, completions, completion_ids_list, rewards_per_func)
        self.dispatch_reward_batch(self._reward_batch)
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

    def reward_batch(self, inputs, completions, completion_ids_list, rewards_per_func) -> RewardBatch:
        """The scored generation batch, gathered over processes, built once: its reward components are computed once
        (cached on it) and every reader (advantage dispatch, DAPO's filter, PPO, the reward callbacks) takes them
        from `self._reward_batch`."""
        mode = "train" if self.model.training else "eval"
        return RewardBatch(
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

    def dispatch_reward_batch(self, batch: RewardBatch):
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, RewardBatchCallback):
                metrics = callback.on_rewards(self.args, self.state, self.control, batch=batch)
                for name, value in (metrics or {}).items():
                    self._metrics[batch.mode][name].append(value)

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
    """The registry's advantage estimator and loss form for `args.algorithm` (see rlvr/training/algorithms.py).

    Advantages come from the batch's components (`self._reward_batch`, computed once). Where TRL computes them (GRPO,
    Dr. GRPO, DAPO, GSPO, ...), the rows of flat groups are set to exactly 0 after it: TRL's float arithmetic leaves a
    residue there (-1.2e-3 on a group of eight 1.1667 totals under GRPO), and its `isclose(std, 0)` does not see them."""

    def _generate_and_score_completions(self, inputs):
        from rlvr.training.algorithms import compute_advantages, zero_flat_groups

        output = super()._generate_and_score_completions(inputs)
        num_generations = self.num_generations if self.model.training else self.num_generations_eval
        components = self._reward_batch.components()
        start = self.accelerator.process_index * len(inputs)  # gathered over processes: keep this process's rows
        rows = slice(start, start + len(inputs))
        advantages = compute_advantages(self.args.algorithm, components, num_generations)
        if advantages is not None:
            output["advantages"] = advantages[rows].to(output["advantages"].device)
        else:  # TRL's own (GRPO, Dr. GRPO, DAPO, ...): its float arithmetic leaves residues on flat groups
            output["advantages"] = zero_flat_groups(self.args.algorithm, output["advantages"], components,
                                                    num_generations, rows)
        return output

    def _compute_loss(self, model, inputs):
        from rlvr.training.algorithms import ALGORITHMS

        if not ALGORITHMS[self.args.algorithm].ratio:
            # With old log-probs = current log-probs (detached), TRL's clipped surrogate reduces to exactly
            # -A * grad log pi, whatever the clip range.
            inputs = {key: value for key, value in inputs.items() if key != "old_per_token_logps"}
        return super()._compute_loss(model, inputs)


class RLVRTrainer(RewardHooksMixin, AlgorithmMixin, KLEstimatorMixin, RawCompletionsMixin, SharedPrefixMixin,
                  SampleScheduleMixin, GRPOTrainer):
    """TRL's GRPOTrainer with the reward-batch hook, time accounting, verbatim completions, the algorithm dispatch, a
    choice of KL estimator, the speed-ups `speedups` enables (rlvr/training/speed.py) and a learning-rate schedule
    over generated samples under `max_generated_samples` (rlvr/training/budget.py). The algorithm's loss form comes
    first (without a ratio, the KL term sees none either); the speed-ups sit right above TRL's passes."""
