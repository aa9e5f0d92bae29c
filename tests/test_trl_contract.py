"""The contract with TRL: every private (or otherwise unstable) TRL method, attribute and helper this repo relies on,
checked against the installed TRL. Upgrading TRL fails here first, in one place, with the list of what moved.

TRL 1.16 has no public hook for some of what the trainer mixins do (see PRIVATE_OVERRIDES in
rlvr/training/trainer.py): the advantages (`_generate_and_score_completions`), the loss (`_compute_loss`) and the
log-prob pass (`_get_per_token_logps_and_entropies`) are private. The reward batch needs none: a wrapper around the
reward functions sees it, and reports through TRL's public `log_metric` kwarg (rlvr/metrics/readings.py).
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

import pytest
import transformers
import trl
from conftest import REPO, small_model
from trl import GRPOTrainer

# method -> the parameter names it has in TRL, as our overrides receive them and our super() calls pass them
METHODS = {
    "_generate_and_score_completions": ["self", "inputs"],  # Timing, Algorithm, DAPO, PPO: advantages
    "_compute_loss": ["self", "model", "inputs"],  # Algorithm (no ratio), KLEstimator, PPO (value loss)
    "_generate": ["self", "prompts"],  # time accounting
    "_generate_single_turn": [
        "self",
        "prompt_ids",
        "images",
        "multimodal_fields",
        "num_generations",
        "has_tool_images",
    ],  # shared-prefix generation
    "_tokenize_prompts": ["self", "prompts"],  # group_prompts: each distinct prompt once
    "_get_per_token_logps_and_entropies": [
        "self",
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
        "compute_entropy",
        "compute_aux_loss",
    ],  # prefix, KL
    "_load_optimizer_and_scheduler": ["self", "checkpoint"],  # PPO's critic optimizer
    "training_step": ["self", "model", "inputs", "num_items_in_batch"],
    "log": ["self", "logs", "start_time"],
    "create_optimizer": ["self"],  # time accounting hooks the optimizer step
    "_get_train_sampler": ["self", "dataset"],  # the curriculum's sampler replaces RepeatSampler
    "create_scheduler": ["self", "num_training_steps", "optimizer"],  # the samples-budget lr schedule
    "save_model": ["self", "output_dir", "_internal_call"],  # PPO saves its critic beside the policy
    "evaluate": ["self", "eval_dataset", "ignore_keys", "metric_key_prefix"],  # held-out: forked RNG, own time account
    "prediction_step": ["self", "model", "inputs", "prediction_loss_only", "ignore_keys"],  # eval_log_probs: false
}

# attributes GRPOTrainer (or transformers' Trainer) sets, which the mixins read
ATTRIBUTES = (
    "_metrics",
    "_tokenizer",
    "reward_func_names",
    "reward_weights",
    "num_generations",
    "num_generations_eval",
    "tools",
    "beta",
    "loss_type",
    "temperature",
    "max_completion_length",
    "use_vllm",
    "use_transformers_continuous_batching",
    "pad_to_multiple_of",
    "generation_kwargs",
    "generation_config",
    "eos_token_ids",
    "model_wrapped",
    "callback_handler",
    "accelerator",
    "lr_scheduler",
    "current_gradient_accumulation_steps",
    "is_deepspeed_enabled",
    "is_fsdp_enabled",
    "processing_class",
    "num_iterations",  # the curriculum sampler repeats a chunk as TRL does
    "_step",  # PPO steps its critic's optimizer when TRL's training_step completes an accumulation
    "_logs",
    "_is_vlm",  # group_prompts tokenizes text prompts only
    "environment_factories",
    "log_completions",  # the completions table shows the advantages the algorithm trained with
    "entropy_coef",  # late_entropy_coef sets the coefficient TRL's loss applies ...
    "_entropy_bonus_enabled",  # ... and turns TRL's entropy term on if entropy_coef was 0 at start
)

# keys of the dict `_generate_and_score_completions` returns (and `_compute_loss` reads) that the mixins use
OUTPUT_KEYS = (
    "advantages",
    "completion_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "num_items_in_batch",
    "prompt_ids",
    "completion_ids",
)

# module-level helpers: (module, name, parameter names we pass)
HELPERS = [
    ("trl.trainer.utils", "nanstd", ["tensor", "dim"]),
    ("trl.trainer.utils", "create_model_from_path", ["model_id"]),
    ("trl.trainer.utils", "disable_dropout_in_model", ["model"]),
    # the batch layout reward_components, flat_groups and DAPO's resampling assume: each prompt's G rows adjacent
    ("trl.trainer.utils", "RepeatSampler", ["data_source", "mini_repeat_count", "batch_size", "repeat_count"]),
    (
        "trl.models",
        "unwrap_model_for_generation",
        ["model", "accelerator", "gather_deepspeed3_params", "generation_kwargs", "gradient_checkpointing_kwargs"],
    ),
    ("trl.rewards", "get_soft_overlong_punishment", ["max_completion_len", "soft_punish_cache"]),
    ("trl", "get_quantization_config", ["model_args"]),
    ("trl", "get_peft_config", ["model_args"]),
    ("trl", "TrlParser", []),
]


# transformers' private generation methods the prefix_attention sampling loop calls, so that it samples with the
# config and logits processors `generate` would build: (name, parameter names we pass)
GENERATION_METHODS = {
    "_prepare_generation_config": ["generation_config"],
    "_get_logits_processor": ["generation_config", "input_ids_seq_length", "device", "model_kwargs"],
}
# what the restated forward reads from a llama-family model (rlvr/speedups/prefix_attention.py)
RESTATED_MODULES = {
    "model": ["embed_tokens", "layers", "norm", "rotary_emb"],
    "layer": ["input_layernorm", "self_attn", "post_attention_layernorm", "mlp"],
    "attn": ["q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm", "scaling", "head_dim"],
    "mlp": ["gate_proj", "up_proj", "down_proj"],
}


def attributes_set_by(cls) -> set[str]:
    """Every `self.<name> = ...` (or augmented / annotated assignment) in the class's methods, and its properties."""
    names = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith(("trl", "transformers")):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    names.add(target.attr)
        names |= {name for name, value in vars(klass).items() if isinstance(value, property)}
    return names


def test_the_pinned_versions():
    assert trl.__version__.startswith("1.16"), f"TRL {trl.__version__}: re-check every entry of this file"
    assert int(transformers.__version__.split(".")[0]) == 5


@pytest.mark.parametrize("name", sorted(METHODS))
def test_each_private_method_exists_with_the_signature_we_call(name):
    method = getattr(GRPOTrainer, name, None)
    assert method is not None, f"GRPOTrainer.{name} is gone"
    params = list(inspect.signature(method).parameters)
    assert params[: len(METHODS[name])] == METHODS[name], f"GRPOTrainer.{name}{tuple(params)}"


def test_each_attribute_is_still_set_by_the_trainer():
    missing = [name for name in ATTRIBUTES if name not in attributes_set_by(GRPOTrainer)]
    assert not missing, f"GRPOTrainer no longer sets: {missing}"


def test_the_rollout_batch_keeps_its_keys():
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    missing = [key for key in OUTPUT_KEYS if f'"{key}"' not in source]
    assert not missing, f"_generate_and_score_completions no longer returns {missing}"


@pytest.mark.parametrize(("module", "name", "params"), HELPERS, ids=[h[1] for h in HELPERS])
def test_each_helper_exists_with_the_parameters_we_pass(module, name, params):
    import importlib

    helper = getattr(importlib.import_module(module), name, None)
    assert helper is not None, f"{module}.{name} is gone"
    assert set(params) <= set(inspect.signature(helper).parameters), f"{module}.{name}{inspect.signature(helper)}"


def test_the_contract_lists_every_trl_method_we_override_or_call_through_super():
    """The list above cannot go stale: every `super().<method>` in the trainer mixins that resolves to TRL (or
    transformers' Trainer) is in METHODS."""
    called = set()
    for path in [
        *(REPO / "rlvr" / "training").glob("*.py"),
        *(REPO / "rlvr" / "metrics").glob("*.py"),
        *(REPO / "rlvr" / "speedups").glob("*.py"),
    ]:
        called |= set(re.findall(r"super\(\)\.(\w+)\(", path.read_text()))
    ours = {"__init__", "__post_init__", "parse_known_args"}  # constructors and argparse, not trainer internals
    trainer_methods = {name for name in called - ours if hasattr(GRPOTrainer, name)}
    assert trainer_methods <= set(METHODS), f"add to METHODS: {sorted(trainer_methods - set(METHODS))}"


def test_the_contract_lists_every_trl_attribute_the_mixins_read():
    """Likewise for `self.<attribute>` reads in the trainer mixins: each one TRL or transformers sets is listed."""
    trl_attributes = attributes_set_by(GRPOTrainer)
    read = set()
    for path in [*(REPO / "rlvr" / "training").glob("*.py"), *(REPO / "rlvr" / "speedups").glob("*.py")]:
        read |= set(re.findall(r"self\.(\w+)", path.read_text()))
    used = {
        name
        for name in read & trl_attributes
        if name not in ("args", "model", "state", "control", "optimizer", "train_dataset", "ref_model")
    }
    assert used <= set(ATTRIBUTES), f"add to ATTRIBUTES: {sorted(used - set(ATTRIBUTES))}"


def test_every_private_override_is_checked_here():
    """PRIVATE_OVERRIDES (rlvr/training/trainer.py, with the reason for each) and this contract name the same
    TRL-private methods: none overridden without its signature checked against the installed TRL."""
    from rlvr.training.trainer import PRIVATE_OVERRIDES

    private = {method for _, method in PRIVATE_OVERRIDES}
    assert private <= set(METHODS), f"add to METHODS: {sorted(private - set(METHODS))}"


def test_grpo_samples_with_the_repeat_sampler():
    """The G completions of a prompt are adjacent rows because GRPOTrainer's train sampler is a RepeatSampler with
    mini_repeat_count = num_generations."""
    source = inspect.getsource(GRPOTrainer._get_train_sampler)
    assert "RepeatSampler(" in source and "mini_repeat_count=self.num_generations" in source


@pytest.mark.parametrize("name", sorted(GENERATION_METHODS))
def test_each_private_generation_method_takes_what_we_pass(name):
    from transformers.generation.utils import GenerationMixin

    method = getattr(GenerationMixin, name, None)
    assert method is not None, f"GenerationMixin.{name} is gone"
    assert set(GENERATION_METHODS[name]) <= set(inspect.signature(method).parameters), (
        f"{name}{inspect.signature(method)}"
    )


def test_the_restated_forward_finds_the_modules_it_reads():
    """A qwen3 layout change (a renamed projection, a fused qkv) fails here, not as wrong logits."""
    model = small_model("qwen3")
    layer = model.model.layers[0]
    parts = {"model": model.model, "layer": layer, "attn": layer.self_attn, "mlp": layer.mlp}
    missing = [
        f"{part}.{name}" for part, names in RESTATED_MODULES.items() for name in names if not hasattr(parts[part], name)
    ]
    assert not missing, f"the restated forward reads {missing}"
    assert hasattr(model.model.norm, "variance_epsilon") and model.get_output_embeddings() is not None


def test_the_off_policy_keys_and_defaults_the_doctor_reads():
    """The doctor reads TRL's vLLM correction and clip keys by name and argues its thresholds from TRL's defaults:
    a TRL that renames a key or moves a default fails here, not silently in `rlvr doctor`."""
    from trl import GRPOConfig

    from rlvr.analysis.doctor import THRESHOLDS
    from rlvr.metrics.keys import OFF_POLICY_SERIES

    source = inspect.getsource(inspect.getmodule(GRPOTrainer))
    assert [key for key in OFF_POLICY_SERIES if f'"{key}"' not in source] == []
    defaults = GRPOConfig.__dataclass_fields__
    assert defaults["vllm_importance_sampling_correction"].default is True
    assert defaults["vllm_importance_sampling_mode"].default == "sequence_mask"
    assert defaults["vllm_importance_sampling_clip_max"].default == THRESHOLDS["vllm_clip_max"].value
    assert defaults["vllm_importance_sampling_clip_min"].default is None and defaults["epsilon"].default == 0.2


def test_trls_reward_and_kl_keys_are_the_ones_keys_names():
    """The doctor and the plots read TRL's per-reward-function keys through `trl_reward_key`, the trainer overwrites
    TRL's `kl` through `KL`: a TRL that renames either fails here."""
    from rlvr.metrics.keys import KL, trl_reward_key

    source = inspect.getsource(inspect.getmodule(GRPOTrainer))
    assert trl_reward_key("accuracy") == "rewards/accuracy/mean"
    for statistic in ("mean", "std"):
        assert f'[f"{trl_reward_key("{reward_func_name}", statistic)}"]' in source, statistic
    assert f'self._metrics[mode]["{KL}"]' in source
