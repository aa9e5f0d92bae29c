"""TRL's GRPOTrainer plus what every algorithm of the registry shares, one job a mixin: the reward-batch hand-off
(every scored generation batch goes to the `RewardBatchCallback`s: `RewardDispatchMixin`), time accounting
(`TimingMixin`), the held-out evaluation (`HeldOutMixin`), the logged row as the records read it (`LoggedRowMixin`),
the algorithm dispatch (`AlgorithmMixin`), the loss terms TRL lacks (`LossTermsMixin`: the KL estimator, the
failed-group entropy, the late entropy coefficient), verbatim completions (`RawCompletionsMixin`) and the
learning-rate schedule over generated samples (`SampleScheduleMixin`). DAPO and PPO subclass this trainer.

The dispatch reads `args.algorithm`: an algorithm with its own advantage estimator (RLOO, REINFORCE, MaxRL) gets its
advantages from `compute_advantages`, one without an importance ratio gets the plain -A * log pi loss. Everything
else (sampling, TRL's advantages, loss, logging) is TRL's.

Rewards come in without an override (the reward functions are wrapped: `RewardDispatchMixin`); what replaces what in
TRL's step is `PRIVATE_OVERRIDES` (each TRL-private override with its reason) and `MRO_CONTRACT` (in which order),
both checked by tests/test_trainer_mro.py and tests/test_trl_contract.py. Layers a recipe opts into sit below these,
right above TRL (`trainer_for`): the curriculum's sampler and the CPU speed-ups (rlvr/speedups).
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import torch
from torch.optim.lr_scheduler import LambdaLR
from transformers import get_scheduler
from trl import GRPOTrainer

from rlvr.metrics.callbacks import RolloutLedger
from rlvr.metrics.held_out import held_out_callback
from rlvr.metrics.keys import (
    COUNTERS,
    GENERATED_TOKENS,
    GENERATION_SHARE,
    KL,
    TIME_TOTAL,
    TOKEN_RATES,
    TRL_ZERO_STD,
    TRL_ZERO_STD_RELABELLED,
    time_key,
)
from rlvr.metrics.readings import RewardReadings
from rlvr.metrics.reward_batch import ALL_WRONG_ROWS, RewardBatch, all_wrong_rows
from rlvr.training import algorithms
from rlvr.training.algorithms import compute_advantages, trainer_class, zero_flat_groups
from rlvr.training.config import KL_ESTIMATORS

# ---- the KL estimator (`kl_estimator: k1 | k2 | k3`; TRL 1.16 has only k3)
# What each estimator's expected gradient pulls toward, with and without TRL's `use_bias_correction_kl`:
# docs/algorithms.md, "KL estimators". How, without copying TRL's 250-line `_compute_loss`: TRL adds
# `beta * k3 * ratio` to every token's loss before its (linear) loss-type aggregation, so the mixin lets TRL compute
# its loss, captures the policy's per-token log-probs (with their graph) during that call, and adds
# `beta * (k - k3) * ratio` aggregated as TRL aggregates that loss type. The logged `kl` is the chosen estimator's
# masked mean. tests/test_kl_estimator.py checks the aggregation and the ratio against TRL's own for every loss type.


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


class LossTermsMixin:
    """The loss terms TRL lacks, from the tensors of TRL's own policy pass (captured, not recomputed): the KL estimator
    k1 / k2 in place of TRL's k3 (see the module docstring), and `failed_entropy_coef`'s entropy bonus on the
    completions of all-wrong groups. Also the entropy coefficient's switch to `late_entropy_coef`: TRL's own term,
    with TRL's coefficient set from that step on (so a late coefficient computes exactly as the same `entropy_coef`
    would)."""

    _captured: list | None = None

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._captured is not None:
            self._captured.append(result)
        return result

    def _compute_loss(self, model, inputs):
        if self.args.late_entropy_coef is not None and self.state.global_step >= self.args.late_entropy_step:
            self.entropy_coef, self._entropy_bonus_enabled = self.args.late_entropy_coef, True  # TRL's term applies it
        swap_kl = self.beta != 0.0 and self.args.kl_estimator != "k3"
        explore = self.args.failed_entropy_coef != 0.0
        if not (swap_kl or explore):
            return super()._compute_loss(model, inputs)
        self._captured = []
        try:
            loss = super()._compute_loss(model, inputs)
            ((logp, entropies, *_),) = self._captured  # TRL's one forward pass of the policy in this call
        finally:
            self._captured = None
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)
        if swap_kl:
            loss = loss + self.kl_swap(logp, inputs, mask)
        if explore:
            loss = loss - self.args.failed_entropy_coef * failed_group_entropy(self, entropies, mask, inputs)
        return loss

    def kl_swap(self, logp: torch.Tensor, inputs: dict, mask: torch.Tensor) -> torch.Tensor:
        """beta x (k - k3), aggregated as TRL aggregates its k3 term; the logged `kl` becomes the chosen estimator's."""
        ref = inputs["ref_per_token_logps"]
        weight = importance_weight(self, logp, inputs, mask)
        chosen = per_token_kl(logp, ref, self.args.kl_estimator) * weight
        k3 = per_token_kl(logp, ref, "k3") * weight
        totals = self.accelerator.reduce(torch.stack([(chosen.detach() * mask).sum(), mask.sum().float()]), "sum")
        self._metrics["train" if self.model.training else "eval"][KL][-1] = (
            totals[0] / totals[1].clamp(min=1.0)
        ).item()
        return self.beta * aggregate_like_trl(self, chosen - k3, mask, inputs)


def failed_group_entropy(trainer, entropies: torch.Tensor, mask: torch.Tensor, inputs: dict) -> torch.Tensor:
    """The token entropy of the all-wrong groups' completions, summed and divided by every completion token of the
    micro-batch, as TRL divides its entropy bonus: on those tokens the entropy coefficient is then `entropy_coef +
    failed_entropy_coef`, elsewhere `entropy_coef`. Why: a slip that every sample of a group makes (a letter miscopied
    at the same place) leaves no contrast for any advantage, and sharpening entrenches it; spreading the policy there
    lets a right answer be sampled, which the advantage then pushes up."""
    failed = inputs[ALL_WRONG_ROWS].to(mask.dtype).unsqueeze(-1)
    accumulation = trainer.current_gradient_accumulation_steps if trainer.model.training else 1.0
    return (entropies * mask * failed).sum() / mask.sum().clamp(min=1.0) / accumulation


# ---- the sample budget (`max_generated_samples`): the learning-rate schedule follows generated samples; the stop at
# the budget is `rlvr.training.stopping.SampleBudgetCallback`.


class SampleScheduleMixin:
    """Trainer mixin: with `max_generated_samples`, the learning-rate schedule advances with generated samples."""

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        budget = getattr(self.args, "max_generated_samples", None)
        ledger = next((cb for cb in self.callback_handler.callbacks if isinstance(cb, RolloutLedger)), None)
        if not budget or ledger is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)

        optimizer = self.optimizer if optimizer is None else optimizer
        steps_schedule = get_scheduler(
            self.args.lr_scheduler_type,
            optimizer=optimizer,
            num_warmup_steps=self.args.get_warmup_steps(num_training_steps),
            num_training_steps=num_training_steps,
            scheduler_specific_kwargs=self.args.lr_scheduler_kwargs,
        )
        if not isinstance(steps_schedule, LambdaLR):  # e.g. reduce_lr_on_plateau: no progress function to remap
            self.lr_scheduler = steps_schedule
            return self.lr_scheduler

        def on_samples(step_lambda):  # the step schedule, read at "step" = samples so far as a fraction of max_steps
            return lambda _step: step_lambda(num_training_steps * min(1.0, ledger.generated_samples / budget))

        self.lr_scheduler = LambdaLR(optimizer, [on_samples(f) for f in steps_schedule.lr_lambdas])
        return self.lr_scheduler


class RewardDispatchMixin:
    """Hands each gathered `RewardBatch` (built once by `RewardReadings`, the reward-function wrapper a plain
    `trl.GRPOTrainer` can take too) to the `RewardBatchCallback`s, and keeps it as `self._reward_batch`, numbered by
    DAPO's sampling round, for the advantage dispatch (`AlgorithmMixin`). What the callbacks return goes into TRL's
    logged metrics of the batch's mode."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._readings = RewardReadings(self, on_batch=self._on_reward_batch, call=self._score)

    def _score(self, fn, *args):
        """One wrapped reward call (`TimingMixin` counts it as scoring time)."""
        return fn(*args)

    def _on_reward_batch(self, batch: RewardBatch, kwargs: dict) -> None:
        batch.round = getattr(self, "_sampling_round", 0)
        self._reward_batch = batch
        self._readings.dispatch(batch, kwargs, log=lambda name, value: self._metrics[batch.mode][name].append(value))


class TimingMixin:
    """Wall time per log window (`time/*`, docs/speed.md "Measuring your own runs"), added to each training row.

    `logprobs` is the rollout minus generation and scoring (log-prob passes and bookkeeping); a PEFT run's reference
    is the policy with its adapter off, so it counts as `old_policy`; `total` is the training step plus
    `optimizer.step()` (timed by hooks), not logging nor callbacks. A held-out evaluation is not training time (its
    row's `eval_runtime`): its time goes to an account of its own, dropped when it ends. The generated tokens of each
    training batch are counted in the window for `tokens_per_s/*` (all processes' tokens).
    """

    def evaluate(self, *args, **kwargs):
        accounts, self._time_accounts = getattr(self, "_time_accounts", None), defaultdict(float)
        try:
            return super().evaluate(*args, **kwargs)
        finally:
            self._time_accounts = accounts or defaultdict(float)

    def _account(self, account: str, amount: float) -> None:
        self._time_accounts = getattr(self, "_time_accounts", None) or defaultdict(float)
        self._time_accounts[account] += amount

    def _timed(self, account: str, fn, *args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self._account(account, time.perf_counter() - start)

    def _score(self, fn, *args):
        return self._timed("scoring", super()._score, fn, *args)

    def _on_reward_batch(self, batch: RewardBatch, kwargs: dict) -> None:
        if batch.mode == "train":
            self._account(GENERATED_TOKENS, sum(batch.completion_lengths))
        super()._on_reward_batch(batch, kwargs)

    def _generate(self, prompts):
        return self._timed("generation", super()._generate, prompts)

    def _generate_and_score_completions(self, inputs):
        self._in_rollout = True
        try:
            return self._timed("rollout", super()._generate_and_score_completions, inputs)
        finally:
            self._in_rollout = False

    def _get_per_token_logps_and_entropies(self, model, *args, **kwargs):
        if not getattr(self, "_in_rollout", False):  # the policy's own pass inside the loss: part of `optimization`
            return super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
        account = "reference" if model is getattr(self, "ref_model", None) and model is not None else "old_policy"
        return self._timed(account, super()._get_per_token_logps_and_entropies, model, *args, **kwargs)

    def create_optimizer(self, *args, **kwargs):
        optimizer = super().create_optimizer(*args, **kwargs)
        if hasattr(optimizer, "register_step_post_hook") and not getattr(optimizer, "_rlvr_timed", False):

            def started(*_):
                self._optimizer_started = time.perf_counter()

            def finished(*_):
                self._account("optimizer", time.perf_counter() - self._optimizer_started)

            optimizer.register_step_pre_hook(started)
            optimizer.register_step_post_hook(finished)
            optimizer._rlvr_timed = True
        return optimizer

    def training_step(self, model, inputs, num_items_in_batch):
        return self._timed("step", super().training_step, model, inputs, num_items_in_batch)

    def time_accounting(self) -> dict[str, float]:
        """Seconds spent per phase since the last log, then reset. Rollouts happen inside training steps."""
        spent = getattr(self, "_time_accounts", None) or {}
        self._time_accounts = defaultdict(float)
        generation, scoring, rollout = (
            spent.get("generation", 0.0),
            spent.get("scoring", 0.0),
            spent.get("rollout", 0.0),
        )
        step = spent.get("step", 0.0) or rollout
        if step == 0.0:
            return {}
        total = step + spent.get("optimizer", 0.0)
        tokens, seconds = spent.get(GENERATED_TOKENS, 0.0), {"generation": generation, "total": total}
        # a window that only reused a batch generated nothing: no rate (the whole run's is the bill's, rlvr doctor)
        rates = {key: tokens / seconds[phase] for key, phase in TOKEN_RATES.items() if tokens and seconds[phase] > 0}
        return {
            **rates,
            time_key("generation"): generation,
            time_key("scoring"): scoring,
            time_key("logprobs"): max(rollout - generation - scoring, 0.0),
            time_key("reference"): spent.get("reference", 0.0),
            time_key("old_policy"): spent.get("old_policy", 0.0),
            time_key("optimization"): max(total - rollout, 0.0),
            time_key("optimizer"): spent.get("optimizer", 0.0),
            TIME_TOTAL: total,
            GENERATION_SHARE: generation / total,
        }

    def log(self, logs, start_time=None):
        if self.model.training:
            logs.update(self.time_accounting())
        super().log(logs, start_time)


@contextmanager
def without_kl_term(trainer):
    """`trainer.beta` at 0 inside the block, then back: TRL then computes no KL term and runs no reference pass for it.
    Held-out evaluations that sample and score only (`HeldOutMixin.prediction_step`) and PPO, whose KL is in the
    reward instead of the loss, use it."""
    beta, trainer.beta = trainer.beta, 0.0
    try:
        yield
    finally:
        trainer.beta = beta


def forked_rng():
    """torch's generators (CPU, and this process's CUDA device) as they were, after the block: an evaluation inside a
    run samples (and may seed) without moving the draws of the training steps after it."""
    return torch.random.fork_rng(devices=[torch.cuda.current_device()] if torch.cuda.is_available() else [])


class HeldOutMixin:
    """The held-out evaluation TRL runs every eval_steps: `rlvr evaluate`'s figures added to its rows
    (`rlvr.metrics.held_out`), and its sampling on a forked RNG, so the training steps after it draw what they would
    have drawn without it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if held_out := held_out_callback(self):
            self.add_callback(held_out)

    def evaluate(self, *args, **kwargs):
        with forked_rng():
            return super().evaluate(*args, **kwargs)

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """With `eval_log_probs: false` an evaluation batch is sampled and scored, and that is all.

        Why: TRL's `prediction_step` then runs two log-prob passes, the reference's (for the KL term) and the
        policy's, whose only products are `eval_loss`, `eval_kl`, `eval_entropy` and `eval_clip_ratio/*`; in the
        main job they are about half of each evaluation (docs/evaluation-and-reports.md). The held-out figures come from
        the scored completions alone, and the passes draw no random numbers, so training is the same either way.
        """
        if self.args.eval_log_probs:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys)
        with without_kl_term(self):  # TRL's rollout runs the reference pass only for a KL term
            self._generate_and_score_completions(inputs)  # what TRL's _prepare_inputs does with an eval batch
        return None, None, None


class LoggedRowMixin:
    """TRL's logged row as the records read it: a cumulative counter (`COUNTERS`) keeps its last value in a log window
    instead of TRL's mean, and TRL's inexact zero-std reading is logged as `TRL_ZERO_STD_RELABELLED` (keys.py says
    why)."""

    def log(self, logs, start_time=None):
        for metrics in self._metrics.values():
            for name in COUNTERS:
                if metrics.get(name):
                    metrics[name] = metrics[name][-1:]
            if TRL_ZERO_STD in metrics:
                metrics[TRL_ZERO_STD_RELABELLED] = metrics.pop(TRL_ZERO_STD)
        super().log(logs, start_time)


class RawCompletionsMixin:
    """Rewards see the text the model wrote, tags included: a tokenizer's response parser (transformers 5
    `response_template`, e.g. Qwen3's) cuts `<think>...</think>` out, so the format reward could not tell an empty think
    block from a missing one. Without tool calling the parser buys nothing, so it is switched off."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.tools:
            for attribute in ("response_template", "response_schema"):
                if getattr(self._tokenizer, attribute, None) is not None:
                    setattr(self._tokenizer, attribute, None)


class AlgorithmMixin:
    """The registry's advantage estimator and loss form for `args.algorithm`, from the batch's components (computed
    once); where TRL computes the advantages, its residues on flat groups are zeroed (`zero_flat_groups` says why)."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        num_generations = self._reward_batch.num_generations  # train or eval: chosen once, by the readings
        components = self._reward_batch.components()
        start = self.accelerator.process_index * len(inputs)  # gathered over processes: keep this process's rows
        rows = slice(start, start + len(inputs))
        advantages = compute_advantages(self.args.algorithm, components, num_generations)
        if advantages is not None:
            output["advantages"] = advantages[rows].to(output["advantages"].device)
            self.log_trained_advantages(advantages)
        else:  # TRL's own (GRPO, Dr. GRPO, DAPO, ...): its float arithmetic leaves residues on flat groups
            output["advantages"] = zero_flat_groups(
                self.args.algorithm, output["advantages"], components, num_generations, rows
            )
            self.log_trained_advantages(
                lambda logged: zero_flat_groups(self.args.algorithm, logged, components, num_generations)
            )
        if self.args.success_bonus:  # a push up on every solved completion, on top of the algorithm's advantage
            bonus = self.args.success_bonus * self._reward_batch.solved().float()
            output["advantages"] = output["advantages"] + bonus[rows].to(output["advantages"].device)
            self.log_trained_advantages(lambda logged: logged + bonus)
        if self.args.failed_entropy_coef:  # the rows `failed_group_entropy` spreads
            output[ALL_WRONG_ROWS] = all_wrong_rows(self._reward_batch.solved(), num_generations)[rows].to(
                output["advantages"].device
            )
        return output

    def log_trained_advantages(self, advantages) -> None:
        """The completions table (`log_completions: true`) shows the advantage each completion trained with, not the
        GRPO ones TRL wrote to `_logs["advantages"]`. `advantages`: the batch's, gathered, in TRL's row order, or a
        function of the logged ones (TRL's residues zeroed)."""
        logged = self._logs["advantages"]
        batch = len(self._reward_batch.completions)
        if len(logged) < batch:  # the table keeps fewer rows than one (evaluation) batch: nothing of it is shown
            return
        start = len(logged) - batch
        if callable(advantages):
            advantages = advantages(torch.tensor([logged[start + i] for i in range(batch)]))
        for i, value in enumerate(advantages.tolist()):
            logged[start + i] = value

    def _compute_loss(self, model, inputs):
        if not algorithms.ALGORITHMS[self.args.algorithm].ratio:  # the registry as it is now (tests extend it)
            # With old log-probs = current log-probs (detached), TRL's clipped surrogate reduces to exactly
            # -A * grad log pi, whatever the clip range.
            inputs = {key: value for key, value in inputs.items() if key != "old_per_token_logps"}
        return super()._compute_loss(model, inputs)


# The MRO contract: which of our classes override which TRL (or transformers Trainer) method, outermost first, and
# why in that order. RLVRTrainer's bases are listed in this order; DAPOTrainer and PPOTrainer subclass it and so sit
# above every mixin; the layers a recipe opts into (`trainer_for`) sit below every mixin, right above TRL.
#
#   _generate_and_score_completions  DAPOTrainer / PPOTrainer -> TimingMixin -> AlgorithmMixin -> TRL
#       DAPO resamples whole rollouts, each one timed and with the algorithm's advantages; PPO replaces the
#       advantages by GAE last. TimingMixin's "rollout" timer covers everything below it. AlgorithmMixin replaces
#       TRL's advantages after TRL's call, reading the reward batch RewardDispatchMixin kept.
#   _compute_loss                    PPOTrainer -> AlgorithmMixin -> LossTermsMixin -> TRL
#       PPO adds the value loss to the policy loss. AlgorithmMixin drops the importance ratio (no old log-probs)
#       before the loss terms read the inputs, so without a ratio the KL term sees none either.
#   _get_per_token_logps_and_entropies  TimingMixin -> LossTermsMixin -> [SharedPrefixTrainer] -> TRL
#       TimingMixin times each pass as reference or old-policy log-probs (outermost, so it times the whole pass);
#       the loss terms capture the policy log-probs and entropies of whichever pass ran: the speed-up's or TRL's.
#   training_step                    PPOTrainer -> TimingMixin -> TRL  (the critic steps after TRL's step)
#   log                              TimingMixin -> LoggedRowMixin -> TRL  (time/* into the row, then TRL's metrics
#       are cleaned up before TRL merges them into it)
#   evaluate                         TimingMixin -> HeldOutMixin -> TRL  (its time apart, then the forked RNG)
#   __init__                         DAPOTrainer / PPOTrainer -> RewardDispatchMixin -> HeldOutMixin ->
#                                    RawCompletionsMixin -> TRL
#       RewardDispatchMixin wraps the reward functions (rlvr/metrics/readings.py) once TRL has set them up; the
#       held-out callback needs TRL's eval_dataset and num_generations_eval.
#   The other overrides have one class each (MRO_CONTRACT); PPOTrainer's save_model and
#   _load_optimizer_and_scheduler keep the critic beside the policy.
MRO_CONTRACT = {
    "_generate_and_score_completions": ("TimingMixin", "AlgorithmMixin"),
    "_compute_loss": ("AlgorithmMixin", "LossTermsMixin"),
    "_get_per_token_logps_and_entropies": ("TimingMixin", "LossTermsMixin"),
    "_generate": ("TimingMixin",),
    "log": ("TimingMixin", "LoggedRowMixin"),
    "training_step": ("TimingMixin",),
    "create_optimizer": ("TimingMixin",),
    "create_scheduler": ("SampleScheduleMixin",),
    "__init__": ("RewardDispatchMixin", "HeldOutMixin", "RawCompletionsMixin"),
    "evaluate": ("TimingMixin", "HeldOutMixin"),
    "prediction_step": ("HeldOutMixin",),
}  # what RLVRTrainer's mixins override, outermost first; a subclass (DAPO, PPO) goes in front of its own overrides

# Every TRL-private method (a leading underscore: TRL may change it in any release) that a class of this repo
# overrides, with the reason no public hook (a callback, a reward function, a config field) does the job. The
# public ones (log, training_step, create_optimizer, create_scheduler, save_model, __init__) are Trainer's documented
# extension points.
PRIVATE_OVERRIDES = {
    ("TimingMixin", "_generate"): "times generation (`time/generation_s`); no callback runs around it",
    ("TimingMixin", "_generate_and_score_completions"): "times the rollout (generation + scoring + log-probs)",
    ("TimingMixin", "_get_per_token_logps_and_entropies"): "splits log-prob time into reference / old policy",
    (
        "AlgorithmMixin",
        "_generate_and_score_completions",
    ): "puts the registry's advantages in (RLOO, REINFORCE, MaxRL) or zeroes TRL's residues on flat groups; adds "
    "success_bonus to solved rows; marks the all-wrong groups' rows for failed_entropy_coef",
    ("AlgorithmMixin", "_compute_loss"): "drops the importance ratio for ratio-free algorithms (-A * log pi)",
    ("LossTermsMixin", "_compute_loss"): "adds beta * (k - k3) for kl_estimator k1 / k2 (TRL has k3 only) and "
    "failed_entropy_coef's entropy bonus on all-wrong groups (TRL's entropy_coef acts on every token); sets TRL's "
    "entropy coefficient to late_entropy_coef from late_entropy_step on (TRL's is fixed for the run)",
    (
        "LossTermsMixin",
        "_get_per_token_logps_and_entropies",
    ): "captures the policy log-probs and entropies of the loss's pass",
    ("DAPOTrainer", "_generate_and_score_completions"): "dynamic sampling: regenerates until enough groups differ",
    ("PPOTrainer", "_generate_and_score_completions"): "GAE advantages from the critic replace the group ones",
    ("PPOTrainer", "_compute_loss"): "adds the clipped value loss; moves the KL into the reward",
    ("PPOTrainer", "_load_optimizer_and_scheduler"): "restores the critic beside the policy on resume",
    (
        "CurriculumSamplerTrainer",
        "_get_train_sampler",
    ): "draws prompts by curriculum level weights (Trainer builds its sampler only here)",
    ("SharedPrefixTrainer", "_get_per_token_logps_and_entropies"): "speed-up: the shared prompt prefix once",
    ("SharedPrefixTrainer", "_generate_single_turn"): "speed-up: prefills the shared prefix once / prefix_attention",
    ("SharedPrefixTrainer", "_tokenize_prompts"): "speed-up: each distinct prompt through the chat template once",
    (
        "GenerationPiecesTrainer",
        "_generate_single_turn",
    ): "CUDA: releases the cached blocks, then samples the batch in pieces that fit (TRL has no hook before it)",
}


class RLVRTrainer(
    TimingMixin,
    RewardDispatchMixin,
    HeldOutMixin,
    LoggedRowMixin,
    AlgorithmMixin,
    LossTermsMixin,
    RawCompletionsMixin,
    SampleScheduleMixin,
    GRPOTrainer,
):
    """TRL's GRPOTrainer with every mixin above, in `MRO_CONTRACT`'s order (the module docstring says what each does)."""


def trains_on_cuda(training) -> bool:
    """A run on a CUDA device: the only runs that load `rlvr.training.cuda_memory` (a CPU run's path has none of it)."""
    return not training.use_cpu and torch.cuda.is_available()


def trainer_for(recipe) -> type:
    """The recipe's algorithm's trainer class, plus the layers the recipe names (its `curriculum:` sampler, then its
    `speedups:`) and, on CUDA, generation in pieces (`rlvr.training.cuda_memory`), each placed by the MRO right above
    TRL, below every mixin."""
    trainer = trainer_class(recipe.training.algorithm)
    # opt-in layers, imported only when named: a recipe without them loads no curriculum or speed-up code
    if recipe.curriculum:
        from rlvr.training.curriculum import with_curriculum

        trainer = with_curriculum(trainer)
    if recipe.speedups:
        from rlvr.speedups.shared_prefix import with_speedups

        trainer = with_speedups(trainer, recipe.speedups)
    if trains_on_cuda(recipe.training):
        from rlvr.training.cuda_memory import with_generation_pieces

        trainer = with_generation_pieces(trainer)
    return trainer
