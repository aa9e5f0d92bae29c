"""Model shapes and workloads: what a recipe asks of one process, read from its config (nothing is loaded).

A `ModelShape` is what memory depends on in a Qwen3-style decoder; a `Workload` is one process's view of a config
(batch shape, precision, LoRA/QLoRA, launch). `rlvr.planning.terms` turns them into bytes, `rlvr.planning.plan` into
a per-phase plan.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from transformers import AutoConfig, AutoTokenizer

from rlvr.inputs import ConfigError, load_yaml_mapping, read_json

GIB = 1024**3
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}
LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PEFT_DEFAULT_TARGETS = ("q_proj", "v_proj")  # peft's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["qwen3"]


@dataclass(frozen=True)
class ModelShape:
    """What memory depends on in a Qwen3-style decoder (GQA attention with per-head q/k norms, SwiGLU MLP)."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tie_word_embeddings: bool
    dtype: str = "bfloat16"  # the checkpoint's own dtype: what `dtype: auto` loads

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim


# The public config.json of each checkpoint (https://huggingface.co/Qwen/<name>/blob/main/config.json): hidden_size,
# num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
# tie_word_embeddings; all ship torch_dtype bfloat16. Parameter counts (0.60B, 1.72B, 4.02B, 8.19B) match the cards.
KNOWN_SHAPES = {
    "Qwen/Qwen3-0.6B": ModelShape("Qwen/Qwen3-0.6B", 1024, 28, 16, 8, 128, 3072, 151936, True),
    "Qwen/Qwen3-1.7B": ModelShape("Qwen/Qwen3-1.7B", 2048, 28, 16, 8, 128, 6144, 151936, True),
    "Qwen/Qwen3-4B": ModelShape("Qwen/Qwen3-4B", 2560, 36, 32, 8, 128, 9728, 151936, True),
    "Qwen/Qwen3-8B": ModelShape("Qwen/Qwen3-8B", 4096, 36, 32, 8, 128, 12288, 151936, False),
}


def shape_from_config(name: str, config: dict) -> ModelShape:
    """A `ModelShape` from a transformers config dict (a multimodal config's `text_config` when it has one)."""
    config = config.get("text_config") or config
    heads = config["num_attention_heads"]
    return ModelShape(
        name=name,
        hidden=config["hidden_size"],
        layers=config["num_hidden_layers"],
        heads=heads,
        kv_heads=config.get("num_key_value_heads") or heads,
        head_dim=config.get("head_dim") or config["hidden_size"] // heads,
        intermediate=config["intermediate_size"],
        vocab=config["vocab_size"],
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        dtype=str(config.get("dtype") or config.get("torch_dtype") or "float32").replace("torch.", ""),
    )


def resolve_shape(name_or_path: str, build_tiny_model: bool = False) -> ModelShape:
    """Offline: a local folder's config.json, a known Qwen3 name, the tiny model about to be built, or the HF cache."""
    local = Path(name_or_path) / "config.json"
    if local.exists():
        return shape_from_config(name_or_path, read_json(local, "model_name_or_path", dict))
    for known, shape in KNOWN_SHAPES.items():
        if name_or_path.lower() in (known.lower(), known.split("/")[1].lower()):
            return shape
    if build_tiny_model:
        from rlvr.recipes.tiny.model import TinyModelConfig, build_tokenizer  # only for a tiny-model recipe

        tiny = {k: v for k, v in asdict(TinyModelConfig()).items() if k not in ("seed", "max_position_embeddings")}
        return shape_from_config(
            name_or_path,
            {**tiny, "vocab_size": len(build_tokenizer()), "tie_word_embeddings": True, "dtype": "float32"},
        )
    try:
        return shape_from_config(
            name_or_path, AutoConfig.from_pretrained(name_or_path, local_files_only=True).to_dict()
        )
    except (OSError, ValueError, KeyError):
        raise ConfigError(
            "model_name_or_path",
            f"the memory planner needs the shape of {name_or_path!r}: give a "
            f"local folder with config.json, a cached model, or one of {list(KNOWN_SHAPES)}",
        ) from None


def linear_shapes(s: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each projection in one decoder layer."""
    h, q, kv, i = s.hidden, s.q_dim, s.kv_dim, s.intermediate
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


def lora_targets(target_modules) -> tuple[str, ...]:
    """TRL's `lora_target_modules` as projection names: None is peft's Qwen3 default, "all-linear" all seven."""
    if not target_modules:
        return PEFT_DEFAULT_TARGETS
    names = [target_modules] if isinstance(target_modules, str) else list(target_modules)
    if "all-linear" in names:
        return LINEAR_MODULES
    unknown = [n for n in names if n not in LINEAR_MODULES]
    if unknown:
        raise ConfigError("lora_target_modules", f"the planner knows {list(LINEAR_MODULES)}, got {unknown}")
    return tuple(names)


# --- The workload: one process's view of a config -----------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Everything the terms need, per process. LoRA when `lora_r` is set; PPO adds a value model and a reference."""

    shape: ModelShape
    weight_bytes: int  # loaded weights
    act_bytes: int  # activations: 2 under bf16/fp16 (autocast or weights), else 4; the KV cache has the weights' dtype
    micro_batch: int  # per_device_train_batch_size, in completions
    prompt_tokens: int
    completion_tokens: int
    generation_sequences: int  # completions sampled at once on this process
    num_generations: int
    gradient_checkpointing: bool
    beta: float = 0.0
    lora_r: int | None = None
    lora_targets: tuple[str, ...] = ()
    lora_dropout: float = 0.0
    quant_bits: int | None = None  # bitsandbytes load_in_4bit / load_in_8bit: the frozen base's linear layers
    double_quant: bool = False  # bnb_4bit_use_double_quant (TRL's use_bnb_nested_quant): 8-bit block scales
    ppo: bool = False
    num_processes: int = 1
    zero_stage: int = 0
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    vllm_utilization: float = 0.3
    vllm_sleep: bool = False
    ds3_gather_for_generation: bool = True
    offloaded_cache: bool = False  # cache_implementation: offloaded
    total_bytes: float | None = None  # device memory, for vLLM's reserved fraction
    optim: str = "adamw_torch"  # transformers' `optim` (adamw_torch_fused, HF's default, allocates the same)
    optim_block: int | None = None  # `optim_args: block_size=N` of torchao's low-bit AdamW (None: its default)
    generation_chunk: int | None = None  # generation_chunk_size: sequences sampled at once (None: all of them)

    @property
    def sequences_at_once(self) -> int:
        """Sequences whose KV cache exists together: the generation batch, or its pieces."""
        return min(self.generation_chunk or self.generation_sequences, self.generation_sequences)


def zero_stage_of(training, env=os.environ) -> int:
    """The ZeRO stage of this run: `deepspeed` in the training args, else what `accelerate launch` exported; 0 = none."""
    ds = getattr(training, "deepspeed", None)
    if isinstance(ds, str) and os.path.exists(ds):
        ds = read_json(ds, "deepspeed", dict)
    if isinstance(ds, dict):
        return int(ds.get("zero_optimization", {}).get("stage", 0))
    if str(env.get("ACCELERATE_USE_DEEPSPEED", "")).lower() == "true":
        return int(env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", 2))
    return 0


def launch_shape(accelerate_config: str) -> tuple[int, int]:
    """(processes, ZeRO stage) of an accelerate config file, as `accelerate launch --config_file` would run it."""
    field = "--accelerate_config"
    cfg = load_yaml_mapping(accelerate_config, field, "an accelerate config mapping (accelerate config's output)")
    kind = str(cfg.get("distributed_type", "NO"))
    deepspeed = cfg.get("deepspeed_config") or {}
    if not isinstance(deepspeed, dict):
        raise ConfigError(field, f"deepspeed_config in {accelerate_config} must be a mapping, got {deepspeed!r}")
    try:
        processes = 1 if kind == "NO" else int(cfg.get("num_processes", 1))
        stage = int(deepspeed.get("zero_stage", 0)) if kind == "DEEPSPEED" else 0
    except (TypeError, ValueError):
        raise ConfigError(
            field, f"num_processes and deepspeed_config.zero_stage in {accelerate_config} must be integers"
        ) from None
    if processes < 1 or stage not in (0, 1, 2, 3):
        raise ConfigError(
            field, f"{accelerate_config} has num_processes {processes} and zero_stage {stage}; need >= 1 and 0-3"
        )
    return processes, stage


def workload_from_config(
    training,
    model_args,
    shape: ModelShape,
    prompt_tokens: int,
    *,
    num_processes=None,
    zero_stage=None,
    ppo=False,
    total_bytes=None,
) -> Workload:
    """Read the parsed GRPOConfig and ModelConfig. `generation_batch_size` is global: each process samples its share."""
    num_processes = num_processes or training.world_size
    zero_stage = zero_stage_of(training) if zero_stage is None else zero_stage
    dtype = shape.dtype if model_args.dtype in (None, "auto") else str(model_args.dtype)
    half = training.bf16 or training.fp16
    weight_bytes = 2 if zero_stage and half else DTYPE_BYTES.get(dtype, 4)  # DeepSpeed casts to its 16-bit dtype
    peft = model_args.use_peft
    return Workload(
        shape=shape,
        weight_bytes=weight_bytes,
        act_bytes=2 if half or weight_bytes == 2 else 4,
        micro_batch=training.per_device_train_batch_size,
        prompt_tokens=prompt_tokens,
        completion_tokens=training.max_completion_length,
        generation_sequences=max(training.generation_batch_size // num_processes, 1),
        num_generations=training.num_generations,
        gradient_checkpointing=bool(training.gradient_checkpointing),
        beta=training.beta,
        lora_r=model_args.lora_r if peft else None,
        lora_targets=lora_targets(model_args.lora_target_modules) if peft else (),
        lora_dropout=model_args.lora_dropout if peft else 0.0,
        quant_bits=4 if model_args.load_in_4bit else 8 if model_args.load_in_8bit else None,
        double_quant=bool(model_args.load_in_4bit and model_args.use_bnb_nested_quant),
        ppo=ppo,
        num_processes=num_processes,
        zero_stage=zero_stage,
        use_vllm=training.use_vllm,
        vllm_mode=training.vllm_mode,
        vllm_utilization=training.vllm_gpu_memory_utilization,
        vllm_sleep=training.vllm_enable_sleep_mode,
        ds3_gather_for_generation=training.ds3_gather_for_generation,
        offloaded_cache=str(training.cache_implementation).startswith("offloaded"),
        total_bytes=total_bytes,
        optim=getattr(training.optim, "value", training.optim),
        optim_block=optim_block_size(training.optim_args),
        generation_chunk=getattr(training, "generation_chunk_size", None),
    )


def optim_block_size(optim_args: str | None) -> int | None:
    """`block_size` of transformers' comma-separated `optim_args` ("block_size=256,bf16_stochastic_round=True")."""
    for item in (optim_args or "").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "block_size":
            try:
                return int(value)
            except ValueError:
                raise ConfigError("optim_args", f"block_size must be an integer, got {value.strip()!r}") from None
    return None


# --- Prompt length -------------------------------------------------------------------------------------------------

CHARS_PER_TOKEN = (
    3.5  # BPE averages ~4 characters per English token (Qwen's too); rounded down to stay on the safe side
)
TEMPLATE_TOKENS_PER_MESSAGE = 5  # <|im_start|>role\n ... <|im_end|>\n


def _prompt_chars(prompt) -> int:
    return len(prompt) if isinstance(prompt, str) else sum(len(m["content"]) for m in prompt)


def estimate_prompt_tokens(prompts, model_path: str | None = None) -> int:
    """Tokens of the longest prompt with its chat template: counted with the tokenizer when the model is a local
    folder, else estimated from its characters."""
    longest = max(prompts, key=_prompt_chars)
    if model_path and (Path(model_path) / "tokenizer_config.json").exists() and not isinstance(longest, str):
        ids = AutoTokenizer.from_pretrained(model_path).apply_chat_template(longest, add_generation_prompt=True)
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)
    messages = 1 if isinstance(longest, str) else len(longest) + 1
    return math.ceil(_prompt_chars(longest) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS_PER_MESSAGE * messages
