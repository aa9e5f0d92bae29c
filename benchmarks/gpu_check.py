"""The GPU-side claims, checked on one GPU in at most ~8 minutes: one table, exit 0 only if every claim holds.

    python benchmarks/gpu_check.py                      # everything (needs CUDA)
    python benchmarks/gpu_check.py --dry_run            # what would run, with every planned figure (any machine)
    python benchmarks/gpu_check.py --sections memory fit --budget_gib 6.9 --tolerance 0.15

Three sections, every model a random-weight Qwen3 built from its published shape (no download, nothing to reach):

- memory: the planner (`rlvr.planning`) against `torch.cuda.max_memory_allocated` per phase, for Qwen3-0.6B and
  1.7B shapes (full fine-tuning and LoRA): resident weights + optimizer, one accumulation cycle's training peak, one
  generation batch. The training phase is measured at its steady state (the second micro-batch of a cycle, after a
  warm-up step allocated AdamW's states). Planned figures leave out the planner's fixed margin (CUDA context,
  fragmentation), which the allocator does not count.
- fit: `--steps` GRPO steps of each config shipped for a 6.9 GiB card, through the real runner, in a child process
  capped with `torch.cuda.set_per_process_memory_fraction` at `--budget_gib`. A run that hits the cap is rerun
  uncapped, so the table says by how much it misses. The model folder pairs the shape's random weights with the tiny
  byte tokenizer; the recipe's system prompt is cut so that its prompts are as many byte tokens as the planner
  estimates the real tokenizer makes, so KV cache and activations match the real run's.
- eval: `rlvr.analysis.evaluate` throughput (samples/s) on the Qwen3-0.6B config with transformers' generate, and with vLLM
  when it is importable.
- speed: training throughput (samples/s over the steps after the first, from the trainer's `time/total_s`, and
  seconds per 1,000 samples) of recipes/grpo.yaml (Qwen3-1.7B shape) uncapped, with transformers generation and with
  vLLM colocate (when importable). The fit section's runs report the same figures for the 0.6B and 4B QLoRA configs
  (in their notes), at the 6.9 GiB cap.

Exit status 0 only if every planned figure is within +-tolerance of the measured one and every 6.9 GiB config fits;
1 otherwise; 2 (one `error:` line) for bad flags or no CUDA device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine_load import measured_load  # noqa: E402
from rlvr.inputs import ArgumentParser, ConfigError, cli  # noqa: E402
from rlvr.planning import (  # noqa: E402
    GIB,
    KNOWN_SHAPES,
    LINEAR_MODULES,
    MARGIN_BYTES,
    ModelShape,
    Workload,
    estimate_prompt_tokens,
    plan_memory,
)

SECTIONS = ("memory", "fit", "eval", "speed")
FIT_CONFIGS = ("recipes/grpo_qwen3_0.6b_full.yaml", "recipes/grpo_qwen3_1.7b_lora.yaml",
               "recipes/grpo_qwen3_4b_qlora.yaml")
MEMORY_CASES = (("Qwen/Qwen3-0.6B", "full"), ("Qwen/Qwen3-1.7B", "full"), ("Qwen/Qwen3-1.7B", "lora"))
EVAL_CONFIG = "recipes/grpo_qwen3_0.6b_full.yaml"
SPEED_CONFIG = "recipes/grpo.yaml"
VLLM_COLOCATE = ["--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.3"]
RESULT_TAG = "GPU_CHECK_RESULT "


@dataclass
class Row:
    """One line of the table. `planned`/`measured` in bytes (None: not applicable or not measured); `fits` only for
    the fit section; `value` for throughput rows (samples/s), which have nothing planned to compare with."""

    section: str
    name: str
    phase: str
    planned: float | None = None
    measured: float | None = None
    fits: bool | None = None
    value: float | None = None
    note: str = ""

    def ratio(self) -> float | None:
        return self.measured / self.planned if self.planned and self.measured is not None else None


# --- Verdict and table (pure: tested on CPU) -----------------------------------------------------------------------


def failures(rows: list[Row], tolerance: float) -> list[str]:
    """Every broken claim, one line each: a planned figure off by more than `tolerance`, a config that does not fit,
    a planned figure that was never measured."""
    out = []
    for row in rows:
        label = f"{row.section} {row.name} {row.phase}"
        if row.planned is not None and row.measured is None:
            out.append(f"{label}: not measured ({row.note or 'no result'})")
        elif (ratio := row.ratio()) is not None and abs(ratio - 1) > tolerance:
            out.append(f"{label}: measured/planned {ratio:.2f}, outside 1 +- {tolerance:g}")
        if row.section == "fit" and row.fits is not True:
            out.append(f"{label}: does not fit{f' ({row.note})' if row.note else ''}")
    return out


def format_table(rows: list[Row]) -> str:
    """Section, name, phase, planned GiB, measured GiB, measured/planned, fits, throughput, note."""
    headers = ["section", "name", "phase", "planned GiB", "measured GiB", "ratio", "fits", "samples/s", "note"]

    def gib(value):
        return "-" if value is None else f"{value / GIB:.2f}"

    cells = [[r.section, r.name, r.phase, gib(r.planned), gib(r.measured),
              "-" if r.ratio() is None else f"{r.ratio():.2f}", "-" if r.fits is None else ("yes" if r.fits else "NO"),
              "-" if r.value is None else f"{r.value:.1f}", r.note] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


# --- Random-weight Qwen3 models from a shape -----------------------------------------------------------------------


def qwen3_config(shape: ModelShape, vocab: int | None = None):
    """A transformers Qwen3Config of `shape` (the vocabulary of the real model unless `vocab` is given)."""
    from transformers import Qwen3Config

    return Qwen3Config(hidden_size=shape.hidden, num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                       num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim,
                       intermediate_size=shape.intermediate, vocab_size=vocab or shape.vocab,
                       tie_word_embeddings=shape.tie_word_embeddings, max_position_embeddings=4096)


def write_random_model(shape: ModelShape, output_dir, device: str = "cpu") -> Path:
    """A model folder the runner and the evaluator load like a checkpoint: random bf16 weights of `shape` and the tiny
    byte tokenizer (ids the tokenizer lacks decode to nothing, so sampling and scoring work unchanged)."""
    import torch
    from rlvr.recipes.tiny.model import build_tokenizer
    from transformers import AutoModelForCausalLM, GenerationConfig

    tokenizer = build_tokenizer()
    config = qwen3_config(shape)
    config.eos_token_id, config.pad_token_id, config.bos_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id, None
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    output_dir = Path(output_dir)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def matched_system_prompt(prompts: list, target_tokens: int, template_tokens: int = 30) -> str | None:
    """The first characters of the recipe's system prompt such that, one byte per token, the longest prompt comes to
    about `target_tokens` (what the planner estimates the real tokenizer makes of it). `template_tokens` covers the
    chat markers and role names around the messages."""
    longest = max(prompts, key=lambda p: sum(len(m["content"]) for m in p))
    system = next((m["content"] for m in longest if m["role"] == "system"), None)
    if system is None:
        return None
    user = sum(len(m["content"].encode()) for m in longest if m["role"] != "system")
    return system[: max(1, target_tokens - user - template_tokens)]


def byte_token_recipe(config: str, model_dir, out_dir) -> Path:
    """A copy of the recipe YAML on the random model, with the system prompt cut to match the real token count."""
    import yaml

    from rlvr.training.config import load_recipe, validate

    recipe = validate(load_recipe(["--config", str(REPO / config), "--dry_run", "true", "--use_cpu", "true"]))
    raw = recipe.yaml  # `base:` resolved: the copy stands alone
    prompts = recipe.dataset[recipe.args.dataset_train_split]["prompt"]
    target = estimate_prompt_tokens(prompts)  # the planner's estimate for the real model (no local tokenizer)
    data = dict(raw["data"], system_prompt=matched_system_prompt(prompts, target))
    raw.update(model_name_or_path=str(model_dir), data=data, report_to="none", save_strategy="no",
               output_dir=str(Path(out_dir) / "run"))
    path = Path(out_dir) / Path(config).name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# --- Section 1: planner vs allocator, phase by phase ---------------------------------------------------------------


def memory_workload(name: str, mode: str, micro_batch=2, prompt_tokens=200, completion_tokens=512, sequences=32):
    """The shipped configs' batch shape (2 x (200 + 512) tokens per micro-batch, 32 sequences sampled) on a shape."""
    w = Workload(shape=KNOWN_SHAPES[name], weight_bytes=2, act_bytes=2, micro_batch=micro_batch,
                 prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, generation_sequences=sequences,
                 num_generations=8, gradient_checkpointing=True)
    return replace(w, lora_r=16, lora_targets=LINEAR_MODULES, lora_dropout=0.05) if mode == "lora" else w


def planned_phases(w: Workload) -> dict[str, float]:
    """What the allocator should report per phase: the plan without its fixed margin."""
    plan = plan_memory(w)
    always = plan.phase("always") - MARGIN_BYTES
    return {"weights + optimizer": always, "train": always + plan.phase("train"),
            "generate": always + plan.phase("generate")}


def build_training_model(shape: ModelShape, lora: bool, device: str):
    """A random-weight bf16 model of `shape`, patched with TRL's fused LM head as GRPOTrainer does, checkpointed."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    with torch.device(device):
        model = AutoModelForCausalLM.from_config(qwen3_config(shape), dtype=torch.bfloat16, attn_implementation="sdpa")
    add_fused_lm_head(model, temperature=0.6, outputs=("log_probs", "entropy"))
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=list(LINEAR_MODULES)))
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora:
        model.enable_input_require_grads()
    return model.train()


def train_cycle(model, optimizer, w: Workload, device: str, accumulate: int = 2) -> None:
    """One accumulation cycle: left-padded micro-batches scored on the completion only, as TRL builds them."""
    import torch

    for _ in range(accumulate):
        length = w.prompt_tokens + w.completion_tokens
        ids = torch.randint(2, w.shape.vocab, (w.micro_batch, length), device=device)
        mask = torch.ones_like(ids)
        mask[-1, : w.prompt_tokens // 4] = 0
        labels = ids.masked_fill(mask == 0, -100)
        labels[:, : w.prompt_tokens] = -100
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
            out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        (-out.log_probs.sum() / (labels != -100).sum()).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def measure_phases(w: Workload, device: str = "cuda") -> dict[str, float]:
    """max_memory_allocated per phase: resident after AdamW's states exist, a cycle's training peak, a full-length
    generation batch (min_new_tokens = max_new_tokens, cache on)."""
    import gc

    import torch

    gc.collect()  # the previous case's model sits in reference cycles (hooks): free it before reading the baseline
    torch.cuda.empty_cache()
    baseline = torch.cuda.memory_allocated()  # whatever this process still holds is not this case's
    model = build_training_model(w.shape, w.lora_r is not None, device)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6, fused=True)
    train_cycle(model, optimizer, w, device, accumulate=1)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    resident = torch.cuda.memory_allocated()
    train_cycle(model, optimizer, w, device)
    torch.cuda.synchronize()
    train = torch.cuda.max_memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    model.gradient_checkpointing_disable()
    prompts = torch.randint(2, w.shape.vocab, (w.generation_sequences, w.prompt_tokens), device=device)
    with torch.no_grad():
        model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True, temperature=0.6,
                       top_p=0.95, top_k=20, max_new_tokens=w.completion_tokens, min_new_tokens=w.completion_tokens,
                       use_cache=True, pad_token_id=0, eos_token_id=1)
    torch.cuda.synchronize()
    generate = torch.cuda.max_memory_allocated()
    del model, optimizer
    gc.collect()
    return {"weights + optimizer": resident - baseline, "train": train - baseline, "generate": generate - baseline}


def memory_rows(measure: bool) -> list[Row]:
    rows = []
    for name, mode in MEMORY_CASES:
        w = memory_workload(name, mode)
        planned, measured, note = planned_phases(w), {}, "" if measure else "pending a GPU run"
        if measure:
            import torch

            try:
                measured = measure_phases(w)
            except torch.cuda.OutOfMemoryError as err:
                note = f"OOM: {str(err).splitlines()[0][:60]}"
            torch.cuda.empty_cache()
        rows += [Row("memory", f"{name.split('/')[1]} {mode}", phase, planned[phase], measured.get(phase), note=note)
                 for phase in planned]
    return rows


# --- Section 2: the 6.9 GiB configs, GRPO steps under a memory cap ------------------------------------------------


def fit_one(work: Path, config: str, budget_gib: float | None, steps: int, extra: list[str] = ()) -> dict:
    """In a fresh process: the runner's GRPO steps on the random-weight model of the recipe's shape, capped at
    `budget_gib` (None: uncapped), `extra` flags on top. Returns planned (margin left out) and measured peak bytes,
    whether it ran, and its samples/s."""
    import torch

    from rlvr.planning import plan_recipe, resolve_shape
    from rlvr.training.config import load_recipe, validate
    from rlvr.training.runner import main as run_recipe

    model_args = validate(load_recipe(["--config", str(REPO / config), "--dry_run", "true"])).model
    model_dir = write_random_model(resolve_shape(model_args.model_name_or_path), work / "model", device="cuda")
    torch.cuda.empty_cache()
    recipe_path = byte_token_recipe(config, model_dir, work)
    argv = ["--config", str(recipe_path), "--max_steps", str(steps), "--print_rollouts", "false",
            "--memory_budget", "off", "--logging_steps", "1", *extra]
    planned = plan_recipe(validate(load_recipe(argv))).peak - MARGIN_BYTES
    if budget_gib is not None:
        torch.cuda.set_per_process_memory_fraction(budget_gib * GIB / torch.cuda.get_device_properties(0).total_memory)
    torch.cuda.reset_peak_memory_stats()
    start, error = time.perf_counter(), ""
    try:
        run_recipe(argv)
    except torch.cuda.OutOfMemoryError as err:
        error = "OOM: " + str(err).splitlines()[0][:80]
    return {"planned": planned, "measured": torch.cuda.max_memory_allocated(), "ok": not error, "error": error,
            "seconds": round(time.perf_counter() - start, 1), "steps": steps,
            "samples_per_s": None if error else samples_per_second(work / "run" / "metrics.jsonl")}


def samples_per_second(metrics_path: Path) -> float | None:
    """Generated samples per second of step time (`time/total_s`) over the steps after the first (its warm-up)."""
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    steps = [row for row in rows if "time/total_s" in row]
    if len(steps) < 2:
        return None
    return (steps[-1]["generated_samples"] - steps[0]["generated_samples"]) / sum(r["time/total_s"] for r in steps[1:])


def throughput_note(samples_per_s: float | None) -> str:
    return f"{1000 / samples_per_s:.0f} s per 1,000 samples" if samples_per_s else "no throughput figure"


def eval_one(work: Path, config: str, use_vllm: bool, num_prompts: int) -> dict:
    """In a fresh process: `rlvr.analysis.evaluate` on the random-weight model of the recipe's shape; samples/s."""
    import torch

    from rlvr.analysis.evaluate import evaluate
    from rlvr.planning import resolve_shape
    from rlvr.training.config import load_recipe, validate

    model_args = validate(load_recipe(["--config", str(REPO / config), "--dry_run", "true"])).model
    model_dir = write_random_model(resolve_shape(model_args.model_name_or_path), work / "model", device="cuda")
    torch.cuda.empty_cache()
    summary = evaluate(str(byte_token_recipe(config, model_dir, work)), num_prompts=num_prompts, num_samples=8,
                       ks=(1, 8), use_vllm=use_vllm, output=str(work / "eval.json"), show_progress=False)
    return {"samples_per_s": summary["samples_per_s"], "per_batch": summary["prompts_per_batch"]}


def child(args: list[str], timeout: float) -> dict:
    """Run one measurement in a fresh Python (its own CUDA context and memory cap); its last tagged line is the result."""
    command = [sys.executable, str(Path(__file__).resolve()), "--_child", json.dumps(args)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=max(timeout, 1), cwd=REPO,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                                   "WANDB_MODE": "disabled"})  # keep the caller's path: packages may live there
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s"}
    tagged = [line for line in done.stdout.splitlines() if line.startswith(RESULT_TAG)]
    if not tagged:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "error": f"exit {done.returncode}: {tail[:100]}"}
    return json.loads(tagged[-1][len(RESULT_TAG):])


OUT_OF_TIME = "not run: --max_minutes reached"


def fit_rows(run: bool, budget_gib: float, steps: int, deadline: float, configs=FIT_CONFIGS) -> list[Row]:
    rows = []
    for config in configs:
        name = Path(config).stem
        if not run or time.time() >= deadline:
            rows.append(Row("fit", name, f"{steps} GRPO steps <= {budget_gib:g} GiB", planned=planned_fit(config),
                            note="pending a GPU run" if not run else OUT_OF_TIME))
            continue
        result = child(["fit", config, budget_gib, steps], deadline - time.time())
        result.setdefault("planned", planned_fit(config))  # a child that timed out still has a plan to compare with
        note = "" if result.get("ok") else result.get("error", "")
        if result.get("error", "").startswith("OOM"):  # how much it misses: the same run, uncapped
            uncapped = child(["fit", config, None, steps], deadline - time.time())
            if uncapped.get("ok"):
                result["measured"] = uncapped["measured"]
                note = f"needs {uncapped['measured'] / GIB:.2f} GiB: {(uncapped['measured'] - budget_gib * GIB) / GIB:.2f} over"
        rows.append(Row("fit", name, f"{steps} GRPO steps <= {budget_gib:g} GiB", result.get("planned"),
                        result.get("measured"), fits=bool(result.get("ok")), value=result.get("samples_per_s"),
                        note=note or f"{result.get('seconds')} s for {steps} steps; "
                                     + throughput_note(result.get("samples_per_s"))))
    return rows


def speed_rows(run: bool, steps: int, deadline: float) -> list[Row]:
    """Training samples/s of SPEED_CONFIG, uncapped, with transformers generation and with vLLM colocate."""
    import importlib.util

    rows = []
    name = Path(SPEED_CONFIG).stem
    for backend, extra in (("transformers generate", []), ("vLLM colocate", VLLM_COLOCATE)):
        phase = f"{steps} GRPO steps, {backend}"
        if extra and importlib.util.find_spec("vllm") is None:
            rows.append(Row("speed", name, phase, note="vLLM not installed: skipped"))
            continue
        if not run or time.time() >= deadline:
            rows.append(Row("speed", name, phase, note="pending a GPU run" if not run else OUT_OF_TIME))
            continue
        result = child(["fit", SPEED_CONFIG, None, steps, extra], deadline - time.time())
        rows.append(Row("speed", name, phase, measured=result.get("measured"), value=result.get("samples_per_s"),
                        note=result.get("error") or throughput_note(result.get("samples_per_s"))))
    return rows


def planned_fit(config: str) -> float:
    """The planner's peak for a shipped config, margin left out (what the fit row compares with, on any machine)."""
    from rlvr.planning import plan_recipe
    from rlvr.training.config import load_recipe, validate

    return plan_recipe(validate(load_recipe(["--config", str(REPO / config), "--dry_run", "true", "--use_cpu", "true"]))).peak - MARGIN_BYTES


def eval_rows(run: bool, num_prompts: int, deadline: float) -> list[Row]:
    import importlib.util

    rows = []
    for backend, use_vllm in (("transformers generate", False), ("vLLM", True)):
        phase = f"eval {num_prompts} prompts x 8"
        if use_vllm and importlib.util.find_spec("vllm") is None:
            rows.append(Row("eval", "Qwen3-0.6B " + backend, phase, note="vLLM not installed: skipped"))
            continue
        if not run or time.time() >= deadline:
            rows.append(Row("eval", "Qwen3-0.6B " + backend, phase, note="pending a GPU run" if not run else OUT_OF_TIME))
            continue
        result = child(["eval", EVAL_CONFIG, use_vllm, num_prompts], deadline - time.time())
        rows.append(Row("eval", "Qwen3-0.6B " + backend, phase, value=result.get("samples_per_s"),
                        note=result.get("error") or f"{result.get('per_batch')} prompts per batch"))
    return rows


# --- CLI -----------------------------------------------------------------------------------------------------------


def parse(argv: list[str] | None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--budget_gib", type=float, default=6.9, help="memory cap for the fit section")
    parser.add_argument("--steps", type=int, default=5, help="GRPO steps per config in the fit section")
    parser.add_argument("--fit_configs", nargs="+", choices=[Path(c).stem for c in FIT_CONFIGS],
                        default=[Path(c).stem for c in FIT_CONFIGS], help="which 6.9 GiB configs the fit section runs")
    parser.add_argument("--tolerance", type=float, default=0.15, help="allowed |measured / planned - 1|")
    parser.add_argument("--eval_prompts", type=int, default=64, help="prompts (x 8 samples) for the eval section")
    parser.add_argument("--max_minutes", type=float, default=8.0, help="stop starting measurements after this")
    parser.add_argument("--dry_run", action="store_true", help="print the planned figures only (no CUDA needed)")
    parser.add_argument("--_child", default=None, help="internal: one measurement in a fresh process")
    args = parser.parse_args(argv)
    for flag in ("budget_gib", "max_minutes"):
        if getattr(args, flag) <= 0:
            raise ConfigError(f"--{flag}", f"must be positive, got {getattr(args, flag)}")
    for flag in ("steps", "eval_prompts"):
        if getattr(args, flag) < 1:
            raise ConfigError(f"--{flag}", f"must be >= 1, got {getattr(args, flag)}")
    if not 0 < args.tolerance < 1:
        raise ConfigError("--tolerance", f"must be in (0, 1), got {args.tolerance}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args._child:
        import shutil

        kind, *rest = json.loads(args._child)
        work = Path(tempfile.mkdtemp(prefix="gpu_check_"))
        try:  # random-weight folders are GBs: never leave them behind
            result = fit_one(work, *rest) if kind == "fit" else eval_one(work, *rest)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(RESULT_TAG + json.dumps(result), flush=True)
        return 0
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        raise ConfigError("cuda", "no CUDA device here; gpu_check measures on a GPU (use --dry_run for the planned "
                                  "figures alone)")
    run, deadline = not args.dry_run, time.time() + 60 * args.max_minutes
    rows = []
    with measured_load("gpu_check"):  # the CPU side (generation loop, rewards) shows in GPU throughput too
        if "memory" in args.sections:
            rows += memory_rows(run)
        if "fit" in args.sections:
            rows += fit_rows(run, args.budget_gib, args.steps, deadline,
                             [c for c in FIT_CONFIGS if Path(c).stem in args.fit_configs])
        if "eval" in args.sections:
            rows += eval_rows(run, args.eval_prompts, deadline)
        if "speed" in args.sections:
            rows += speed_rows(run, args.steps, deadline)
    device = torch.cuda.get_device_name(0) if run else "no GPU (dry run)"
    print(f"gpu_check on {device}; tolerance +-{args.tolerance:g}, budget {args.budget_gib:g} GiB")
    print(format_table(rows))
    if args.dry_run:
        print("dry run: planned figures only; measured figures are pending a GPU run")
        return 0
    broken = failures(rows, args.tolerance)
    print("\n".join(["FAIL: " + line for line in broken]) if broken else "PASS: every planned figure within tolerance, "
                                                                           "every 6.9 GiB config fits")
    Path("runs").mkdir(exist_ok=True)
    Path("runs/gpu_check.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(cli(main))
