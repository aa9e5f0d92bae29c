"""One pass over each generation batch: the reward components are computed once, on the trainer's RewardBatch, and the
advantage, group statistics, rollouts, step metrics (and DAPO's filter) all read them from there."""

import sys

import rlvr.metrics.reward_batch as components_module


def test_reward_components_run_once_per_generation_batch(run_recipe, monkeypatch):
    original = components_module.reward_components
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    # Every module of the package that holds the function (imported by name) gets the counter, so a second caller
    # anywhere in rlvr is counted too.
    holders = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("rlvr") and getattr(module, "reward_components", None) is original
    ]
    assert components_module in holders
    for module in holders:
        monkeypatch.setattr(module, "reward_components", counted)
    trainer, _ = run_recipe("--max_steps", "2")
    ledger = next(cb for cb in trainer.callback_handler.callbacks if type(cb).__name__ == "RolloutLedger")
    assert ledger.generation_step == 2
    assert len(calls) == 2
