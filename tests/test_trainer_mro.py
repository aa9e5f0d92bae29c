"""RLVRTrainer composes mixins whose order matters (rlvr/training/trainer.py, MRO_CONTRACT says which overrides which
TRL method and why): an accidental reorder of the bases, or a new override nobody placed, fails here."""

from __future__ import annotations

import pytest
from trl import GRPOTrainer

from rlvr.training.dapo import DAPOTrainer
from rlvr.training.ppo import PPOTrainer
from rlvr.training.trainer import MRO_CONTRACT, RLVRTrainer


def overriders(trainer: type, method: str) -> tuple[str, ...]:
    """Our classes in `trainer`'s MRO that define `method`, outermost first."""
    return tuple(c.__name__ for c in trainer.__mro__ if c.__module__.startswith("rlvr.") and method in vars(c))


def overridden_trl_methods(trainer: type) -> set[str]:
    ours = [c for c in trainer.__mro__ if c.__module__.startswith("rlvr.")]
    return {name for c in ours for name, value in vars(c).items() if callable(value) and hasattr(GRPOTrainer, name)}


@pytest.mark.parametrize("method", sorted(MRO_CONTRACT))
def test_the_mixins_override_in_the_contracted_order(method):
    assert overriders(RLVRTrainer, method) == MRO_CONTRACT[method]


@pytest.mark.parametrize("trainer", [DAPOTrainer, PPOTrainer])
def test_a_subclass_goes_in_front_and_keeps_the_mixin_order(trainer):
    for method in MRO_CONTRACT:
        own = (trainer.__name__,) if method in vars(trainer) else ()
        assert overriders(trainer, method) == own + MRO_CONTRACT[method], method


def test_every_trl_method_a_mixin_overrides_is_in_the_contract():
    assert overridden_trl_methods(RLVRTrainer) == set(MRO_CONTRACT)


def test_a_reordered_trainer_would_fail():
    from rlvr.training.trainer import AlgorithmMixin, RewardHooksMixin

    class Reordered(AlgorithmMixin, RewardHooksMixin, GRPOTrainer):
        pass

    Reordered.__module__ = "rlvr.test"
    assert overriders(Reordered, "_generate_and_score_completions") != MRO_CONTRACT["_generate_and_score_completions"]
