"""GRPOTrainer plus one hook: every scored generation batch goes to the `RewardBatchCallback`s.

Everything else (sampling, advantages, loss, logging) is TRL's. Algorithm variants subclass this trainer.
"""

from __future__ import annotations

from accelerate.utils import gather_object
from trl import GRPOTrainer

from rewards.text import completion_text
from rlvr.reward_batch import RewardBatch, RewardBatchCallback

ROW_KEYS = ("question", "answer", "difficulty", "task")  # the dataset columns rollouts keep


class RewardHooksMixin:
    """Dispatches gathered rewards to reward callbacks and logs what they return through TRL's metrics."""

    # Cumulative counters: a log window keeps their last value instead of averaging them.
    last_value_metrics = ("generation_step", "generated_samples", "generated_tokens")

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self.dispatch_reward_batch(inputs, completions, completion_ids_list, rewards_per_func)
        return rewards_per_func

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
        )
        for callback in callbacks:
            metrics = callback.on_rewards(self.args, self.state, self.control, batch=batch)
            for name, value in (metrics or {}).items():
                self._metrics[mode][name].append(value)

    def log(self, logs, start_time=None):
        for metrics in self._metrics.values():
            for name in self.last_value_metrics:
                if metrics.get(name):
                    metrics[name] = metrics[name][-1:]
        super().log(logs, start_time)


class RLVRGRPOTrainer(RewardHooksMixin, GRPOTrainer):
    """TRL's GRPOTrainer with the reward-batch hook."""
