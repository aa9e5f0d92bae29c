"""The plan: every part of one process's peak by phase, the remedies over budget, and the pre-flight check.

The peak is `always + max(train, generate)`. TRL samples at the start of an accumulation cycle, after the Trainer has
freed the gradients (`zero_grad(set_to_none=True)`) and while no activations exist; weights, optimizer states and a
colocated vLLM pool persist through both phases. They are estimates to decide before a run, not allocator traces.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch

from rlvr.inputs import ConfigError
from rlvr.planning.shapes import (
    GIB,
    KNOWN_SHAPES,
    LINEAR_MODULES,
    ModelShape,
    Workload,
    estimate_prompt_tokens,
    resolve_shape,
    workload_from_config,
)
from rlvr.planning.terms import (
    LOW_BIT_STATES,
    MARGIN_BYTES,
    activation_bytes,
    ddp_bucket_bytes,
    fused_head_bytes,
    generation_slack_bytes,
    kv_cache_bytes,
    lora_activation_bytes,
    lora_tensors,
    materialized_logits_bytes,
    optimizer_state_bytes,
    parameter_count,
    parameter_tensors,
    quantized_weight_bytes,
    sampling_buffers_bytes,
    training_state_bytes,
)


@dataclass(frozen=True)
class Part:
    name: str
    phase: str  # "always", "train" or "generate"
    bytes: float
    note: str = ""
    from_second_cycle: bool = False  # allocated at the first optimizer step, after the first generation


@dataclass(frozen=True)
class MemoryPlan:
    workload: Workload
    parts: tuple[Part, ...]

    def phase(self, name: str, first_cycle: bool = False) -> float:
        return sum(p.bytes for p in self.parts if p.phase == name and not (first_cycle and p.from_second_cycle))

    @property
    def peak(self) -> float:
        """A whole run's peak: the second generation cycle on, when the optimizer states exist beside the cache."""
        return self.phase("always") + max(self.phase("train"), self.phase("generate"))

    @property
    def first_generation(self) -> float:
        """The first generation's peak: before the first optimizer step, so without the optimizer states."""
        return self.phase("always", first_cycle=True) + self.phase("generate")

    @property
    def bound(self) -> str:
        return "train" if self.phase("train") >= self.phase("generate") else "generate"


def plan_memory(w: Workload) -> MemoryPlan:
    """Every part of one process's peak, by phase: what persists, what training adds, what sampling adds."""
    parts = [*weight_parts(w), *training_parts(w), *generation_parts(w)]
    parts.append(Part("margin", "always", MARGIN_BYTES, "CUDA context, cuBLAS workspaces"))
    return MemoryPlan(w, tuple(parts))


def trainable_tensors(w: Workload) -> list[int]:
    s = w.shape
    return lora_tensors(s, w.lora_r, w.lora_targets) if w.lora_r is not None else parameter_tensors(s)


def trainable_bytes(w: Workload) -> int:
    """Bytes per trainable weight: LoRA adapters are fp32, except on a quantized base, where TRL 1.16's GRPOTrainer
    casts them to bf16 (QLoRA's recipe); full fine-tuning trains the loaded weights in their dtype."""
    return (w.weight_bytes if w.quant_bits else 4) if w.lora_r is not None else w.weight_bytes


def weight_parts(w: Workload) -> list[Part]:
    """What persists through both phases: weights, adapters, optimizer states, DDP's buckets, a reference model."""
    s, lora, world = w.shape, w.lora_r is not None, w.num_processes
    total, shard = parameter_count(s), world if w.zero_stage == 3 else 1
    tensors, param_bytes = trainable_tensors(w), trainable_bytes(w)
    trainable = sum(tensors)
    if w.quant_bits:
        nested = " (double quant)" if w.double_quant else ""
        weights = quantized_weight_bytes(s, w.quant_bits, w.double_quant, w.weight_bytes)
        note = f"{total / 1e9:.2f}B, linear layers {w.quant_bits}-bit{nested}, rest x {w.weight_bytes} B"
    else:
        sharded = f", ZeRO-{w.zero_stage} over {world}" if w.zero_stage else ""
        weights, note = total * w.weight_bytes / shard, f"{total / 1e9:.2f}B x {w.weight_bytes} B{sharded}"
    parts = [Part("weights", "always", weights, note)]
    if lora:
        dtype = "bf16" if param_bytes == 2 else "fp32"
        note = f"r={w.lora_r} on {len(w.lora_targets)} projections: {trainable / 1e6:.1f}M {dtype}"
        parts.append(Part("LoRA adapters", "always", trainable * param_bytes / shard, note))
    parts.append(optimizer_part(w, tensors, param_bytes))
    if buckets := ddp_bucket_bytes(trainable, param_bytes, world, w.zero_stage):
        parts.append(Part("DDP gradient buckets", "always", buckets, "the reducer's flat copy"))
    if w.beta > 0 and not lora:  # PPO too loads a reference only for its KL penalty, i.e. when beta > 0
        parts.append(Part("reference model", "always", total * w.weight_bytes / shard, f"beta={w.beta}"))
    return parts


def optimizer_part(w: Workload, tensors: list[int], param_bytes: int) -> Part:
    """AdamW's states as the chosen optimizer allocates them: torch's and torchao's at the first optimizer step (after
    the first generation), DeepSpeed's under ZeRO when it wraps the model."""
    trainable = sum(tensors)
    if w.zero_stage:
        _, states = training_state_bytes(trainable, param_bytes, w.zero_stage, w.num_processes)
        note = f"DeepSpeed AdamW m+v{' + fp32 master' if param_bytes < 4 else ''}, {trainable / 1e6:.0f}M trainable"
        return Part("optimizer states", "always", states, note)  # DeepSpeed allocates them when it wraps the model
    try:
        states = optimizer_state_bytes(tensors, param_bytes, w.optim, w.optim_block)
    except ValueError as err:
        raise ConfigError("optim", str(err)) from None
    low_bit = w.optim in LOW_BIT_STATES
    kind = f"{LOW_BIT_STATES[w.optim][0]}-bit m+v (torchao)" if low_bit else f"m+v x {param_bytes} B"
    note = f"{w.optim}: {kind}, {trainable / 1e6:.0f}M trainable"
    return Part("optimizer states", "always", states, note, from_second_cycle=True)


def training_parts(w: Workload) -> list[Part]:
    """What the training phase adds: gradients, saved activations, the LM head's tiles and gradient, PPO's critic."""
    s, lora = w.shape, w.lora_r is not None
    param_bytes = trainable_bytes(w)
    grads, _ = training_state_bytes(sum(trainable_tensors(w)), param_bytes, w.zero_stage, w.num_processes)
    parts = [Part("gradients", "train", grads, f"{param_bytes} B per trainable weight")]
    tokens, scored = w.micro_batch * (w.prompt_tokens + w.completion_tokens), w.micro_batch * w.completion_tokens
    extra = lora_activation_bytes(s, w.lora_r, w.lora_targets, w.lora_dropout, w.act_bytes) if lora else 0
    acts = activation_bytes(s, tokens, w.act_bytes, w.gradient_checkpointing, lora, extra)
    other = activation_bytes(s, tokens, w.act_bytes, not w.gradient_checkpointing, lora, extra)
    ckpt, other_side = ("checkpointed", "without") if w.gradient_checkpointing else ("no checkpointing", "with")
    note = (
        f"{ckpt}, {w.micro_batch} x {w.prompt_tokens + w.completion_tokens} tokens; {other / GIB:.2f} GiB {other_side}"
    )
    parts.append(Part("activations", "train", acts, note))
    materialized = materialized_logits_bytes(s, scored)
    # PPO's policy log-probs go through the same TRL code as GRPO's; its critic's head is a scalar.
    head = fused_head_bytes(s, scored, w.act_bytes, head_trained=not lora, param_bytes=w.weight_bytes)
    parts.append(Part("LM head (fused)", "train", head, f"{materialized / GIB:.2f} GiB if logits were materialized"))
    if w.weight_bytes == 4 and w.act_bytes == 2:
        total = parameter_count(s)
        parts.append(Part("autocast weight copies", "train", total * 2, "16-bit casts of fp32 weights in forward"))
    if w.ppo:
        shard = w.num_processes if w.zero_stage == 3 else 1
        value = parameter_count(s) - (0 if s.tie_word_embeddings else s.vocab * s.hidden)
        v_grads, v_opt = training_state_bytes(value, w.weight_bytes, w.zero_stage, w.num_processes)
        v_acts = activation_bytes(s, tokens, w.act_bytes, w.gradient_checkpointing)
        parts += [
            Part("value model", "always", value * w.weight_bytes / shard + v_opt, "PPO: full copy + optimizer"),
            Part("value model grads + activations", "train", v_grads + v_acts, "PPO critic's backward"),
        ]
    return parts


def generation_parts(w: Workload) -> list[Part]:
    """What sampling adds: vLLM's pool, or transformers' KV cache for the sequences sampled at once, the sampling
    buffers and the allocator's slack while the cache grows; ZeRO-3's gathered weights."""
    s, parts = w.shape, []
    if w.use_vllm and w.vllm_mode == "colocate":
        if w.total_bytes is None:
            raise ConfigError("--total_gib", "vLLM colocate reserves a fraction of total GPU memory: give the total")
        pool = w.vllm_utilization * w.total_bytes
        note = f"vllm_gpu_memory_utilization {w.vllm_utilization} x {w.total_bytes / GIB:.1f} GiB"
        parts.append(Part("vLLM pool", "generate" if w.vllm_sleep else "always", pool, note))
    elif not w.use_vllm:
        seq_len, layers, n = (
            w.prompt_tokens + w.completion_tokens,
            (2 if w.offloaded_cache else s.layers),
            w.sequences_at_once,
        )
        kv = kv_cache_bytes(s, n, seq_len, w.weight_bytes, layers)  # sampling runs outside autocast
        growth = kv - kv_cache_bytes(s, n, w.prompt_tokens, w.weight_bytes, layers)
        pieces = "" if n == w.generation_sequences else f" of {w.generation_sequences} at once (in pieces)"
        offloaded = " (offloaded)" if w.offloaded_cache else ""
        note = f"{n} sequences{pieces} x {seq_len} tokens x {layers} layers{offloaded} x {s.kv_heads} KV heads x "
        parts += [
            Part("KV cache", "generate", kv, f"{note}{s.head_dim} x 2 x {w.weight_bytes} B"),
            Part(
                "sampling buffers",
                "generate",
                sampling_buffers_bytes(s, n, w.prompt_tokens, growth, w.act_bytes),
                "fp32 logits + sort buffers (prefill counted if larger)",
            ),
            Part("allocator slack", "generate", generation_slack_bytes(kv), "the growing cache's freed blocks"),
        ]
    if w.zero_stage == 3 and w.ds3_gather_for_generation and not w.use_vllm:
        gathered = parameter_count(s) * w.weight_bytes * (1 - 1 / w.num_processes)
        parts.append(
            Part("ZeRO-3 gather to generate", "generate", gathered, "full weights on every GPU while sampling")
        )
    return parts


def generation_chunk_for(w: Workload, free_bytes: float) -> int | None:
    """The most sequences to sample at once for the whole run to fit `free_bytes`: a multiple of the group size G
    (a group is sampled together), else fewer; None when the whole batch fits or no piece size does."""
    if w.use_vllm or plan_memory(w).peak <= free_bytes:
        return None
    g, total = w.num_generations, w.generation_sequences
    sizes = sorted({*range(g, total, g), *range(1, min(g, total))}, reverse=True)
    return next((n for n in sizes if plan_memory(replace(w, generation_chunk=n)).peak <= free_bytes), None)


# --- Remedies, in order of value -----------------------------------------------------------------------------------


LORA = {"lora_r": 16, "lora_targets": LINEAR_MODULES, "lora_dropout": 0.05}  # the LoRA the remedies offer


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
    if not w.use_vllm and w.sequences_at_once > 1:
        half = w.sequences_at_once // 2
        text = f"2. generation_chunk_size {half}: sample {half} of {w.generation_sequences} sequences at once"
        out.append((f"{text} (same algorithm, slower sampling)", replace(w, generation_chunk=half)))
    if w.micro_batch > 1:
        half = w.micro_batch // 2
        text = f"2. per_device_train_batch_size {w.micro_batch} -> {half}, double gradient_accumulation_steps"
        out.append((f"{text} (same algorithm, slower)", replace(w, micro_batch=half)))
    if w.completion_tokens >= 128:
        out.append(
            (
                f"2. max_completion_length {w.completion_tokens} -> {w.completion_tokens // 2}",
                replace(w, completion_tokens=w.completion_tokens // 2),
            )
        )
    prompts = w.generation_sequences // w.num_generations
    if prompts >= 2:
        text = f"2. prompts per step {prompts} -> {prompts // 2} per process (generation_batch_size halved"
        out.append(
            (
                f"{text}, G={w.num_generations} kept)",
                replace(w, generation_sequences=(prompts // 2) * w.num_generations),
            )
        )
    if not w.gradient_checkpointing:
        out.append(("3. gradient_checkpointing: true", replace(w, gradient_checkpointing=True)))
    if w.beta > 0 and w.lora_r is None:
        out.append(("4. beta: 0 (no reference model)", replace(w, beta=0.0)))
    if w.lora_r is None:
        out.append(("5. LoRA: use_peft true, lora_r 16, all-linear (lr ~10x higher)", replace(w, **LORA)))
    if w.quant_bits is None:
        lora = {} if w.lora_r is not None else LORA
        out.append(
            (
                "5. QLoRA: load_in_4bit true with LoRA (base weights 4-bit; slower matmuls)",
                replace(w, quant_bits=4, **lora),
            )
        )
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
    kind = f"Q{kind} ({w.quant_bits}-bit base)" if w.quant_bits else kind
    launch = f"{w.num_processes} process(es)" + (f", ZeRO-{w.zero_stage}" if w.zero_stage else "")
    lines = [
        f"memory plan: {w.shape.name}, {kind}, {'PPO' if w.ppo else 'GRPO'}, {launch}; per GPU:",
        f"  {'part':<34}{'phase':<10}{'GiB':>7}  detail",
    ]
    lines += [f"  {p.name:<34}{p.phase:<10}{gib(p.bytes):>7}  {p.note}" for p in plan.parts]
    always, train, generate = (plan.phase(x) for x in ("always", "train", "generate"))
    lazy = any(p.from_second_cycle for p in plan.parts)  # states made at the first step: cycle 1 is lighter
    first = f"; the first generation (no optimizer states yet) {gib(plan.first_generation)} GiB" if lazy else ""
    lines.append(
        f"  peak = always {gib(always)} + max(train {gib(train)}, generate {gib(generate)}) "
        f"= {gib(plan.peak)} GiB ({plan.bound}-bound), from the second generation cycle on{first}"
    )
    if free_bytes is not None:
        lines.append(f"  free {gib(free_bytes)} GiB: {verdict(plan, free_bytes)}")
        if plan.peak > free_bytes:
            lines.append("  remedies, in order of value (peak with that change alone):")
            for text, changed in remedies(w):
                peak = plan_memory(changed).peak
                lines.append(f"    {text}: {gib(peak)} GiB{'  fits' if peak <= free_bytes else ''}")
    return "\n".join(lines)


def verdict(plan: MemoryPlan, free_bytes: float) -> str:
    """'fits a whole run' only when the second generation cycle fits; otherwise how short, and the term that breaks
    it: the optimizer states when only the first cycle fits, else the largest part that persists and the largest part
    of the phase that sets the peak."""
    short = plan.peak - free_bytes
    if short <= 0:
        return f"fits a whole run, {gib(-short)} GiB to spare"
    states = next((p for p in plan.parts if p.from_second_cycle), None)
    if states is not None and plan.first_generation <= free_bytes:
        return (
            f"fits the first generation cycle only, {gib(short)} GiB short from the second on: "
            f"the {states.name} ({gib(states.bytes)} GiB) exist from the first optimizer step"
        )
    largest = [
        max((p for p in plan.parts if p.phase == phase), key=lambda p: p.bytes) for phase in ("always", plan.bound)
    ]
    terms = " and ".join(f"{p.name} ({gib(p.bytes)} GiB, {p.phase})" for p in largest)
    return f"DOES NOT FIT, {gib(short)} GiB short; the largest terms: {terms}"


# --- Pre-flight check and CLI --------------------------------------------------------------------------------------


def plan_recipe(recipe, *, prompt_tokens=None, ppo=None, free_bytes=None, **workload_kwargs) -> MemoryPlan:
    """The plan of a validated `Recipe` (its data gives the prompt length; a PPO config implies the critic). With
    `free_bytes` and no `generation_chunk_size`, the generation is planned in the pieces the runner would choose."""
    ppo = hasattr(recipe.training, "vf_coef") if ppo is None else ppo
    shape = resolve_shape(recipe.model.model_name_or_path, recipe.args.build_tiny_model)
    if prompt_tokens is None:
        built = recipe.args.build_tiny_model or Path(recipe.model.model_name_or_path).is_dir()
        prompts = recipe.dataset[recipe.args.dataset_train_split]["prompt"]
        prompt_tokens = estimate_prompt_tokens(prompts, recipe.model.model_name_or_path if built else None)
    w = workload_from_config(recipe.training, recipe.model, shape, prompt_tokens, ppo=ppo, **workload_kwargs)
    if free_bytes is not None and w.generation_chunk is None:
        w = replace(w, generation_chunk=generation_chunk_for(w, free_bytes))
    return plan_memory(w)


def check_memory_budget(recipe, free_bytes: float | None = None, stop: bool = False) -> MemoryPlan | None:
    """Before any weights load: this process's estimated peak over a whole run against its GPU's free memory
    (`mem_get_info` unless given). Without a `generation_chunk_size`, it sets the one the plan needs (the whole batch
    when that fits). Over budget it prints the plan and remedies, and with `stop` ends the run now, not at the OOM
    minutes in. Returns the plan; None when there is nothing to compare (CPU run) or the model's shape is unknown."""
    training = recipe.training
    total_bytes = None
    if free_bytes is None:
        if training.use_cpu or not torch.cuda.is_available():
            return None
        free_bytes, total_bytes = torch.cuda.mem_get_info(training.device)
    try:
        plan = plan_recipe(recipe, total_bytes=total_bytes, free_bytes=free_bytes)
    except ConfigError as err:
        print(f"[memory] check skipped: {err}", flush=True)
        return None
    w, fits = plan.workload, plan.peak <= free_bytes
    if w.generation_chunk and training.generation_chunk_size is None:
        training.generation_chunk_size = w.generation_chunk
        print(
            f"[memory] generation in pieces of {w.generation_chunk} of {w.generation_sequences} sequences "
            f"(generation_chunk_size), for the whole run to fit {gib(free_bytes)} GiB",
            flush=True,
        )
    if not fits or training.local_process_index == 0:
        print(f"[memory] estimated peak {gib(plan.peak)} GiB per GPU, {gib(free_bytes)} GiB free", flush=True)
    if not fits:
        print(format_plan(plan, free_bytes), flush=True)
        if stop:
            raise ConfigError(
                "memory_budget",
                f"estimated peak {gib(plan.peak)} GiB exceeds the {gib(free_bytes)} GiB "
                "free; apply a remedy above, or set memory_budget: warn to try anyway",
            )
    return plan


def generation_batch_for(shape: ModelShape, seq_len: int, free_bytes: float, kv_bytes: int, limit: int = 4096) -> int:
    """Sequences to sample at once so the KV cache and sampling buffers fill ~90% of `free_bytes` (memory left after
    the weights are loaded): evaluation batched to fill the device, sized by the same terms as the plan."""
    per_sequence = kv_cache_bytes(shape, 1, seq_len, kv_bytes) + sampling_buffers_bytes(shape, 1, 0, 0, kv_bytes)
    return int(max(1, min(limit, 0.9 * free_bytes // per_sequence)))
