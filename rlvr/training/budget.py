"""A training budget in generated samples, not optimizer steps: `max_generated_samples`.

Why: runs are compared at equal generation compute (the report's samples axis). For most algorithms a step generates a
fixed number of samples, so `max_steps` already fixes the budget. DAPO's dynamic sampling does not: its resampling
rounds generated 1.9x the samples of GRPO in the same 140 steps. With `max_generated_samples` set, the run

- stops after the optimizer step during which the rollout ledger (all processes, resampling rounds included) reached
  the budget, and `max_steps` is only an upper bound;
- runs its learning-rate schedule on the same axis: the scheduler's progress is samples generated / budget, so a
  cosine decays to its end at the budget however many steps that takes. Where every step generates the same number of
  samples and `max_steps` is the budget's step count, this is the step schedule exactly (step k = k x samples/step).
"""

from __future__ import annotations

from transformers import TrainerCallback


def find_ledger(callbacks):
    from rlvr.metrics.callbacks import RolloutLedger

    return next((cb for cb in callbacks if isinstance(cb, RolloutLedger)), None)


class SampleBudgetCallback(TrainerCallback):
    """Stops training once the ledger has counted `budget` generated samples."""

    def __init__(self, ledger, budget: int):
        self.ledger, self.budget = ledger, budget

    def on_step_end(self, args, state, control, **kwargs):
        if self.ledger.generated_samples >= self.budget and not control.should_training_stop:
            control.should_training_stop = True
            if state.is_world_process_zero and state.global_step < state.max_steps:
                print(f"[budget] {self.ledger.generated_samples} generated samples >= max_generated_samples "
                      f"{self.budget}: stopping at step {state.global_step} of max_steps {state.max_steps}", flush=True)
        return control


class SampleScheduleMixin:
    """Trainer mixin: with `max_generated_samples`, the learning-rate schedule advances with generated samples."""

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        budget = getattr(self.args, "max_generated_samples", None)
        ledger = find_ledger(self.callback_handler.callbacks)
        if not budget or ledger is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        from torch.optim.lr_scheduler import LambdaLR
        from transformers import get_scheduler

        optimizer = self.optimizer if optimizer is None else optimizer
        steps_schedule = get_scheduler(self.args.lr_scheduler_type, optimizer=optimizer,
                                       num_warmup_steps=self.args.get_warmup_steps(num_training_steps),
                                       num_training_steps=num_training_steps,
                                       scheduler_specific_kwargs=self.args.lr_scheduler_kwargs)
        if not isinstance(steps_schedule, LambdaLR):  # e.g. reduce_lr_on_plateau: no progress function to remap
            self.lr_scheduler = steps_schedule
            return self.lr_scheduler

        def on_samples(step_lambda):  # the step schedule, read at "step" = samples so far as a fraction of max_steps
            return lambda _step: step_lambda(num_training_steps * min(1.0, ledger.generated_samples / budget))

        self.lr_scheduler = LambdaLR(optimizer, [on_samples(f) for f in steps_schedule.lr_lambdas])
        return self.lr_scheduler
