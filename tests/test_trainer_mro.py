"""RLVRTrainer composes mixins whose order matters (rlvr/training/trainer.py, MRO_CONTRACT says which overrides which
TRL method and why): an accidental reorder of the bases, or a new override nobody placed, fails here. So does a
TRL-private override missing from PRIVATE_OVERRIDES (the one list of them, with reasons), and a GPU recipe whose
trainer carries the CPU speed-ups."""

from __future__ import annotations

import pytest
from trl import GRPOTrainer

from rlvr.speedups.shared_prefix import SharedPrefixTrainer, with_speedups
from rlvr.training import config
from rlvr.training.algorithms import ALGORITHMS, trainer_class
from rlvr.training.cuda_memory import GenerationPiecesTrainer, with_generation_pieces
from rlvr.training.curriculum import CurriculumSamplerTrainer, with_curriculum
from rlvr.training.dapo import DAPOTrainer
from rlvr.training.ppo import PPOTrainer
from rlvr.training.trainer import MRO_CONTRACT, PRIVATE_OVERRIDES, RLVRTrainer, trainer_for


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
    from rlvr.training.trainer import AlgorithmMixin, TimingMixin

    class Reordered(AlgorithmMixin, TimingMixin, GRPOTrainer):
        pass

    Reordered.__module__ = "rlvr.test"
    assert overriders(Reordered, "_generate_and_score_completions") != MRO_CONTRACT["_generate_and_score_completions"]


def private_overrides(trainer: type) -> set[tuple[str, str]]:
    """(class, method) for every TRL/Trainer-private method (one leading underscore) a class of ours defines."""
    return {
        (c.__name__, name)
        for c in trainer.__mro__
        if c.__module__.startswith("rlvr.")
        for name, value in vars(c).items()
        if callable(value) and name.startswith("_") and not name.startswith("__") and hasattr(GRPOTrainer, name)
    }


def every_trainer() -> list[type]:
    """Each algorithm's trainer as a recipe can get it: plain, with a curriculum, with speed-ups, with both; and each
    of those as a CUDA run gets it, with generation in pieces."""
    speedups = frozenset({"shared_prefix"})
    layered = [
        trainer
        for name in ALGORITHMS
        for plain in [trainer_class(name)]
        for trainer in (
            plain,
            with_curriculum(plain),
            with_speedups(plain, speedups),
            with_speedups(with_curriculum(plain), speedups),
        )
    ]
    return layered + [with_generation_pieces(trainer) for trainer in layered]


def test_private_overrides_lists_exactly_the_private_methods_overridden():
    found = set().union(*(private_overrides(trainer) for trainer in every_trainer()))
    assert found == set(PRIVATE_OVERRIDES), found ^ set(PRIVATE_OVERRIDES)
    assert all(reason.strip() for reason in PRIVATE_OVERRIDES.values())


def test_the_core_trainer_overrides_fewer_private_methods_than_before():
    """RLVRTrainer once overrode these four plus `_calculate_rewards` (now a wrapper around the reward functions,
    rlvr/metrics/readings.py), `_generate_single_turn` (the speed-ups) and `_get_train_sampler` (the curriculum):
    the last two belong to the layers a recipe opts into."""
    core = {method for _, method in private_overrides(RLVRTrainer)}
    assert core == {
        "_generate",
        "_generate_and_score_completions",
        "_get_per_token_logps_and_entropies",
        "_compute_loss",
    }


def test_opt_in_layers_sit_right_above_trl_below_every_mixin():
    trainer = with_speedups(with_curriculum(trainer_class("ppo")), frozenset({"shared_prefix"}))
    mro = [c.__name__ for c in trainer.__mro__]
    assert mro.index("LossTermsMixin") < mro.index("CurriculumSamplerTrainer") < mro.index("SharedPrefixTrainer")
    assert mro.index("SharedPrefixTrainer") == mro.index("GRPOTrainer") - 1
    assert mro[:3] == ["PPOTrainerWithCurriculumWithSpeedups", "SharedPrefixCritic", "PPOTrainerWithCurriculum"]


def test_generation_pieces_sit_right_above_trl_below_the_speedups():
    trainer = with_generation_pieces(with_speedups(trainer_class("grpo"), frozenset({"shared_prefix"})))
    mro = list(trainer.__mro__)
    assert mro.index(SharedPrefixTrainer) < mro.index(GenerationPiecesTrainer) == mro.index(GRPOTrainer) - 1


def recipe_trainer(monkeypatch, path: str) -> type:
    """The trainer class `recipes/grpo.py --config path` would build (the model is not needed to tell)."""
    monkeypatch.setattr(config, "check_model_reachable", lambda *args, **kwargs: None)
    recipe = config.validate(
        config.load_recipe(["--config", path, "--bf16", "false", "--use_cpu", "true", "--dry_run", "true"])
    )
    return trainer_for(recipe)


@pytest.mark.parametrize(
    "path",
    [
        "recipes/grpo.yaml",
        "recipes/grpo_qwen3_0.6b_full.yaml",
        "recipes/grpo_qwen3_1.7b_lora.yaml",
        "recipes/grpo_qwen3_4b_qlora.yaml",
    ],
)
def test_gpu_recipes_get_a_trainer_without_speedups(monkeypatch, path):
    assert recipe_trainer(monkeypatch, path) is RLVRTrainer
    assert not issubclass(recipe_trainer(monkeypatch, path), (SharedPrefixTrainer, CurriculumSamplerTrainer))


@pytest.mark.parametrize("path", ["recipes/tiny/grpo.yaml", "recipes/tiny/ppo.yaml", "recipes/tiny/curriculum.yaml"])
def test_tiny_recipes_name_the_speedups_and_get_them(monkeypatch, path):
    trainer = recipe_trainer(monkeypatch, path)
    assert issubclass(trainer, SharedPrefixTrainer) and trainer.speedups
    assert issubclass(trainer, CurriculumSamplerTrainer) == ("curriculum" in path)


def test_a_run_on_cuda_gets_generation_in_pieces_and_a_cpu_run_does_not(monkeypatch):
    import torch

    cpu = recipe_trainer(monkeypatch, "recipes/grpo_qwen3_0.6b_full.yaml")
    assert not issubclass(cpu, GenerationPiecesTrainer)
    monkeypatch.setattr(config, "check_model_reachable", lambda *args, **kwargs: None)
    recipe = config.validate(
        config.load_recipe(["--config", "recipes/grpo_qwen3_0.6b_full.yaml", "--bf16", "false", "--use_cpu", "true"])
    )
    recipe.training.use_cpu = False
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cuda = trainer_for(recipe)
    assert issubclass(cuda, GenerationPiecesTrainer) and issubclass(cuda, RLVRTrainer)
