"""Bytes, term by term: one pure function per memory term, whose docstring says what it counts.

The counts follow Qwen3's modeling code in transformers 5 and TRL 1.16's GRPOTrainer, and assume SDPA or flash
attention (no seq x seq matrix is kept). `benchmarks/gpu_check.py` measures them on a GPU.
"""

from __future__ import annotations

from rlvr.planning.shapes import GIB, ModelShape, linear_shapes

TOKEN_TILE, VOCAB_TILE = 4096, 32768  # trl.kernels.chunked_logprob: TOKEN_CHUNK_SIZE, _CHUNKED_LOGPROB_CHUNK_SIZE
MARGIN_BYTES = GIB // 2

# The caching allocator's reserved-but-unallocated memory while sampling, as a share of the KV cache: the four H200
# runs at a 6.9 GiB cap that calibrate it hold for a share between 0.422 and 0.447 (docs/measurements/gpu-h200.md),
# measured without expandable segments; benchmarks/gpu_check.py's fit section measures it with them.
GENERATION_SLACK = 0.44


def parameter_tensors(s: ModelShape) -> list[int]:
    """Every weight tensor's size: per layer the seven projections, Qwen3's per-head q/k RMSNorms and two RMSNorms;
    then the embedding, the final norm, and an LM head unless it is tied to the embedding."""
    layer = [a * b for a, b in linear_shapes(s).values()] + [s.head_dim] * 2 + [s.hidden] * 2
    head = [] if s.tie_word_embeddings else [s.vocab * s.hidden]
    return layer * s.layers + [s.vocab * s.hidden, s.hidden] + head


def parameter_count(s: ModelShape) -> int:
    return sum(parameter_tensors(s))


def lora_tensors(s: ModelShape, r: int, targets: tuple[str, ...]) -> list[int]:
    """Trainable LoRA tensors: A (r x in) and B (out x r) for each targeted projection of every layer."""
    shapes = linear_shapes(s)
    return [size for t in targets for size in (r * shapes[t][0], shapes[t][1] * r)] * s.layers


def lora_parameter_count(s: ModelShape, r: int, targets: tuple[str, ...]) -> int:
    return sum(lora_tensors(s, r, targets))


BNB_BLOCK = 64  # bitsandbytes 4-bit blocksize: one absmax scale per 64 weights
BNB_NESTED_BLOCK = 256  # double quantization: the 8-bit scales get one fp32 scale per 256 of them


def quantized_weight_bytes(s: ModelShape, bits: int, double_quant: bool, other_bytes: int) -> float:
    """Weights loaded by bitsandbytes (transformers' `BitsAndBytesConfig`): only the decoder's linear projections
    are quantized; the embedding (tied LM head), an untied LM head (transformers keeps `lm_head` unconverted) and
    the norms stay in the compute dtype (`other_bytes`).

    - 4-bit (NF4/FP4): half a byte per weight plus one fp32 absmax per 64-weight block (1/16 B per weight), or with
      double quantization an 8-bit absmax plus an fp32 scale per 256 blocks (~1/63 B per weight);
    - 8-bit (LLM.int8): one byte per weight plus an fp32 scale per output row.
    """
    shapes = linear_shapes(s)
    linear = s.layers * sum(a * b for a, b in shapes.values())
    if bits == 4:
        scale = (1 + 4 / BNB_NESTED_BLOCK) / BNB_BLOCK if double_quant else 4 / BNB_BLOCK
        quantized = linear * (0.5 + scale)
    elif bits == 8:
        quantized = linear + s.layers * sum(out for _, out in shapes.values()) * 4
    else:
        raise ValueError(f"bitsandbytes loads 4 or 8 bits, got {bits}")
    return quantized + (parameter_count(s) - linear) * other_bytes


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


# torchao's low-bit AdamW (transformers' `optim: adamw_torch_8bit / adamw_torch_4bit`): bits per state value, and the
# smallest tensor it quantizes (smaller ones, and those not divisible by the block, keep states in the parameter dtype)
LOW_BIT_STATES = {"adamw_torch_8bit": (8, 256), "adamw_torch_4bit": (4, 128)}  # optim -> (bits, default block_size)
TORCHAO_MIN_QUANTIZED = 4096
FULL_PRECISION_ADAMW = ("adamw_torch", "adamw_torch_fused")


def optimizer_state_bytes(tensor_sizes, param_bytes: int, optim: str, block_size: int | None = None) -> float:
    """AdamW's two moments for tensors of `tensor_sizes` elements, as the optimizer allocates them.

    torch's AdamW (HF's default `adamw_torch_fused`): `zeros_like(p)` twice, in the parameter's dtype. torchao's
    `AdamW8bit` / `AdamW4bit` (`optim: adamw_torch_8bit / adamw_torch_4bit`): each moment as 8 or 4 bits per value
    plus one fp32 scale per block of `block_size` values (`optim_args: block_size=N`), for tensors of at least 4096
    values that the block divides; other tensors (norm weights) keep `zeros_like(p)`."""
    if optim in FULL_PRECISION_ADAMW:
        return 2 * param_bytes * sum(tensor_sizes)
    if optim not in LOW_BIT_STATES:
        raise ValueError(f"optimizer {optim!r}: the planner knows {FULL_PRECISION_ADAMW + tuple(LOW_BIT_STATES)}")
    bits, default_block = LOW_BIT_STATES[optim]
    block = block_size or default_block
    total = 0.0
    for n in tensor_sizes:
        quantized = n >= TORCHAO_MIN_QUANTIZED and n % block == 0
        total += 2 * (n * (bits / 8 + 4 / block) if quantized else n * param_bytes)
    return total


def generation_slack_bytes(kv_bytes: float) -> float:
    """Reserved but unallocated memory while sampling: every decoding step re-allocates each layer's keys and values
    one token longer (transformers' DynamicCache concatenates), so the blocks it frees never fit the next request;
    `GENERATION_SLACK` x the KV cache, calibrated on the H200 runs (see above)."""
    return GENERATION_SLACK * kv_bytes


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


def activation_bytes(
    s: ModelShape, tokens: int, act_bytes: int, checkpointing: bool, frozen: bool = False, extra_per_layer: int = 0
) -> int:
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
