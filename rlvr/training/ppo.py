"""PPO with a learned value model, on the same generation, rewards, callbacks and metrics as the GRPO family.

TRL 1.16 no longer ships a PPOTrainer, so PPO extends this repo's GRPOTrainer subclass: TRL still samples, scores,
computes old and reference log-probs and the clipped surrogate (it accepts per-token advantages); this module adds a
value model (the policy with a scalar head, its own optimizer and LoRA adapter), token rewards (the sequence reward
on the last token, minus beta * KL on every token: a reward penalty here, not GRPO's loss term), GAE, and the clipped
value loss added as vf_coef * L_V (docs/algorithms.md).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from peft import get_peft_model
from safetensors.torch import load_model, save_model
from transformers import AutoModelForTokenClassification
from trl.trainer.utils import disable_dropout_in_model

from rlvr.metrics.keys import TOTAL
from rlvr.training.config import SingleRolloutConfig
from rlvr.training.trainer import RLVRTrainer, without_kl_term

VALUE_STATE = "value_state.safetensors"


@dataclass
class PPOConfig(SingleRolloutConfig):
    """GRPOConfig plus the critic's knobs."""

    vf_coef: float = field(default=0.5, metadata={"help": "Weight of the value loss in the total loss."})
    cliprange_value: float = field(default=0.4, metadata={"help": "Value clip: new values stay within +-this of old."})
    gamma: float = field(default=1.0, metadata={"help": "Discount over tokens."})
    lam: float = field(default=0.98, metadata={"help": "GAE lambda: bias/variance trade-off of the advantage."})
    whiten_advantages: bool = field(default=True, metadata={"help": "Normalise advantages over the batch's tokens."})
    value_model_name_or_path: str | None = field(default=None, metadata={"help": "Critic init; default: the policy."})
    value_learning_rate: float | None = field(default=None, metadata={"help": "Critic lr; default: learning_rate."})
    disable_dropout: bool = field(
        default=True,
        metadata={
            "help": "No dropout in the policy, reference or critic (TRL's PPO default). transformers' token "
            "classifier puts dropout 0.1 before the critic's head: left on, the old values that GAE's returns "
            "come from would be noisy samples, not V."
        },
    )


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def masked_mean_per_row(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (values * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    mean = masked_mean(values, mask)
    variance = masked_mean((values - mean) ** 2, mask)
    return (values - mean) * torch.rsqrt(variance + eps) * mask


def sequence_reward_on_last_token(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B,) sequence rewards placed on each completion's last real token of a (B, T) right-padded mask."""
    token_rewards = torch.zeros_like(mask, dtype=rewards.dtype)
    last = (mask.sum(dim=1).long() - 1).clamp(min=0)
    token_rewards[torch.arange(mask.shape[0]), last] = rewards
    return token_rewards


def generalized_advantages(rewards, values, mask, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE over tokens: A_t = delta_t + gamma * lam * A_{t+1}, delta_t = r_t + gamma * V_{t+1} - V_t; V after the
    last real token is 0. Returns (advantages, returns = advantages + values), zero on padding."""
    advantages = torch.zeros_like(values)
    running = torch.zeros_like(values[:, 0])
    for t in reversed(range(values.shape[1])):
        next_mask = mask[:, t + 1] if t + 1 < values.shape[1] else torch.zeros_like(mask[:, 0])
        next_value = values[:, t + 1] * next_mask if t + 1 < values.shape[1] else torch.zeros_like(running)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = delta + gamma * lam * next_mask * running
        advantages[:, t] = running
    advantages = advantages * mask
    return advantages, (advantages + values) * mask


class PPOTrainer(RLVRTrainer):
    """RLVRTrainer + value model, GAE advantages, KL-in-reward and the clipped value loss."""

    def __init__(self, *args, peft_config=None, **kwargs):
        super().__init__(*args, peft_config=peft_config, **kwargs)
        if self.is_deepspeed_enabled:
            raise ValueError("PPO's value model is prepared with plain accelerate (DDP); DeepSpeed is not supported")
        self.value_model, self.value_optimizer = self.accelerator.prepare(*self._build_value_model(peft_config))

    def _build_value_model(self, peft_config):
        policy = self.accelerator.unwrap_model(self.model)
        source = (
            self.args.value_model_name_or_path or getattr(policy, "name_or_path", None) or policy.config._name_or_path
        )
        dtype = (self.args.model_init_kwargs or {}).get("dtype")
        value_model = AutoModelForTokenClassification.from_pretrained(source, num_labels=1, dtype=dtype)
        value_model.config.pad_token_id = self._tokenizer.pad_token_id
        if self.args.disable_dropout:
            disable_dropout_in_model(value_model)
        if peft_config is not None:
            value_lora = copy.deepcopy(peft_config)
            value_lora.task_type = "TOKEN_CLS"
            value_lora.modules_to_save = ["score"]
            value_model = get_peft_model(value_model, value_lora)
        if self.args.gradient_checkpointing:
            value_model.gradient_checkpointing_enable(self.args.gradient_checkpointing_kwargs)
        value_model.train()
        trainable = [p for p in value_model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=self.args.value_learning_rate or self.args.learning_rate)
        return value_model, optimizer

    @staticmethod
    def _sequences(inputs) -> tuple[torch.Tensor, torch.Tensor]:
        """(input_ids, attention_mask) of the prompts followed by their completions."""
        return (
            torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1),
            torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1),
        )

    def _token_values(self, inputs) -> torch.Tensor:
        """V for each completion token: the critic's output at the position just before that token."""
        input_ids, attention_mask = self._sequences(inputs)
        scores = self.value_model(input_ids=input_ids, attention_mask=attention_mask).logits.squeeze(-1).float()
        start = inputs["prompt_ids"].shape[1] - 1
        return scores[:, start : start + inputs["completion_ids"].shape[1]]

    def _log_mean(self, key: str, value: torch.Tensor, mode: str) -> None:
        self._metrics[mode][key].append(self.accelerator.gather(value.detach()).mean().item())

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if not self.model.training and not self.args.eval_log_probs:
            return output  # an evaluation that samples and scores only computes no loss: no values, no advantages
        mode = "train" if self.model.training else "eval"
        mask = output["completion_mask"].float()
        with torch.no_grad():
            if output.get("old_per_token_logps") is None:  # PPO always needs the sampling-time log-probs
                ids, attention = self._sequences(output)
                output["old_per_token_logps"] = self._get_per_token_logps_and_entropies(
                    self.model, ids, attention, output["completion_ids"].shape[1]
                )[0]
            values = self._token_values(output) * mask
        total = self._reward_batch.components()[TOTAL]
        start = self.accelerator.process_index * len(inputs)
        rewards = torch.nan_to_num(total[start : start + len(inputs)], nan=0.0).to(mask.device)
        token_rewards = sequence_reward_on_last_token(rewards, mask)
        if self.beta != 0.0 and "ref_per_token_logps" in output:
            kl = (output["old_per_token_logps"] - output["ref_per_token_logps"]) * mask
            token_rewards = token_rewards - self.beta * kl
            self._log_mean("ppo/kl_penalty", masked_mean(kl, mask), mode)
        advantages, returns = generalized_advantages(token_rewards, values, mask, self.args.gamma, self.args.lam)
        self._log_advantage_by_position(advantages, mask, mode)
        if self.args.whiten_advantages:
            advantages = masked_whiten(advantages, mask)
        if self.log_completions:  # the completions table: each completion's trained advantage, mean over its tokens
            self.log_trained_advantages(self.accelerator.gather(masked_mean_per_row(advantages, mask)).cpu())
        output.update(advantages=advantages, old_values=values, returns=returns)
        return output

    def _log_advantage_by_position(self, advantages: torch.Tensor, mask: torch.Tensor, mode: str) -> None:
        """Mean raw advantage over each completion's first and last quarter of tokens: per-token credit, seen."""
        length = mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        position = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0) / length
        early, late = mask * (position < 0.25), mask * (position >= 0.75)
        self._log_mean("ppo/advantage_early", masked_mean(advantages, early), mode)
        self._log_mean("ppo/advantage_late", masked_mean(advantages, late), mode)

    def _compute_loss(self, model, inputs):
        with without_kl_term(self):  # KL is already in the reward: no GRPO-style KL term in the loss
            policy_loss = super()._compute_loss(model, inputs)
        mask = inputs["completion_mask"].float()
        values = self._token_values(inputs)
        old_values, returns = inputs["old_values"], inputs["returns"]
        clipped = old_values + (values - old_values).clamp(-self.args.cliprange_value, self.args.cliprange_value)
        unclipped_loss, clipped_loss = (values - returns) ** 2, (clipped - returns) ** 2
        value_loss = 0.5 * masked_mean(torch.max(unclipped_loss, clipped_loss), mask)
        self._log_value_metrics(value_loss, values, returns, mask, clipped_loss > unclipped_loss)
        accumulation = self.current_gradient_accumulation_steps if self.model.training else 1.0
        return policy_loss + self.args.vf_coef * value_loss / accumulation

    def _log_value_metrics(self, value_loss, values, returns, mask, value_clipped) -> None:
        mode = "train" if self.model.training else "eval"
        residual_variance = masked_mean((returns - values - masked_mean(returns - values, mask)) ** 2, mask)
        return_variance = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
        self._log_mean("ppo/value_loss", value_loss, mode)
        self._log_mean("ppo/value_clipfrac", masked_mean(value_clipped.float(), mask), mode)
        self._log_mean("ppo/explained_variance", 1 - residual_variance / return_variance.clamp(min=1e-8), mode)

    def training_step(self, model, inputs, num_items_in_batch):
        loss = super().training_step(model, inputs, num_items_in_batch)  # backward reached the critic too
        if self._step % self.current_gradient_accumulation_steps == 0:
            if self.args.max_grad_norm:
                self.accelerator.clip_grad_norm_(self.value_model.parameters(), self.args.max_grad_norm)
            self.value_optimizer.step()
            self.value_optimizer.zero_grad(set_to_none=True)
        return loss

    def save_model(self, output_dir=None, _internal_call=False):
        """The critic is saved beside the policy (and in every checkpoint, which calls this) as `value_model/`."""
        super().save_model(output_dir, _internal_call)
        if self.args.should_save:
            target = f"{output_dir or self.args.output_dir}/value_model"
            critic = self.accelerator.unwrap_model(self.value_model)
            critic.save_pretrained(target)
            save_model(critic, f"{target}/{VALUE_STATE}")  # full state (LoRA included) for resuming

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:  # resuming: the critic continues too (its AdamW moments restart)
            load_model(self.accelerator.unwrap_model(self.value_model), f"{checkpoint}/value_model/{VALUE_STATE}")
