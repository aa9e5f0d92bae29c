"""The GPU-side claims, checked on one GPU in at most ~8 minutes: one table, exit 0 only if every claim holds.

    python benchmarks/gpu_check.py                      # everything (needs CUDA)
    python benchmarks/gpu_check.py --dry_run            # what would run, with every planned figure (any machine)
    python benchmarks/gpu_check.py --sections memory fit --budget_gib 6.9 --tolerance 0.15
    python benchmarks/gpu_check.py --cpu_smoke --sections fit main speedups   # the real code paths on the CPU, tiny

Sections, run in the order `--sections` names them: memory, fit, main, speedups, eval, speed; each one's
`*_rows` function says what it measures, and docs/memory-and-gpu.md ("The GPU check") the whole. Every
measurement runs in its own process group, boxed to `BOX_S[section]` seconds and to what is left of `--max_minutes`,
its log in `<out>/logs/`; every finished row is written to `<out>/gpu_check.json` at once. Every model is a
random-weight Qwen3 built from its published shape (no download), written to /dev/shm when it has room.

Exit status 0 only if every planned figure is within +-tolerance of the measured one and every 6.9 GiB config fits;
1 otherwise; 2 (one `error:` line) for bad flags or no CUDA device.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine_load import measured_load
from benchmarks.tiny_main_job import DEFAULT_CONFIG as MAIN_JOB_CONFIG
from benchmarks.tiny_main_job import expectation
from rlvr.inputs import ArgumentParser, ConfigError, cli, positive_float, positive_int
from rlvr.metrics.keys import (
    COUNTERS,
    GENERATED_SAMPLES,
    GENERATED_TOKENS,
    GENERATION_STEP,
    LOSS,
    PEAK_ALLOCATED,
    PEAK_RESERVED,
    TIME_PHASES,
    TIME_TOTAL,
    time_key,
)
from rlvr.planning import (
    GIB,
    KNOWN_SHAPES,
    LINEAR_MODULES,
    LORA,
    MARGIN_BYTES,
    ModelShape,
    Workload,
    estimate_prompt_tokens,
    plan_memory,
    plan_recipe,
    resolve_shape,
)

SECTIONS = ("memory", "fit", "main", "speedups", "eval", "speed")
# The longest one measurement of a section may take, in seconds (and never past --max_minutes): a slow step cannot eat
# the steps after it. fit: a random model written and loaded, then --steps GRPO steps.
BOX_S = {"fit": 330, "main": 200, "speedups": 90, "eval": 120, "speed": 150}
FIT_CONFIGS = (
    "recipes/grpo_qwen3_0.6b_full.yaml",
    "recipes/grpo_qwen3_1.7b_lora.yaml",
    "recipes/grpo_qwen3_4b_qlora.yaml",
)
MEMORY_CASES = (("Qwen/Qwen3-0.6B", "full"), ("Qwen/Qwen3-1.7B", "full"), ("Qwen/Qwen3-1.7B", "lora"))
EVAL_CONFIG = "recipes/grpo_qwen3_0.6b_full.yaml"
SPEED_CONFIG = "recipes/grpo.yaml"
VLLM_COLOCATE = ["--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.3"]
RESULT_TAG = "GPU_CHECK_RESULT "
# all the main job's recipe changes on a GPU: the trainer and evaluator use CUDA
MAIN_JOB_OVERRIDES = {"use_cpu": False}
SPEEDUP_CONFIG = "recipes/grpo_qwen3_0.6b_full.yaml"
RAM_WORK_GIB = 12  # /dev/shm holds the random models when this much is free (the 4B one is 8 GB in bf16)
# --cpu_smoke: the sections' real code paths on the CPU at a toy scale (a 2-layer shape, 16-token completions); it
# checks the script, it measures nothing
SMOKE_SHAPE = ModelShape("smoke", 64, 2, 4, 2, 16, 128, 1000, True)
SMOKE_FLAGS = ["--use_cpu", "true", "--bf16", "false", "--max_completion_length", "16", "--load_in_4bit", "false"]
SMOKE_FLAGS += ["--optim", "adamw_torch"]  # torchao's step compiles for minutes per tensor shape on a CPU
SMOKE_MAIN_FLAGS = ["--num_samples", "1", "--max_steps", "2", "--eval_steps", "1"]


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
    figures: dict = field(default_factory=dict)  # everything else the measurement returned (JSON only)

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

    cells = [
        [
            r.section,
            r.name,
            r.phase,
            gib(r.planned),
            gib(r.measured),
            "-" if r.ratio() is None else f"{r.ratio():.2f}",
            "-" if r.fits is None else ("yes" if r.fits else "NO"),
            "-" if r.value is None else f"{r.value:.1f}",
            r.note,
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


# --- Random-weight Qwen3 models from a shape -----------------------------------------------------------------------


def qwen3_config(shape: ModelShape):
    """A transformers Qwen3Config of `shape`."""
    from transformers import Qwen3Config

    return Qwen3Config(
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        intermediate_size=shape.intermediate,
        vocab_size=shape.vocab,
        tie_word_embeddings=shape.tie_word_embeddings,
        max_position_embeddings=4096,
    )


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
    del model
    gc.collect()  # the model may sit in reference cycles: free it before a run counts its peak
    if device != "cpu":
        torch.cuda.empty_cache()
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


def shipped_recipe(config: str):
    """A shipped config, validated as a dry run on the CPU: its model name, fields and prompts (nothing loaded)."""
    from rlvr.training.config import load_recipe, validate

    return validate(load_recipe(["--config", str(REPO / config), "--dry_run", "true", "--use_cpu", "true"]))


def byte_token_recipe(config: str, model_dir, out_dir) -> Path:
    """A copy of the recipe YAML on the random model, with the system prompt cut to match the real token count."""
    import yaml

    recipe = shipped_recipe(config)
    raw = recipe.yaml  # `base:` resolved: the copy stands alone
    prompts = recipe.dataset[recipe.args.dataset_train_split]["prompt"]
    target = estimate_prompt_tokens(prompts)  # the planner's estimate for the real model (no local tokenizer)
    data = dict(raw["data"], system_prompt=matched_system_prompt(prompts, target))
    raw.update(
        model_name_or_path=str(model_dir),
        data=data,
        report_to="none",
        save_strategy="no",
        output_dir=str(Path(out_dir) / "run"),
    )
    path = Path(out_dir) / Path(config).name
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# --- Section 1: planner vs allocator, phase by phase ---------------------------------------------------------------


def memory_workload(name: str, mode: str) -> Workload:
    """The shipped configs' batch shape (2 x (200 + 512) tokens per micro-batch, 32 sequences sampled) on a shape."""
    w = Workload(
        shape=KNOWN_SHAPES[name],
        weight_bytes=2,
        act_bytes=2,
        micro_batch=2,
        prompt_tokens=200,
        completion_tokens=512,
        generation_sequences=32,
        num_generations=8,
        gradient_checkpointing=True,
    )
    return replace(w, **LORA) if mode == "lora" else w


def planned_phases(w: Workload) -> dict[str, float]:
    """What `max_memory_allocated` should report per phase: the plan without its fixed margin and without the
    allocator's slack (reserved, never allocated)."""
    plan = plan_memory(w)
    always = plan.phase("always") - MARGIN_BYTES
    slack = sum(p.bytes for p in plan.parts if p.name == "allocator slack")
    return {
        "weights + optimizer": always,
        "train": always + plan.phase("train"),
        "generate": always + plan.phase("generate") - slack,
    }


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

        model = get_peft_model(
            model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=list(LINEAR_MODULES))
        )
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
        model.generate(
            input_ids=prompts,
            attention_mask=torch.ones_like(prompts),
            do_sample=True,
            temperature=0.6,
            top_p=0.95,
            top_k=20,
            max_new_tokens=w.completion_tokens,
            min_new_tokens=w.completion_tokens,
            use_cache=True,
            pad_token_id=0,
            eos_token_id=1,
        )
    torch.cuda.synchronize()
    generate = torch.cuda.max_memory_allocated()
    del model, optimizer
    gc.collect()
    return {"weights + optimizer": resident - baseline, "train": train - baseline, "generate": generate - baseline}


def memory_rows(measure: bool) -> list[Row]:
    """The planner (`planned_phases`) against the allocator (`measure_phases`), phase by phase, for MEMORY_CASES."""
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
        rows += [
            Row("memory", f"{name.split('/')[1]} {mode}", phase, planned[phase], measured.get(phase), note=note)
            for phase in planned
        ]
    return rows


# --- Section 2: the 6.9 GiB configs, GRPO steps under a memory cap ------------------------------------------------


def work_root() -> str | None:
    """Where the random models go: /dev/shm when it has RAM_WORK_GIB free (written and read back in memory, not
    through the disk), else tempfile's default (None)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and shutil.disk_usage(shm).free > RAM_WORK_GIB * GIB else None


def fit_one(
    work: Path, config: str, budget_gib: float | None, steps: int, extra: list[str] = (), smoke: bool = False
) -> dict:
    """In a fresh process: the runner's GRPO steps, with its whole-run fixes and `extra` flags, on the random-weight
    model of the recipe's shape, capped at `budget_gib` (None: uncapped); the plan (margin left out) beside the
    measured peaks, and the run's steps, seconds, throughput and losses. `smoke`: on the CPU at SMOKE_SHAPE."""
    import torch

    from rlvr.training.config import load_recipe, validate
    from rlvr.training.runner import main as run_recipe

    cuda = not smoke
    shape = SMOKE_SHAPE if smoke else resolve_shape(shipped_recipe(config).model.model_name_or_path)
    t0 = time.perf_counter()
    model_dir = write_random_model(shape, work / "model", device="cuda" if cuda else "cpu")
    write_s = time.perf_counter() - t0
    recipe_path = byte_token_recipe(config, model_dir, work)
    argv = ["--config", str(recipe_path), "--max_steps", str(steps), "--print_rollouts", "false"]
    argv += ["--memory_budget", "off", "--logging_steps", "1", *extra, *(SMOKE_FLAGS if smoke else [])]
    recipe = validate(load_recipe(argv))
    plan = plan_recipe(recipe, free_bytes=budget_gib * GIB if budget_gib else None)  # the runner's pieces at the cap
    if plan.workload.generation_chunk:
        argv += ["--generation_chunk_size", str(plan.workload.generation_chunk)]
    if cuda and budget_gib is not None:
        torch.cuda.set_per_process_memory_fraction(budget_gib * GIB / torch.cuda.get_device_properties(0).total_memory)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start, error = time.perf_counter(), ""
    try:
        run_recipe(argv)
    except torch.cuda.OutOfMemoryError as err:
        error = "OOM: " + str(err).splitlines()[0][:80]
    rows = read_metrics(work / "run" / "metrics.jsonl")
    window = None if error else window_figures(rows)
    trained = [row for row in rows if TIME_TOTAL in row]
    return {
        "planned": plan.peak - MARGIN_BYTES,
        "planned_first": plan.first_generation - MARGIN_BYTES,
        "chunk": plan.workload.generation_chunk,
        "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True (runner)"),
        "measured": torch.cuda.max_memory_allocated() if cuda else None,
        "reserved": torch.cuda.max_memory_reserved() if cuda else None,
        "cycles": cycle_peaks(trained, recipe.training.steps_per_generation),
        "ok": not error,
        "error": error,
        "steps_done": len(trained),
        "seconds": round(time.perf_counter() - start, 1),
        "write_s": round(write_s, 1),
        "steps": steps,
        "window": window,
        "samples_per_s": window and window["samples_per_s"],
        "losses": [row.get(LOSS) for row in trained],
        "step_seconds": [row[TIME_TOTAL] for row in trained],
    }


def cycle_peaks(rows: list[dict], steps_per_generation: int) -> list[list[float]]:
    """[peak allocated, peak reserved] GiB of each generation cycle, from the runner's per-row peaks (logging_steps 1:
    a cycle is `steps_per_generation` rows, its generation in the first)."""
    cycles = [rows[i : i + steps_per_generation] for i in range(0, len(rows), steps_per_generation)]
    return [
        [round(max(r.get(key, 0.0) for r in cycle), 2) for key in (PEAK_ALLOCATED, PEAK_RESERVED)]
        for cycle in cycles
        if any(PEAK_ALLOCATED in r for r in cycle)
    ]


def read_metrics(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def window_figures(rows: list[dict]) -> dict | None:
    """Throughput over the logged steps from the second generation on (the first cycle is the warm-up: CUDA context,
    allocator, kernel choices): generated samples and tokens, seconds per phase (`time/<phase>_s`, the trainer's own
    split) and per step, and the rates. One generation feeds several optimizer steps, so a window of whole cycles
    (`--steps` a multiple of them) counts every step the samples paid for. None without a second generation."""
    steps, counts, last = [row for row in rows if TIME_TOTAL in row], [], dict.fromkeys(COUNTERS, 0.0)
    for row in steps:  # the counters are in the rows of steps that generated (or reused) a batch: carry them forward
        last = {key: row.get(key, last[key]) for key in COUNTERS}
        counts.append(last)
    starts = [i for i in range(1, len(steps)) if counts[i][GENERATION_STEP] > counts[i - 1][GENERATION_STEP]]
    if not starts:
        return None
    before, window, end = counts[starts[0] - 1], steps[starts[0] :], counts[-1]
    seconds = {phase: sum(row.get(time_key(phase), 0.0) for row in window) for phase in TIME_PHASES}
    seconds["total"] = sum(row[TIME_TOTAL] for row in window)
    samples, tokens = (
        end[GENERATED_SAMPLES] - before[GENERATED_SAMPLES],
        end[GENERATED_TOKENS] - before[GENERATED_TOKENS],
    )
    return {
        "steps": len(window),
        "generations": end[GENERATION_STEP] - before[GENERATION_STEP],
        "samples": samples,
        "tokens": tokens,
        "seconds": seconds,
        "samples_per_s": samples / seconds["total"] if seconds["total"] else None,
        "tokens_per_s": tokens / seconds["total"] if seconds["total"] else None,
        "generation_tokens_per_s": tokens / seconds["generation"] if seconds["generation"] else None,
    }


def throughput_note(window: dict | None) -> str:
    """samples/s, tokens/s (of step time and of generation time) and each phase's share of the step time."""
    if not window or not window.get("samples_per_s"):
        return "no throughput figure (no step after the first generation cycle)"
    seconds = window["seconds"]
    shares = ", ".join(f"{phase} {seconds[phase] / seconds['total']:.0%}" for phase in TIME_PHASES)
    return (
        f"{window['samples_per_s']:.2f} samples/s, {window['tokens_per_s']:.0f} tokens/s "
        f"({window['generation_tokens_per_s']:.0f} while generating) over {window['steps']} steps; {shares}"
    )


def eval_one(work: Path, config: str, use_vllm: bool, num_prompts: int, smoke: bool = False) -> dict:
    """In a fresh process: `rlvr.analysis.evaluate` on the random-weight model of the recipe's shape; samples/s."""
    from rlvr.analysis.evaluate import evaluate

    shape = SMOKE_SHAPE if smoke else resolve_shape(shipped_recipe(config).model.model_name_or_path)
    model_dir = write_random_model(shape, work / "model", device="cpu" if smoke else "cuda")
    summary = evaluate(
        str(byte_token_recipe(config, model_dir, work)),
        num_prompts=num_prompts,
        num_samples=8,
        ks=(1, 8),
        use_vllm=use_vllm,
        output=str(work / "eval.json"),
        show_progress=False,
        **({"max_new_tokens": 16} if smoke else {}),
    )
    return {"samples_per_s": summary["samples_per_s"], "per_batch": summary["prompts_per_batch"]}


def run_in_group(command: list[str], timeout: float, log: Path, env: dict | None = None) -> int | None:
    """`command` in its own process group, stdout and stderr into `log`; past `timeout` seconds the whole group is
    killed (the main job's GRPO run is a grandchild, which a plain kill would leave running) and None returned."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as handle:
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, cwd=REPO, env=env, start_new_session=True
        )
        try:
            return process.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return None


def child_env() -> dict:
    """The caller's environment with the repo first on PYTHONPATH: packages installed with `pip --target` and
    PYTHONPATH (as on a GPU machine without the project's environment) must reach the child."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "WANDB_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
    }


def child(args: list, timeout: float, log: Path, env: dict | None = None) -> dict:
    """Run one measurement in a fresh Python (its own CUDA context and memory cap) in a work folder this process
    creates and removes (a killed child leaves GBs of random weights behind otherwise); its last tagged line is the
    result. `env`: variables on top of the caller's (the allocator setting of the run without the fix)."""
    work = Path(tempfile.mkdtemp(prefix="gpu_check_", dir=work_root()))
    try:
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--_child",
            json.dumps([args[0], str(work), *args[1:]]),
        ]
        code = run_in_group(command, timeout, log, {**child_env(), **(env or {})})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if code is None:
        return {"ok": False, "error": f"timed out after {max(timeout, 1):.0f} s"}
    lines = log.read_text(errors="replace").splitlines()
    tagged = [line for line in lines if line.startswith(RESULT_TAG)]
    if not tagged:
        tail = next((line for line in reversed(lines) if line.strip()), "no output")
        return {"ok": False, "error": f"exit {code}: {tail.strip()[:160]}"}
    return json.loads(tagged[-1][len(RESULT_TAG) :])


OUT_OF_TIME = "not run: --max_minutes reached"


def unstarted(run: bool, deadline: float) -> str | None:
    """Why a measurement does not start (a dry run, or the deadline passed); None when it starts."""
    return "pending a GPU run" if not run else OUT_OF_TIME if time.time() >= deadline else None


def box(section: str, deadline: float) -> float:
    """Seconds the next measurement of `section` may take: its box, or what is left before the deadline."""
    return min(BOX_S[section], deadline - time.time())


def over_cap_note(uncapped: dict, budget_gib: float) -> str:
    """Why a run that hit the cap missed it, from its uncapped rerun: tensors beyond the cap, or (peak allocated under
    it) the allocator's cached blocks, which the cap counts and a card with that much free memory has to hold too."""
    peak, reserved = uncapped["measured"], uncapped.get("reserved")
    if peak > budget_gib * GIB:
        return f"OOM at the {budget_gib:g} GiB cap; uncapped it allocates {peak / GIB:.2f} GiB, {(peak - budget_gib * GIB) / GIB:.2f} over"
    held = f" (uncapped it reserves {reserved / GIB:.2f} GiB)" if reserved else ""
    return (
        f"OOM at the {budget_gib:g} GiB cap although its allocated peak is {peak / GIB:.2f} GiB: the allocator's "
        f"cached blocks cross the cap{held}"
    )


ALLOCATOR_OFF = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}  # the run without the allocator fix


def fit_rows(
    run: bool,
    budget_gib: float,
    steps: int,
    deadline: float,
    configs=FIT_CONFIGS,
    logs: Path = Path("runs"),
    smoke: bool = False,
):
    """One row per config over a whole run at the cap (`steps`: 12 = three generation cycles), and the first config
    again with the allocator's expandable segments off, all else equal (what the setting buys). The runs go at once,
    one process each under its own cap (decoding a few dozen sequences leaves most of the GPU idle; their throughput
    is shared, their memory is not); a run that hits the cap is then rerun uncapped, to say by how much it misses.
    Yielded as each finishes."""
    cases = [(config, Path(config).stem, None) for config in configs]
    cases += [(configs[0], f"{Path(configs[0]).stem} (expandable segments off)", ALLOCATOR_OFF)] if configs else []
    phase = f"{steps} GRPO steps <= {budget_gib:g} GiB"
    if note := unstarted(run, deadline):
        for config, name, _ in cases:
            yield Row("fit", name, phase, planned=planned_fit(config, budget_gib), note=note)
        return
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        futures = [pool.submit(fit_case, *case, budget_gib, steps, deadline, logs, smoke) for case in cases]
        for future in as_completed(futures):
            yield future.result()


def fit_case(config: str, name: str, env, budget_gib: float, steps: int, deadline: float, logs: Path, smoke: bool):
    """One fit row: the capped run, and the uncapped rerun when the cap was hit."""
    log = logs / f"fit_{Path(config).stem}{'_allocator_off' if env else ''}.log"
    result = child(["fit", config, budget_gib, steps, [], smoke], box("fit", deadline), log, env)
    result.setdefault("planned", planned_fit(config, budget_gib))  # a child that timed out still has a plan
    note = "" if result.get("ok") else result.get("error", "")
    if result.get("error", "").startswith("OOM") and time.time() < deadline:  # by how much it misses: uncapped
        uncapped = child(
            ["fit", config, None, steps, [], smoke], box("fit", deadline), log.with_suffix(".uncapped.log"), env
        )
        result["uncapped"] = uncapped
        if uncapped.get("ok"):
            result["measured"] = uncapped["measured"]
            note = over_cap_note(uncapped, budget_gib)
    cycles = "; ".join(f"cycle {i} {a:.2f}/{r:.2f}" for i, (a, r) in enumerate(result.get("cycles") or [], 1))
    pieces = f", pieces of {result['chunk']}" if result.get("chunk") else ""
    ran = f"{result.get('steps_done', 0)}/{steps} steps{pieces}; GiB allocated/reserved: {cycles or '-'}"
    done = f"{result.get('seconds')} s after a {result.get('write_s')} s model write, with the other fit runs at once; "
    return Row(  # the whole-run plan counts the allocator's slack: it is compared with the reserved peak
        "fit",
        name,
        f"{steps} GRPO steps <= {budget_gib:g} GiB",
        result.get("planned"),
        result.get("reserved") or result.get("measured"),
        fits=bool(result.get("ok")),
        value=result.get("samples_per_s"),
        figures=result,
        note=f"{ran}; " + (note or done + throughput_note(result.get("window"))),
    )


# Seconds of one fit run on one H200, for the section's own estimate (printed first): the model write plus the first
# cycle (CUDA start-up, kernel choices, the first generation), then each further generation cycle, per generation
# piece; the 4B one's scaled from the others' by its layers and width.
FIT_SECONDS = {
    "grpo_qwen3_0.6b_full": (10 + 44, 19),
    "grpo_qwen3_1.7b_lora": (15 + 60, 25),
    "grpo_qwen3_4b_qlora": (25 + 75, 32),
}


def fit_estimate(configs, steps: int, budget_gib: float, steps_per_generation: int = 4) -> float:
    """The fit section's seconds: its runs go at once, so the longest run's (first cycle, then each cycle once per
    generation piece); an uncapped rerun after an OOM adds up to one more."""
    cycles, longest = -(-steps // steps_per_generation), 0.0
    for config in configs:
        w = plan_recipe(shipped_recipe(config), free_bytes=budget_gib * GIB).workload
        first, cycle = FIT_SECONDS[Path(config).stem]
        longest = max(longest, first + (cycles - 1) * cycle * -(-w.generation_sequences // w.sequences_at_once))
    return longest


def main_job_recipe(folder: Path) -> Path:
    """recipes/tiny/grpo.yaml with MAIN_JOB_OVERRIDES, standing on it through `base:` (every other field its own)."""
    import yaml

    path = folder / "tiny_grpo_gpu.yaml"
    path.write_text(yaml.safe_dump({"base": str(REPO / MAIN_JOB_CONFIG), **MAIN_JOB_OVERRIDES}, sort_keys=False))
    return path


MAIN_JOB_FILES = ("benchmark.json", "eval_before.json", "eval_after.json", "grpo/metrics.jsonl", "grpo/config.yaml")


def main_job_rows(run: bool, deadline: float, out: Path, smoke: bool = False):
    """The tiny main job with the python launcher (one process: no accelerate config on the machine) on its GPU
    recipe; its small records are copied to <out>/main_job/ (the run folder itself stays in the work folder)."""
    phase = "held-out exact match before -> after, GRPO wall"
    if note := unstarted(run, deadline):
        yield Row("main", "tiny main job", phase, note=note)
        return
    work = Path(tempfile.mkdtemp(prefix="gpu_check_main_"))
    try:
        command = [
            sys.executable,
            "benchmarks/tiny_main_job.py",
            "--config",
            str(main_job_recipe(work)),
            "--launcher",
            "python",
            "--output_dir",
            str(work / "job"),
            *(SMOKE_MAIN_FLAGS if smoke else []),
        ]
        code = run_in_group(command, box("main", deadline), out / "logs" / "main_job.log", child_env())
        for name in MAIN_JOB_FILES:
            if (work / "job" / name).exists():
                (out / "main_job" / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(work / "job" / name, out / "main_job" / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report_path = out / "main_job" / "benchmark.json"
    if code != 0 or not report_path.exists():
        why = f"timed out after {box('main', deadline):.0f} s" if code is None else f"exit {code}"
        yield Row("main", "tiny main job", phase, note=f"{why}: see logs/main_job.log")
        return
    report = json.loads(report_path.read_text())
    yield Row("main", "tiny main job", phase, value=report["samples_per_s"], figures=report, note=main_job_note(report))


def main_job_note(report: dict) -> str:
    """Before -> after exact match, the wall times, and where they fall against README's ranges (the recipe differs
    from README's command in MAIN_JOB_OVERRIDES alone, so the ranges apply)."""
    wall = report["wall_s"]
    return (
        f"exact match {report['before']['exact_match']:.3f} -> {report['after']['exact_match']:.3f}; GRPO "
        f"{wall['grpo']:.0f} s of {wall['total']:.0f} s; " + "; ".join(line for line, _ in expectation(report))
    )


def compare_speedups(without: dict, with_: dict) -> str:
    """Same losses? (step by step, the largest difference) and the time ratio of the steps after the first."""
    a, b = without.get("losses") or [], with_.get("losses") or []
    if not a or len(a) != len(b) or None in a + b:
        return f"losses not comparable ({len(a)} vs {len(b)} steps)"
    gap = max(abs(x - y) for x, y in zip(a, b))
    same = "identical losses" if gap == 0 else f"largest |loss difference| {gap:.2e} over {len(a)} steps"
    ta, tb = sum(without["step_seconds"][1:]), sum(with_["step_seconds"][1:])
    return same + (f"; steps after the first {ta:.1f} s without, {tb:.1f} s with ({tb / ta:.2f}x)" if ta and tb else "")


def child_rows(section: str, cases, run: bool, deadline: float, logs: Path, smoke: bool):
    """One row per case (name, phase, child arguments, log name, needs vLLM, note of a result), each measured in a
    child of its own; a vLLM case is skipped where vLLM is not installed."""
    import importlib.util

    for name, phase, args, log, vllm, note_of in cases:
        if vllm and importlib.util.find_spec("vllm") is None:
            yield Row(section, name, phase, note="vLLM not installed: skipped")
            continue
        if note := unstarted(run, deadline):
            yield Row(section, name, phase, note=note)
            continue
        result = child([*args, smoke], box(section, deadline), logs / log)
        note = result.get("error") or note_of(result)
        yield Row(section, name, phase, measured=result.get("measured"), value=result.get("samples_per_s"),
                  figures=result, note=note)  # fmt: skip


def speedup_rows(run: bool, steps: int, deadline: float, logs: Path = Path("runs"), smoke: bool = False):
    """SPEEDUP_CONFIG uncapped, `--speedups none` then `all`, same seed; then the comparison."""
    name, results = Path(SPEEDUP_CONFIG).stem, {}
    cases = [
        (name, f"{steps} GRPO steps, speedups {value}", ["fit", SPEEDUP_CONFIG, None, steps,
         ["--speedups", value, "--seed", "42"]], f"speedups_{value}.log", False,
         lambda r: f"losses {r.get('losses')}; step seconds {r.get('step_seconds')}")
        for value in ("none", "all")
    ]  # fmt: skip
    for value, row in zip(("none", "all"), child_rows("speedups", cases, run, deadline, logs, smoke)):
        results[value] = row.figures
        yield row
    if all(results.get(v, {}).get("ok") for v in ("none", "all")):
        losses = {"losses": {v: results[v]["losses"] for v in results}}
        yield Row(
            "speedups", name, "none vs all", figures=losses, note=compare_speedups(results["none"], results["all"])
        )


def speed_rows(run: bool, steps: int, deadline: float, logs: Path = Path("runs"), smoke: bool = False):
    """Training samples/s of SPEED_CONFIG, uncapped, with transformers generation and with vLLM colocate."""
    cases = [
        (Path(SPEED_CONFIG).stem, f"{steps} GRPO steps, {backend}", ["fit", SPEED_CONFIG, None, steps, extra],
         f"speed_{backend.split()[0]}.log", bool(extra), lambda r: throughput_note(r.get("window")))
        for backend, extra in (("transformers generate", []), ("vLLM colocate", VLLM_COLOCATE))
    ]  # fmt: skip
    yield from child_rows("speed", cases, run, deadline, logs, smoke)


def planned_fit(config: str, budget_gib: float | None = None) -> float:
    """The planner's whole-run peak for a shipped config, in the pieces it sizes for `budget_gib`, margin left out
    (what the fit row compares with, on any machine)."""
    free = budget_gib * GIB if budget_gib else None
    return plan_recipe(shipped_recipe(config), free_bytes=free).peak - MARGIN_BYTES


def eval_rows(run: bool, num_prompts: int, deadline: float, logs: Path = Path("runs"), smoke: bool = False):
    """`rlvr.analysis.evaluate` samples/s on EVAL_CONFIG's shape, with transformers' generate and with vLLM."""
    cases = [
        ("Qwen3-0.6B " + backend, f"eval {num_prompts} prompts x 8", ["eval", EVAL_CONFIG, use_vllm, num_prompts],
         f"eval_{backend.split()[0]}.log", use_vllm, lambda r: f"{r.get('per_batch')} prompts per batch")
        for backend, use_vllm in (("transformers generate", False), ("vLLM", True))
    ]  # fmt: skip
    yield from child_rows("eval", cases, run, deadline, logs, smoke)


def save_rows(rows: list[Row], out: Path, meta: dict) -> None:
    """<out>/gpu_check.json: what ran where, and every row so far (rewritten after each, so a crash keeps them)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps({**meta, "rows": [asdict(r) for r in rows]}, indent=2) + "\n")


# --- CLI -----------------------------------------------------------------------------------------------------------


def parse(argv: list[str] | None):
    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="which sections, run in this order"
    )
    parser.add_argument("--budget_gib", type=positive_float, default=6.9, help="memory cap for the fit section")
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=12,
        help="GRPO steps per config in the fit and speed sections (12: three generation cycles of 4 optimizer steps; "
        "the first is the warm-up, the second the first with the optimizer states beside the cache)",
    )
    parser.add_argument(
        "--speedup_steps", type=positive_int, default=3, help="GRPO steps per run in the speedups section"
    )
    parser.add_argument(
        "--fit_configs",
        nargs="+",
        choices=[Path(c).stem for c in FIT_CONFIGS],
        default=[Path(c).stem for c in FIT_CONFIGS],
        help="which 6.9 GiB configs the fit section runs",
    )
    parser.add_argument("--tolerance", type=float, default=0.15, help="allowed |measured / planned - 1|")
    parser.add_argument(
        "--eval_prompts", type=positive_int, default=64, help="prompts (x 8 samples) for the eval section"
    )
    parser.add_argument(
        "--max_minutes",
        type=positive_float,
        default=8.0,
        help="stop starting measurements after this; no measurement runs past it",
    )
    parser.add_argument(
        "--out",
        default="runs/gpu_check",
        help="folder for gpu_check.json (rewritten after every row), the table and every measurement's log",
    )
    parser.add_argument("--dry_run", action="store_true", help="print the planned figures only (no CUDA needed)")
    parser.add_argument(
        "--cpu_smoke",
        action="store_true",
        help="run the sections' code paths on the CPU at a toy scale (checks the script; measures nothing)",
    )
    parser.add_argument("--_child", default=None, help="internal: one measurement in a fresh process")
    args = parser.parse_args(argv)
    if not 0 < args.tolerance < 1:
        raise ConfigError("--tolerance", f"must be in (0, 1), got {args.tolerance}")
    if args.dry_run and args.cpu_smoke:
        raise ConfigError("--cpu_smoke", "choose one of --dry_run and --cpu_smoke")
    args.sections = list(dict.fromkeys(args.sections))  # each once, in the order given
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args._child:
        kind, work, *rest = json.loads(args._child)
        result = fit_one(Path(work), *rest) if kind == "fit" else eval_one(Path(work), *rest)
        print(RESULT_TAG + json.dumps(result), flush=True)
        return 0
    import torch

    if not args.dry_run and not args.cpu_smoke and not torch.cuda.is_available():
        raise ConfigError(
            "cuda", "no CUDA device here; gpu_check measures on a GPU (use --dry_run for the planned figures alone)"
        )
    run, smoke, out = not args.dry_run, args.cpu_smoke, Path(args.out)
    deadline, started = time.time() + 60 * args.max_minutes, time.time()
    device = "CPU smoke (nothing measured)" if smoke else torch.cuda.get_device_name(0) if run else "no GPU (dry run)"
    meta = {
        "device": device,
        "argv": sys.argv[1:] if argv is None else argv,
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    rows: list[Row] = []
    fit_configs = [c for c in FIT_CONFIGS if Path(c).stem in args.fit_configs]
    sections = {
        "memory": lambda: memory_rows(run and not smoke),
        "fit": lambda: fit_rows(run, args.budget_gib, args.steps, deadline, fit_configs, out / "logs", smoke),
        "main": lambda: main_job_rows(run, deadline, out, smoke),
        "speedups": lambda: speedup_rows(run, args.speedup_steps, deadline, out / "logs", smoke),
        "eval": lambda: eval_rows(run, args.eval_prompts, deadline, out / "logs", smoke),
        "speed": lambda: speed_rows(run, args.steps, deadline, out / "logs", smoke),
    }
    if "fit" in args.sections:
        minutes = fit_estimate(fit_configs, args.steps, args.budget_gib) / 60
        print(f"[gpu_check] fit section: about {minutes:.1f} minutes on an H200 (its own estimate)", flush=True)
    with measured_load("gpu_check"):  # the CPU side (generation loop, rewards) shows in GPU throughput too
        for section in args.sections:
            for row in sections[section]():
                rows.append(row)
                print(
                    f"[gpu_check] {time.time() - started:.0f} s: {row.section} {row.name} {row.phase}: "
                    f"{row.note or 'done'}",
                    flush=True,
                )
                if run:
                    save_rows(rows, out, {**meta, "elapsed_s": round(time.time() - started)})
    print(f"gpu_check on {device}; tolerance +-{args.tolerance:g}, budget {args.budget_gib:g} GiB")
    table = format_table(rows)
    print(table)
    if args.dry_run:
        print("dry run: planned figures only; measured figures are pending a GPU run")
        return 0
    (out / "gpu_check.txt").write_text(table + "\n")
    if smoke:
        broken = [
            f"{r.section} {r.name} {r.phase}: {r.note}" for r in rows if not r.figures or r.figures.get("ok") is False
        ]
        print("\n".join(["SMOKE FAIL: " + line for line in broken]) or "SMOKE PASS: every section's code path ran")
        return 1 if broken else 0
    broken = failures(rows, args.tolerance)
    print(
        "\n".join(["FAIL: " + line for line in broken])
        if broken
        else "PASS: every planned figure within tolerance, every 6.9 GiB config fits"
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(cli(main))
