"""Peak GPU memory of a recipe, part by part, from the model's shape and the batch shape; nothing is loaded.

    python -m rlvr.memory_plan --config recipes/grpo.yaml [--free_gib 6.9] [--accelerate_config FILE] [--field value]

The peak is `always + max(train, generate)`. TRL samples at the start of an accumulation cycle, after the Trainer has
freed the gradients (`zero_grad(set_to_none=True)`) and while no activations exist; weights, optimizer states and a
colocated vLLM pool persist through both phases. Each term below is a pure function in bytes whose docstring says what
it counts. The counts follow Qwen3's modeling code in transformers 5 and TRL 1.16's GRPOTrainer, and assume SDPA or
flash attention (no seq x seq matrix is kept). They are estimates to decide before a run, not allocator traces:
`benchmarks/memory_check.py` measures them on a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from rlvr.errors import ConfigError, cli

GIB = 1024**3
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


# --- Model shapes -------------------------------------------------------------------------------------------------


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
        return shape_from_config(name_or_path, json.loads(local.read_text()))
    for known, shape in KNOWN_SHAPES.items():
        if name_or_path.lower() in (known.lower(), known.split("/")[1].lower()):
            return shape
    if build_tiny_model:
        from dataclasses import asdict

        from rlvr.tiny_model import TinyModelConfig, build_tokenizer

        tiny = {k: v for k, v in asdict(TinyModelConfig()).items() if k not in ("seed", "max_position_embeddings")}
        return shape_from_config(name_or_path, {**tiny, "vocab_size": len(build_tokenizer()),
                                                "tie_word_embeddings": True, "dtype": "float32"})
    try:
        from transformers import AutoConfig

        return shape_from_config(name_or_path, AutoConfig.from_pretrained(name_or_path, local_files_only=True).to_dict())
    except (OSError, ValueError, KeyError):
        raise ConfigError(
            "model_name_or_path",
            f"the memory planner needs the shape of {name_or_path!r}: give a local folder with config.json, "
            f"a cached model, or one of {list(KNOWN_SHAPES)}",
        ) from None


# --- Bytes, term by term ------------------------------------------------------------------------------------------

LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PEFT_DEFAULT_TARGETS = ("q_proj", "v_proj")  # peft's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["qwen3"]
TOKEN_TILE, VOCAB_TILE = 4096, 32768  # trl.kernels.chunked_logprob: TOKEN_CHUNK_SIZE, _CHUNKED_LOGPROB_CHUNK_SIZE
MARGIN_BYTES = GIB // 2


def linear_shapes(s: ModelShape) -> dict[str, tuple[int, int]]:
    """(in, out) features of each projection in one decoder layer."""
    h, q, kv, i = s.hidden, s.q_dim, s.kv_dim, s.intermediate
    return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}


def parameter_count(s: ModelShape) -> int:
    """Every weight: per layer the seven projections, Qwen3's per-head q/k RMSNorms and two RMSNorms; then the
    embedding, the final norm, and an LM head unless it is tied to the embedding."""
    layer = sum(a * b for a, b in linear_shapes(s).values()) + 2 * s.head_dim + 2 * s.hidden
    head = 0 if s.tie_word_embeddings else s.vocab * s.hidden
    return s.layers * layer + s.vocab * s.hidden + s.hidden + head


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


def lora_parameter_count(s: ModelShape, r: int, targets: tuple[str, ...]) -> int:
    """Trainable LoRA weights: A (r x in) and B (out x r) for each targeted projection of every layer."""
    shapes = linear_shapes(s)
    return s.layers * sum(r * (shapes[t][0] + shapes[t][1]) for t in targets)


def training_state_bytes(trainable: int, param_bytes: int, zero_stage: int = 0, world: int = 1) -> tuple[float, float]:
    """(gradients, optimizer states) of AdamW.

    HF Trainer with torch AdamW (no DeepSpeed): gradients and both moments live in the parameter's own dtype
    (`zeros_like(p)`), with no master copy: 3 x 2 bytes per bf16 weight, 3 x 4 per fp32 one (LoRA adapters are fp32).
    DeepSpeed ZeRO: fp32 m and v, plus fp32 master weights when the weights are 16-bit, sharded over the processes
    from stage 1; the 16-bit gradients are sharded from stage 2.
    """
    if zero_stage == 0:
        return trainable * param_bytes, 2 * trainable * param_bytes
    master = 4 if param_bytes < 4 else 0
    grads = trainable * param_bytes / (world if zero_stage >= 2 else 1)
    return grads, trainable * (8 + master) / world


def ddp_bucket_bytes(trainable: int, param_bytes: int, world: int, zero_stage: int) -> int:
    """DistributedDataParallel's reducer keeps its own flat copy of the gradients (accelerate's default
    gradient_as_bucket_view=False), allocated at wrap time. Only for DDP with more than one process."""
    return trainable * param_bytes if world > 1 and zero_stage == 0 else 0


def layer_activation_bytes(s: ModelShape, act_bytes: int, frozen: bool = False) -> int:
    """Bytes one decoder layer saves for backward, per token, read off Qwen3's modeling code (and measured on CPU
    with saved-tensor hooks in tests/test_memory_plan.py):

    - 2 RMSNorms x 4h: the fp32 upcast of the input (2 units), the normalized input kept for the norm weight's grad,
      and the output kept by the projections that read it;
    - queries 7q: q_norm's fp32 upcast (2) and normalized input (1), the rotated q, K and V expanded to all heads by
      `repeat_kv` (padded batches do not use SDPA's own GQA), and the attention output (o_proj's input);
    - keys 3kv: k_norm's fp32 upcast and normalized input;
    - SwiGLU MLP 4i: gate, silu(gate), up and their product (down_proj's input).
    A frozen base (LoRA) keeps none of what only weight gradients need: 4h + 6q + 2kv + 3i.
    """
    h, q, kv, i = s.hidden, s.q_dim, s.kv_dim, s.intermediate
    units = 4 * h + 6 * q + 2 * kv + 3 * i if frozen else 8 * h + 7 * q + 3 * kv + 4 * i
    return units * act_bytes


def lora_activation_bytes(s: ModelShape, r: int, targets: tuple[str, ...], dropout: float, act_bytes: int) -> int:
    """What LoRA adds per token and layer: each targeted projection's input as lora_A sees it (PEFT's own cast copy,
    after dropout, plus dropout's 1-byte mask when dropout > 0) and lora_A's r outputs, kept for lora_B's gradient."""
    inputs = sum(linear_shapes(s)[t][0] for t in targets)
    return inputs * (act_bytes + (1 if dropout > 0 else 0)) + len(targets) * r * act_bytes


def activation_bytes(s: ModelShape, tokens: int, act_bytes: int, checkpointing: bool, frozen: bool = False,
                     extra_per_layer: int = 0) -> int:
    """Saved activations of one micro-batch of `tokens` (completions x (prompt + completion)).

    Without checkpointing every layer keeps its tensors; with it each layer keeps only its input (h per token) and one
    layer is recomputed in full during backward. The final norm (4h, its output kept by the LM head) is kept once.
    `extra_per_layer`: bytes per token and layer on top, e.g. `lora_activation_bytes`.
    """
    per_layer = layer_activation_bytes(s, act_bytes, frozen) + extra_per_layer
    layers = s.layers * s.hidden * act_bytes + per_layer if checkpointing else s.layers * per_layer
    return tokens * (layers + 4 * s.hidden * act_bytes)


def fused_head_bytes(s: ModelShape, scored_tokens: int, act_bytes: int, head_trained: bool, param_bytes: int) -> int:
    """TRL 1.16's fused LM head (`add_fused_lm_head`) never materializes the logits: it scores tiles of at most
    4096 tokens x 32768 vocab entries in the compute dtype. Its backward keeps an fp32 gradient of the hidden states
    and, when the head (the tied embedding) is trained, an fp32 V x h accumulator plus its cast to the weight dtype."""
    tile = min(scored_tokens, TOKEN_TILE) * min(s.vocab, VOCAB_TILE) * act_bytes
    weight_grad = s.vocab * s.hidden * (4 + param_bytes) if head_trained else 0
    return tile + scored_tokens * s.hidden * 4 + weight_grad


def materialized_logits_bytes(s: ModelShape, scored_tokens: int, buffers: int = 3) -> int:
    """Logits as most trainers build them: fp32 vocab x completion tokens x micro-batch for the logits, their
    log-softmax and its gradient. Qwen's 151,936-entry vocabulary makes this the largest activation. TRL's PPO
    builds it; TRL 1.16's GRPO does not (see `fused_head_bytes`)."""
    return buffers * scored_tokens * s.vocab * 4


def kv_cache_bytes(s: ModelShape, sequences: int, seq_len: int, kv_bytes: int, layers: int | None = None) -> int:
    """Keys and values of every sequence sampled at once, at full length: sequences (prompts x G per process) x
    (prompt + completion) x layers x KV heads x head_dim x 2 (K and V) x bytes; transformers' DynamicCache.
    `cache_implementation: offloaded` keeps only about 2 layers on the GPU (the rest in CPU memory, much slower)."""
    return sequences * seq_len * (layers or s.layers) * s.kv_heads * s.head_dim * 2 * kv_bytes


def sampling_buffers_bytes(s: ModelShape, sequences: int, prompt_tokens: int, growth_bytes: int, act_bytes: int) -> int:
    """What sampling adds to the full KV cache at its peak. At the end of decoding: fp32 logits and the sampling copies
    (temperature, top-k/top-p sort values and int64 indices), ~6 x vocab x 4 bytes a sequence. Earlier, the prefill
    of one layer at a time (no_grad keeps nothing across layers: gate, up and product 3i, plus 4h per prompt token)
    runs while the cache is still `growth_bytes` short of full, so it counts only where it exceeds that growth."""
    decode = sequences * 6 * s.vocab * 4
    prefill = sequences * prompt_tokens * (3 * s.intermediate + 4 * s.hidden) * act_bytes
    return max(decode, prefill - growth_bytes)


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


def zero_stage_of(training, env=os.environ) -> int:
    """The ZeRO stage of this run: `deepspeed` in the training args, else what `accelerate launch` exported; 0 = none."""
    ds = getattr(training, "deepspeed", None)
    if isinstance(ds, str) and os.path.exists(ds):
        ds = json.loads(Path(ds).read_text())
    if isinstance(ds, dict):
        return int(ds.get("zero_optimization", {}).get("stage", 0))
    if str(env.get("ACCELERATE_USE_DEEPSPEED", "")).lower() == "true":
        return int(env.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", 2))
    return 0


def launch_shape(accelerate_config: str) -> tuple[int, int]:
    """(processes, ZeRO stage) of an accelerate config file, as `accelerate launch --config_file` would run it."""
    cfg = yaml.safe_load(Path(accelerate_config).read_text()) or {}
    kind = str(cfg.get("distributed_type", "NO"))
    processes = 1 if kind == "NO" else int(cfg.get("num_processes", 1))
    stage = int((cfg.get("deepspeed_config") or {}).get("zero_stage", 0)) if kind == "DEEPSPEED" else 0
    return processes, stage


def workload_from_config(training, model_args, shape: ModelShape, prompt_tokens: int, *, num_processes=None,
                         zero_stage=None, ppo=False, total_bytes=None) -> Workload:
    """Read the parsed GRPOConfig and ModelConfig. `generation_batch_size` is global: each process samples its share."""
    num_processes = num_processes or training.world_size
    zero_stage = zero_stage_of(training) if zero_stage is None else zero_stage
    dtype = shape.dtype if model_args.dtype in (None, "auto") else str(model_args.dtype)
    half = training.bf16 or training.fp16
    weight_bytes = 2 if zero_stage and half else DTYPE_BYTES.get(dtype, 4)  # DeepSpeed casts to its 16-bit dtype
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
        lora_r=model_args.lora_r if model_args.use_peft else None,
        lora_targets=lora_targets(model_args.lora_target_modules) if model_args.use_peft else (),
        lora_dropout=model_args.lora_dropout if model_args.use_peft else 0.0,
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
    )


# --- The plan ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    name: str
    phase: str  # "always", "train" or "generate"
    bytes: float
    note: str = ""


@dataclass(frozen=True)
class MemoryPlan:
    workload: Workload
    parts: tuple[Part, ...]

    def phase(self, name: str) -> float:
        return sum(p.bytes for p in self.parts if p.phase == name)

    @property
    def peak(self) -> float:
        return self.phase("always") + max(self.phase("train"), self.phase("generate"))

    @property
    def bound(self) -> str:
        return "train" if self.phase("train") >= self.phase("generate") else "generate"


def plan_memory(w: Workload) -> MemoryPlan:
    """Every part of one process's peak, by phase."""
    s, lora, world = w.shape, w.lora_r is not None, w.num_processes
    total = parameter_count(s)
    shard = world if w.zero_stage == 3 else 1
    trainable = lora_parameter_count(s, w.lora_r, w.lora_targets) if lora else total
    param_bytes = 4 if lora else w.weight_bytes
    grads, optimizer = training_state_bytes(trainable, param_bytes, w.zero_stage, world)
    sharded = f", ZeRO-{w.zero_stage} over {world}" if w.zero_stage else ""
    parts = [Part("weights", "always", total * w.weight_bytes / shard, f"{total / 1e9:.2f}B x {w.weight_bytes} B{sharded}")]
    if lora:
        parts.append(Part("LoRA adapters", "always", trainable * 4 / shard,
                          f"r={w.lora_r} on {len(w.lora_targets)} projections: {trainable / 1e6:.1f}M fp32"))
    master = " + fp32 master" if w.zero_stage and param_bytes < 4 else ""
    parts.append(Part("optimizer states", "always", optimizer, f"AdamW m+v{master}, {trainable / 1e6:.0f}M trainable"))
    buckets = ddp_bucket_bytes(trainable, param_bytes, world, w.zero_stage)
    if buckets:
        parts.append(Part("DDP gradient buckets", "always", buckets, "the reducer's flat copy"))
    if w.beta > 0 and not lora:  # PPO too loads a reference only for its KL penalty, i.e. when beta > 0
        parts.append(Part("reference model", "always", total * w.weight_bytes / shard, f"beta={w.beta}"))
    parts.append(Part("gradients", "train", grads, f"{param_bytes} B per trainable weight"))

    tokens, scored = w.micro_batch * (w.prompt_tokens + w.completion_tokens), w.micro_batch * w.completion_tokens
    extra = lora_activation_bytes(s, w.lora_r, w.lora_targets, w.lora_dropout, w.act_bytes) if lora else 0
    acts = activation_bytes(s, tokens, w.act_bytes, w.gradient_checkpointing, lora, extra)
    other = activation_bytes(s, tokens, w.act_bytes, not w.gradient_checkpointing, lora, extra)
    ckpt = "checkpointed" if w.gradient_checkpointing else "no checkpointing"
    parts.append(Part("activations", "train", acts,
                      f"{ckpt}, {w.micro_batch} x {w.prompt_tokens + w.completion_tokens} tokens; "
                      f"{other / GIB:.2f} GiB {'without' if w.gradient_checkpointing else 'with'}"))
    materialized = materialized_logits_bytes(s, scored)
    # PPO's policy log-probs go through the same TRL code as GRPO's; its critic's head is a scalar.
    head = fused_head_bytes(s, scored, w.act_bytes, head_trained=not lora, param_bytes=w.weight_bytes)
    parts.append(Part("LM head (fused)", "train", head, f"{materialized / GIB:.2f} GiB if logits were materialized"))
    if w.weight_bytes == 4 and w.act_bytes == 2:
        parts.append(Part("autocast weight copies", "train", total * 2, "16-bit casts of fp32 weights in forward"))
    if w.ppo:
        value = total - (0 if s.tie_word_embeddings else s.vocab * s.hidden)
        v_grads, v_opt = training_state_bytes(value, w.weight_bytes, w.zero_stage, world)
        parts += [Part("value model", "always", value * w.weight_bytes / shard + v_opt, "PPO: full copy + optimizer"),
                  Part("value model grads + activations", "train", v_grads + activation_bytes(
                      s, tokens, w.act_bytes, w.gradient_checkpointing), "PPO critic's backward")]

    if w.use_vllm and w.vllm_mode == "colocate":
        if w.total_bytes is None:
            raise ConfigError("--total_gib", "vLLM colocate reserves a fraction of total GPU memory: give the total")
        parts.append(Part("vLLM pool", "generate" if w.vllm_sleep else "always", w.vllm_utilization * w.total_bytes,
                          f"vllm_gpu_memory_utilization {w.vllm_utilization} x {w.total_bytes / GIB:.1f} GiB"))
    elif not w.use_vllm:
        seq_len, layers = w.prompt_tokens + w.completion_tokens, (2 if w.offloaded_cache else s.layers)
        kv = kv_cache_bytes(s, w.generation_sequences, seq_len, w.weight_bytes, layers)  # sampling runs outside autocast
        growth = kv - kv_cache_bytes(s, w.generation_sequences, w.prompt_tokens, w.weight_bytes, layers)
        parts.append(Part("KV cache", "generate", kv, f"{w.generation_sequences} sequences x {seq_len} tokens x "
                          f"{layers} layers{' (offloaded)' if w.offloaded_cache else ''} x {s.kv_heads} KV heads x "
                          f"{s.head_dim} x 2 x {w.weight_bytes} B"))
        parts.append(Part("sampling buffers", "generate",
                          sampling_buffers_bytes(s, w.generation_sequences, w.prompt_tokens, growth, w.act_bytes),
                          "fp32 logits + sort buffers (prefill counted if larger)"))
    if w.zero_stage == 3 and w.ds3_gather_for_generation and not w.use_vllm:
        parts.append(Part("ZeRO-3 gather to generate", "generate", total * w.weight_bytes * (1 - 1 / world),
                          "full weights on every GPU while sampling"))
    parts.append(Part("margin", "always", MARGIN_BYTES, "CUDA context, cuBLAS workspaces, fragmentation"))
    return MemoryPlan(w, tuple(parts))


# --- Remedies, in order of value -----------------------------------------------------------------------------------


def smaller_model(shape: ModelShape) -> ModelShape | None:
    """The largest known Qwen3 smaller than `shape`, if any."""
    smaller = [k for k in KNOWN_SHAPES.values() if parameter_count(k) < parameter_count(shape)]
    return max(smaller, key=parameter_count) if smaller else None


def remedies(w: Workload) -> list[tuple[str, Workload]]:
    """Fixes in order of value, each as one change to the workload: 1 smaller base model; 2 fewer tokens or
    completions per micro-batch/step (never G: it is the group contrast); 3 gradient checkpointing; 4 beta = 0;
    5 LoRA; 6 GRPO instead of PPO. Only those that apply."""
    out = []
    if (small := smaller_model(w.shape)) is not None:
        out.append((f"1. smaller base model: {small.name} (re-sweep the learning rate)", replace(w, shape=small)))
    if w.micro_batch > 1:
        half = w.micro_batch // 2
        text = f"2. per_device_train_batch_size {w.micro_batch} -> {half}, double gradient_accumulation_steps"
        out.append((f"{text} (same algorithm, slower)", replace(w, micro_batch=half)))
    if w.completion_tokens >= 128:
        out.append((f"2. max_completion_length {w.completion_tokens} -> {w.completion_tokens // 2}",
                    replace(w, completion_tokens=w.completion_tokens // 2)))
    prompts = w.generation_sequences // w.num_generations
    if prompts >= 2:
        text = f"2. prompts per step {prompts} -> {prompts // 2} per process (generation_batch_size halved"
        out.append((f"{text}, G={w.num_generations} kept)",
                    replace(w, generation_sequences=(prompts // 2) * w.num_generations)))
    if not w.gradient_checkpointing:
        out.append(("3. gradient_checkpointing: true", replace(w, gradient_checkpointing=True)))
    if w.beta > 0 and w.lora_r is None:
        out.append(("4. beta: 0 (no reference model)", replace(w, beta=0.0)))
    if w.lora_r is None:
        out.append(("5. LoRA: use_peft true, lora_r 16, all-linear (lr ~10x higher)",
                    replace(w, lora_r=16, lora_targets=LINEAR_MODULES, lora_dropout=0.05)))
    if w.ppo:
        out.append(("6. GRPO instead of PPO (no value model)", replace(w, ppo=False)))
    return out


# --- Output --------------------------------------------------------------------------------------------------------


def gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def format_plan(plan: MemoryPlan, free_bytes: float | None = None) -> str:
    """The table of parts, the peak, the comparison with free memory and, over budget, the remedies."""
    w = plan.workload
    kind = f"LoRA r={w.lora_r}" if w.lora_r is not None else "full fine-tune"
    launch = f"{w.num_processes} process(es)" + (f", ZeRO-{w.zero_stage}" if w.zero_stage else "")
    lines = [f"memory plan: {w.shape.name}, {kind}, {'PPO' if w.ppo else 'GRPO'}, {launch}; per GPU:",
             f"  {'part':<34}{'phase':<10}{'GiB':>7}  detail"]
    lines += [f"  {p.name:<34}{p.phase:<10}{gib(p.bytes):>7}  {p.note}" for p in plan.parts]
    always, train, generate = (plan.phase(x) for x in ("always", "train", "generate"))
    lines.append(f"  peak = always {gib(always)} + max(train {gib(train)}, generate {gib(generate)}) "
                 f"= {gib(plan.peak)} GiB ({plan.bound}-bound)")
    if free_bytes is not None:
        spare = free_bytes - plan.peak
        verdict = f"fits, {gib(spare)} GiB to spare" if spare >= 0 else f"DOES NOT FIT, {gib(-spare)} GiB short"
        lines.append(f"  free {gib(free_bytes)} GiB: {verdict}")
        if plan.peak > free_bytes:
            lines.append("  remedies, in order of value (peak with that change alone):")
            for text, changed in remedies(w):
                peak = plan_memory(changed).peak
                lines.append(f"    {text}: {gib(peak)} GiB{'  fits' if peak <= free_bytes else ''}")
    return "\n".join(lines)


# --- Prompt length -------------------------------------------------------------------------------------------------

CHARS_PER_TOKEN = 3.5  # BPE averages ~4 characters per English token (Qwen's too); rounded down to stay on the safe side
TEMPLATE_TOKENS_PER_MESSAGE = 5  # <|im_start|>role\n ... <|im_end|>\n


def _prompt_chars(prompt) -> int:
    return len(prompt) if isinstance(prompt, str) else sum(len(m["content"]) for m in prompt)


def estimate_prompt_tokens(prompts, model_path: str | None = None) -> int:
    """Tokens of the longest prompt with its chat template: counted with the tokenizer when the model is a local
    folder, else estimated from its characters."""
    longest = max(prompts, key=_prompt_chars)
    if model_path and (Path(model_path) / "tokenizer_config.json").exists() and not isinstance(longest, str):
        from transformers import AutoTokenizer

        ids = AutoTokenizer.from_pretrained(model_path).apply_chat_template(longest, add_generation_prompt=True)
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)
    messages = 1 if isinstance(longest, str) else len(longest) + 1
    return math.ceil(_prompt_chars(longest) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS_PER_MESSAGE * messages


# --- Pre-flight check and CLI --------------------------------------------------------------------------------------


def plan_recipe(recipe, *, prompt_tokens=None, ppo=None, **workload_kwargs) -> MemoryPlan:
    """The plan of a validated `Recipe` (its data gives the prompt length; a PPO config implies the critic)."""
    ppo = hasattr(recipe.training, "vf_coef") if ppo is None else ppo
    shape = resolve_shape(recipe.model.model_name_or_path, recipe.args.build_tiny_model)
    if prompt_tokens is None:
        built = recipe.args.build_tiny_model or Path(recipe.model.model_name_or_path).is_dir()
        prompts = recipe.dataset[recipe.args.dataset_train_split]["prompt"]
        prompt_tokens = estimate_prompt_tokens(prompts, recipe.model.model_name_or_path if built else None)
    return plan_memory(workload_from_config(recipe.training, recipe.model, shape, prompt_tokens, ppo=ppo, **workload_kwargs))


def check_memory_budget(recipe, free_bytes: float | None = None, stop: bool = False) -> MemoryPlan | None:
    """Before any weights load: estimate this process's peak and compare it with its GPU's free memory.

    Free memory is `torch.cuda.mem_get_info` on this process's device unless given. Over budget it prints the plan
    and remedies, and with `stop` raises `ConfigError("memory_budget", ...)` so the run ends now, not at the OOM
    minutes in. Returns the plan; None when there is nothing to compare (CPU run) or the model's shape is unknown.
    """
    import torch

    training = recipe.training
    total_bytes = None
    if free_bytes is None:
        if training.use_cpu or not torch.cuda.is_available():
            return None
        free_bytes, total_bytes = torch.cuda.mem_get_info(training.device)
    try:
        plan = plan_recipe(recipe, total_bytes=total_bytes)
    except ConfigError as err:
        print(f"[memory] check skipped: {err}", flush=True)
        return None
    fits = plan.peak <= free_bytes
    if not fits or training.local_process_index == 0:
        print(f"[memory] estimated peak {gib(plan.peak)} GiB per GPU, {gib(free_bytes)} GiB free", flush=True)
    if not fits:
        print(format_plan(plan, free_bytes), flush=True)
        if stop:
            raise ConfigError("memory_budget", f"estimated peak {gib(plan.peak)} GiB exceeds the {gib(free_bytes)} GiB "
                                               "free; apply a remedy above, or set memory_budget: warn to try anyway")
    return plan


def main(argv: list[str] | None = None) -> MemoryPlan:
    parser = argparse.ArgumentParser(
        description="Estimate a recipe's peak GPU memory, part by part (loads nothing).", allow_abbrev=False,
        epilog="Other arguments (--config X.yaml, --field value) are the recipe's, as for recipes/grpo.py.")
    parser.add_argument("--free_gib", type=float, help="free GPU memory to compare with (default: this GPU's)")
    parser.add_argument("--total_gib", type=float, help="total GPU memory, for vLLM colocate's reserved fraction")
    parser.add_argument("--accelerate_config", help="an accelerate_configs/*.yaml: its processes and ZeRO stage")
    parser.add_argument("--num_processes", type=int, help="processes (GPUs) the run is launched on")
    parser.add_argument("--zero_stage", type=int, choices=(0, 1, 2, 3), help="DeepSpeed ZeRO stage (0 = DDP/none)")
    parser.add_argument("--ppo", action="store_true", help="plan PPO (value model); implied by a PPO recipe")
    parser.add_argument("--prompt_tokens", type=int, help="longest prompt in tokens (default: from the data)")
    opts, rest = parser.parse_known_args(argv)

    import torch

    from rlvr.config import parse_args, validate
    from rlvr.kl import KLEstimatorConfig
    from rlvr.recipes_index import script_classes

    cuda = torch.cuda.is_available()
    # dry_run: validate without requiring the weights; TrainingArguments rejects bf16 on a machine without a GPU
    # unless use_cpu is set. The planner loads and trains nothing either way.
    classes = script_classes(rest[rest.index("--config") + 1]) if "--config" in rest[:-1] else None
    config_cls = (classes[1] if classes else None) or KLEstimatorConfig  # PPO's YAML parses with PPOConfig, etc.
    args, training, model_args = parse_args(rest + ["--dry_run", "true"] + ([] if cuda else ["--use_cpu", "true"]), config_cls)
    recipe = validate(args, training, model_args)
    processes, stage = launch_shape(opts.accelerate_config) if opts.accelerate_config else (None, None)
    free = opts.free_gib * GIB if opts.free_gib is not None else None
    total = opts.total_gib * GIB if opts.total_gib is not None else None
    if cuda and (free is None or total is None):
        cuda_free, cuda_total = torch.cuda.mem_get_info()
        free, total = free if free is not None else cuda_free, total if total is not None else cuda_total
    plan = plan_recipe(recipe, prompt_tokens=opts.prompt_tokens, num_processes=opts.num_processes or processes,
                       zero_stage=opts.zero_stage if opts.zero_stage is not None else stage,
                       ppo=opts.ppo or None, total_bytes=total)
    print(format_plan(plan, free))
    return plan


if __name__ == "__main__":
    cli(main)
