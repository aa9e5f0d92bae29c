"""The memory planner against CUDA: random-weight models with Qwen3 shapes (built from the shape, no download) run one
GRPO-sized training step and one generation batch; the planner's prediction per phase is printed beside
`torch.cuda.max_memory_allocated`. Without CUDA it says so and exits 0.

    python benchmarks/memory_check.py                                 # Qwen3-0.6B full, Qwen3-1.7B LoRA (the configs)
    python benchmarks/memory_check.py --models Qwen/Qwen3-1.7B --modes full lora --completion_tokens 256

The training phase is measured at its steady-state peak: the second micro-batch of an accumulation cycle (gradients of
the first already held) and the optimizer step, after a warm-up step has allocated AdamW's states. Predictions leave
out the planner's fixed margin (CUDA context, fragmentation), which the allocator does not count.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import torch

from rlvr.memory_plan import GIB, KNOWN_SHAPES, LINEAR_MODULES, MARGIN_BYTES, Workload, plan_memory


def build_model(shape, lora: bool, checkpointing: bool, device: str):
    """A random-weight bf16 Qwen3 of `shape`, patched with TRL's fused LM head as GRPOTrainer does."""
    from transformers import AutoModelForCausalLM, Qwen3Config
    from trl.trainer.utils import add_fused_lm_head

    config = Qwen3Config(hidden_size=shape.hidden, num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim,
                         intermediate_size=shape.intermediate, vocab_size=shape.vocab,
                         tie_word_embeddings=shape.tie_word_embeddings, pad_token_id=0, eos_token_id=1)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    add_fused_lm_head(model, temperature=0.6, outputs=("log_probs", "entropy"))
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05,
                                                 target_modules=list(LINEAR_MODULES)))
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if lora:
            model.enable_input_require_grads()
    return model.train()


def micro_batch(w: Workload, vocab: int, device: str):
    """Token ids, a left-padded attention mask and labels that score only the completion, as TRL builds them."""
    length = w.prompt_tokens + w.completion_tokens
    ids = torch.randint(2, vocab, (w.micro_batch, length), device=device)
    mask = torch.ones_like(ids)
    mask[-1, : w.prompt_tokens // 4] = 0  # a shorter prompt, left-padded
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, : w.prompt_tokens] = -100
    return ids, mask, labels


def train_step(model, optimizer, w: Workload, vocab: int, device: str, accumulate: int = 2) -> None:
    for _ in range(accumulate):
        ids, mask, labels = micro_batch(w, vocab, device)
        with torch.autocast(device, dtype=torch.bfloat16):
            out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        (-out.log_probs.sum() / (labels != -100).sum()).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@torch.no_grad()
def generate(model, w: Workload, vocab: int, device: str, checkpointing: bool) -> None:
    """Sample every sequence of the generation batch to full length (min_new_tokens), cache on, as TRL does."""
    if checkpointing:
        model.gradient_checkpointing_disable()
    prompts = torch.randint(2, vocab, (w.generation_sequences, w.prompt_tokens), device=device)
    model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True, temperature=0.6,
                   top_p=0.95, top_k=20, max_new_tokens=w.completion_tokens, min_new_tokens=w.completion_tokens,
                   use_cache=True, pad_token_id=0, eos_token_id=1)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def peak_since(reset: bool = False) -> float:
    if not torch.cuda.is_available():
        return 0.0
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    if reset:
        torch.cuda.reset_peak_memory_stats()
    return peak


def measure(w: Workload, device: str = "cuda") -> dict[str, tuple[float, float]]:
    """{phase: (predicted bytes, measured bytes)} for `weights + optimizer`, `train` and `generate`."""
    plan = plan_memory(w)
    always = plan.phase("always") - MARGIN_BYTES
    lora = w.lora_r is not None
    model = build_model(w.shape, lora, w.gradient_checkpointing, device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-6, fused=device == "cuda")
    train_step(model, optimizer, w, w.shape.vocab, device, accumulate=1)  # allocates AdamW's states
    peak_since(reset=True)
    resident = torch.cuda.memory_allocated() if device == "cuda" else 0.0
    train_step(model, optimizer, w, w.shape.vocab, device)
    train = peak_since(reset=True)
    generate(model, w, w.shape.vocab, device, w.gradient_checkpointing)
    return {"weights + optimizer": (always, resident), "train": (always + plan.phase("train"), train),
            "generate": (always + plan.phase("generate"), peak_since())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B"], choices=list(KNOWN_SHAPES))
    parser.add_argument("--modes", nargs="+", default=None, choices=["full", "lora"],
                        help="default: 0.6B full and 1.7B LoRA, the two configs that fit 6.9 GiB")
    parser.add_argument("--micro_batch", type=int, default=2)
    parser.add_argument("--prompt_tokens", type=int, default=200)
    parser.add_argument("--completion_tokens", type=int, default=512)
    parser.add_argument("--generation_sequences", type=int, default=32)
    parser.add_argument("--no_checkpointing", action="store_true")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("memory_check: no CUDA device here; nothing to measure (the planner itself runs anywhere: "
              "python -m rlvr.memory_plan --config ...)")
        return 0

    print(f"{'model':<18}{'mode':<6}{'phase':<22}{'predicted GiB':>14}{'measured GiB':>14}{'ratio':>8}")
    for name in args.models:
        modes = args.modes or (["full"] if name.endswith("0.6B") else ["lora"])
        for mode in modes:
            w = Workload(shape=KNOWN_SHAPES[name], weight_bytes=2, act_bytes=2, micro_batch=args.micro_batch,
                         prompt_tokens=args.prompt_tokens, completion_tokens=args.completion_tokens,
                         generation_sequences=args.generation_sequences, num_generations=8,
                         gradient_checkpointing=not args.no_checkpointing)
            if mode == "lora":
                w = replace(w, lora_r=16, lora_targets=LINEAR_MODULES, lora_dropout=0.05)
            try:
                results = measure(w)
            except torch.cuda.OutOfMemoryError:
                print(f"{name:<18}{mode:<6}OOM (planner: {plan_memory(w).peak / GIB:.2f} GiB with margin)")
                results = {}
            for phase, (predicted, measured) in results.items():
                print(f"{name:<18}{mode:<6}{phase:<22}{predicted / GIB:>14.2f}{measured / GIB:>14.2f}"
                      f"{measured / predicted:>8.2f}")
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
