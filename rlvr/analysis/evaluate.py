"""Evaluate any checkpoint on a recipe's held-out prompts: pass@k, maj@k, exact match and mean reward, by word length.

    python -m rlvr.analysis.evaluate --model models/tiny-speller --config recipes/tiny/grpo.yaml --k 1 4 8 --output eval.json

Evaluation samples as the trainer samples, so "before" and "after" measure what GRPO optimised: the recipe's model
loading (`load_policy`), chat template kwargs (`prompt_token_ids`), sampling settings (`sampling_settings`; flags
override them) and reward set, on CUDA when there is one; `--use_vllm` samples with vLLM instead. Exact match is the
extracted answer equal to the expected one (`rlvr.rewards.functions.exact_answer`), not correctness == 1.0, which a
wrong answer can reach. Records, summary, pass@k and maj@k are `rlvr.metrics.scoring`'s, the code the held-out
evaluation during training runs too; what each figure means: docs/evaluation-and-reports.md.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from peft import PeftModel
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
from rich.text import Text
from transformers import AutoTokenizer, GenerationConfig
from trl.trainer.utils import create_model_from_path

from rlvr.inputs import (
    ArgumentParser,
    ConfigError,
    check_writable_folder,
    cli,
    non_negative_float,
    positive_int,
    read_json,
)
from rlvr.metrics.callbacks import quiet_progress_bars
from rlvr.metrics.keys import BY_LENGTH, EXACT_MATCH, MEAN_PREFIX, OVERALL, PER_K, PROMPTS, RECORD_FIELDS
from rlvr.metrics.scoring import WATCHES, score, step_metrics_of, summarize
from rlvr.planning import generation_batch_for, shape_from_config
from rlvr.runs import layout
from rlvr.training.config import load_recipe, validate
from rlvr.training.model_loading import model_init_kwargs, quantization_config
from rlvr.training.validation import check_model_folder, flag_type

SAMPLES_PER_BATCH = 512  # sequences per `generate` call: big batches amortise the per-token Python overhead on CPU


def sampling_settings(training, overrides: dict) -> dict:
    """The recipe's GRPO sampling settings, with any CLI override applied (None = keep the recipe's)."""
    settings = {
        "temperature": training.temperature,
        "top_p": training.top_p,
        "top_k": training.top_k,
        "min_p": training.min_p,
        "repetition_penalty": training.repetition_penalty,
        "max_new_tokens": training.max_completion_length,
    }
    settings.update({key: value for key, value in overrides.items() if value is not None})
    return settings


def eval_device(training) -> str:
    """Where the trainer would put the policy: this process's CUDA device when there is one, else the CPU
    (`use_cpu: true` keeps a recipe on the CPU even on a GPU machine, as it does for training)."""
    if training.use_cpu or not torch.cuda.is_available():
        return "cpu"
    return f"cuda:{training.local_process_index}"


def check_vllm(use_vllm: bool, device: str) -> None:
    """`--use_vllm` fails before any model loads, in one line, where vLLM cannot run."""
    if not use_vllm:
        return
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "--use_vllm", "vLLM is not installed (pip install vllm); drop --use_vllm to sample with transformers"
        )
    if device == "cpu":
        raise ConfigError("--use_vllm", "vLLM sampling here needs a CUDA GPU; this evaluation runs on the CPU")


def load_policy(model_path: str, recipe, device: str):
    """The policy as the trainer loads it: `rlvr.training.model_loading`'s from_pretrained arguments (the recipe's dtype and
    attention, QLoRA's quantization config) through TRL's own `create_model_from_path`, placed on `device`.
    A folder holding only a LoRA adapter (what a `use_peft` run saves) loads its base, then the adapter."""
    kwargs = {**model_init_kwargs(recipe.model, recipe.training), "device_map": {"": device}}
    if (quant := quantization_config(recipe.model)) is not None:
        kwargs["quantization_config"] = quant
    adapter = Path(model_path) / "adapter_config.json"
    if adapter.exists() and not (Path(model_path) / "config.json").exists():
        base = read_json(adapter, "--model", dict).get("base_model_name_or_path")
        if not isinstance(base, str):
            raise ConfigError("--model", f"{adapter} names no base_model_name_or_path for its LoRA adapter")
        return PeftModel.from_pretrained(create_model_from_path(base, **kwargs), model_path).eval()
    return create_model_from_path(model_path, **kwargs).eval()


def prompt_token_ids(tokenizer, prompts: list, chat_template_kwargs: dict | None) -> list[list[int]]:
    """Token ids of each prompt exactly as `GRPOTrainer._tokenize_prompts` builds them (no tools): the tokenizer's
    chat template with a generation prompt and the recipe's `chat_template_kwargs` (Qwen3's enable_thinking)."""
    if not prompts or isinstance(prompts[0], str):
        return tokenizer(text=prompts)["input_ids"]
    tokenized = tokenizer.apply_chat_template(
        conversation=prompts,
        tools=None,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        **(chat_template_kwargs or {}),
    )
    return [list(ids) for ids in tokenized["input_ids"]]


def generation_kwargs(tokenizer, settings: dict, num_samples: int) -> dict:
    """`model.generate` arguments for the recipe's sampling settings (greedy when temperature is 0)."""
    greedy = settings["temperature"] == 0
    kwargs = {
        "max_new_tokens": settings["max_new_tokens"],
        "do_sample": not greedy,
        "num_return_sequences": num_samples,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    if not greedy:
        kwargs.update({k: settings[k] for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")})
    return kwargs


def prompts_per_batch(model, device: str, num_samples: int, longest_prompt: int, max_new_tokens: int) -> int:
    """Prompts per `generate` call. On a GPU: as many sequences as the KV cache and sampling buffers of the free
    memory hold (the planner's own terms, `rlvr.planning.generation_batch_for`); on the CPU a fixed 512 samples."""
    if device == "cpu":
        return max(1, SAMPLES_PER_BATCH // num_samples)

    shape = shape_from_config("policy", model.config.to_dict())
    free, _ = torch.cuda.mem_get_info(device)
    kv_bytes = torch.finfo(model.dtype).bits // 8 if model.dtype.is_floating_point else 2
    return max(1, generation_batch_for(shape, longest_prompt + max_new_tokens, free, kv_bytes) // num_samples)


def hf_sampler(
    model,
    tokenizer,
    settings: dict,
    num_samples: int,
    device: str,
    extra: dict | None = None,
    speedups: frozenset = frozenset(),
):
    """A function from a chunk of prompt ids to `num_samples` completion ids per prompt, with transformers'
    `generate` (left padding, as TRL's transformers path); ids stop at the first EOS as TRL's masking does.
    `extra`: the recipe's `generation_kwargs`, which TRL adds to its GenerationConfig too. With the recipe's
    `prefix_attention` speed-up on, chunks whose prompts share a prefix sample through its loop instead: the same
    tokens as `generate` under the same seed (each prompt's rows repeated as `num_return_sequences` repeats them)."""
    from rlvr.speedups import prefix_attention  # opt-in: only a recipe that names a speed-up imports its module
    from rlvr.speedups.shared_prefix import MIN_SHARED_PREFIX, shared_prompt_prefix

    tokenizer.padding_side = "left"
    kwargs = {**generation_kwargs(tokenizer, settings, num_samples), **(extra or {})}
    restated = None
    if "prefix_attention" in speedups:
        config = GenerationConfig(**{**kwargs, "num_return_sequences": 1})
        if prefix_attention.reason_not(model, prefix_attention.prepared(model, config)) is None:
            restated = config

    def sample(chunk: list[list[int]]) -> list[list[list[int]]]:
        shared = shared_prompt_prefix(chunk)
        if restated is not None and shared >= MIN_SHARED_PREFIX:
            rest = [torch.as_tensor(ids[shared:], device=device) for ids in chunk for _ in range(num_samples)]
            out = prefix_attention.sample(
                model,
                restated,
                torch.as_tensor(chunk[0][:shared], device=device),
                rest,
                group_prompts="group_prompts" in speedups,
            )
        else:
            batch = tokenizer.pad({"input_ids": chunk}, padding=True, return_tensors="pt").to(device)
            with torch.no_grad():
                out = model.generate(**batch, **kwargs)[:, batch["input_ids"].shape[1] :]
        rows = [until_eos(ids.tolist(), tokenizer.eos_token_id) for ids in out]
        return [rows[i : i + num_samples] for i in range(0, len(rows), num_samples)]

    return sample


def until_eos(ids: list[int], eos_token_id) -> list[int]:
    """Completion ids up to and including the first EOS (what TRL keeps; the padding after it is dropped)."""
    eos = set(eos_token_id) if isinstance(eos_token_id, (list, tuple)) else {eos_token_id}
    for i, token in enumerate(ids):
        if token in eos:
            return ids[: i + 1]
    return ids


def vllm_sampler(model_path: str, recipe, settings: dict, num_samples: int, seed: int):
    """The same chunks sampled by vLLM (what TRL's `use_vllm` generates with), with the same sampling settings.
    GPU only; pending a GPU run in this repo (`benchmarks/gpu_check.py` times it when vLLM is installed)."""
    from vllm import LLM, SamplingParams  # optional dependency (the `vllm` extra, GPU only)

    model, training = recipe.model, recipe.training
    # The LLM and SamplingParams arguments TRL's colocated vLLM uses (trl/generation/vllm_generation.py).
    llm = LLM(
        model=model_path,
        dtype=model.dtype or "auto",
        seed=seed,
        gpu_memory_utilization=training.vllm_gpu_memory_utilization,
        max_model_len=training.vllm_max_model_length,
        model_impl=training.vllm_model_impl,
        max_num_batched_tokens=4096,
        trust_remote_code=training.trust_remote_code,
        quantization="bitsandbytes" if model.load_in_4bit else None,
    )
    params = SamplingParams(
        n=num_samples,
        max_tokens=settings["max_new_tokens"],
        seed=seed,
        temperature=settings["temperature"],
        top_p=settings["top_p"],
        top_k=settings["top_k"],
        repetition_penalty=settings["repetition_penalty"],
        min_p=0.0 if settings["min_p"] is None else settings["min_p"],
        **(training.generation_kwargs or {}),
    )

    def sample(chunk: list[list[int]]) -> list[list[list[int]]]:
        outputs = llm.generate([{"prompt_token_ids": ids} for ids in chunk], params, use_tqdm=False)
        return [[list(o.token_ids) for o in out.outputs] for out in outputs]

    return sample


def progress_bar(num_samples: int):
    """A rich progress bar on stderr: prompts done of all, samples/s and the time left."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("prompts"),
        SamplesPerSecondColumn(num_samples),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )


class SamplesPerSecondColumn(ProgressColumn):
    """Throughput in samples (completions), not prompts: the unit generation cost is counted in."""

    def __init__(self, samples_per_prompt: int):
        super().__init__()
        self.samples_per_prompt = samples_per_prompt

    def render(self, task):
        elapsed = task.finished_time if task.finished else task.elapsed
        if not elapsed or not task.completed:
            return Text("? samples/s")
        return Text(f"{task.completed * self.samples_per_prompt / elapsed:.1f} samples/s")


def generate(sample, prompt_ids: list[list[int]], per_batch: int, num_samples: int, show_progress: bool = True):
    """Completion ids for every prompt, chunk by chunk, with the progress bar advancing per chunk."""
    completions = []
    with progress_bar(num_samples) as progress:
        task = progress.add_task("sampling", total=len(prompt_ids), visible=show_progress)
        for start in range(0, len(prompt_ids), per_batch):
            completions += sample(prompt_ids[start : start + per_batch])
            progress.update(task, completed=len(completions))
    return completions


def format_table(summary: dict) -> str:
    """Per word length: prompts, exact match, the mean of every reward component, pass@k, maj@k, then the watches."""
    overall = summary[OVERALL]
    means = [key for key in overall if key.startswith(MEAN_PREFIX)]
    ks = [key for key in overall if key.startswith(PER_K)]
    watch = [key for key in WATCHES if key in overall]
    headers = ["length", "prompts", "exact", *(key.removeprefix(MEAN_PREFIX) for key in means), *ks, *watch]
    columns = [PROMPTS, EXACT_MATCH, *means, *ks, *watch]  # a block missing one (an older file) shows "-"
    rows = [
        [length, *(b.get(k, "-") for k in columns)]
        for length, b in [*summary.get(BY_LENGTH, {}).items(), ("all", overall)]
    ]
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = lambda values: "  ".join(v.rjust(w) for v, w in zip(values, widths))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


@dataclass
class EvaluationPlan:
    """What an evaluation needs before any model loads: the validated recipe, its sampling settings, the prompts, the
    k's, the device. Built once, it samples any number of policies (`run_evaluation`) without parsing the recipe
    again, which a running trainer needs: building the recipe's TrainingArguments resets accelerate's process state."""

    config: str
    recipe: object
    split: str
    settings: dict
    rows: list
    num_samples: int
    ks: list
    device: str
    use_vllm: bool


def plan_evaluation(
    config: str,
    model_path: str | None = None,
    split: str = "test",
    num_samples: int | None = None,
    ks: tuple[int, ...] = (1, 4, 8),
    num_prompts: int | None = None,
    use_vllm: bool = False,
    **overrides,
) -> EvaluationPlan:
    """Every check of `evaluate`'s input, and what sampling needs, without loading a model."""
    loaded = load_recipe(["--config", config])
    model_args = loaded.model
    model_path = model_path or model_args.model_name_or_path
    check_model_folder(model_path, "--model")  # a folder with a parsable config and whole weights
    model_args.model_name_or_path = model_path
    recipe = validate(loaded)
    settings = sampling_settings(recipe.training, overrides)
    ks, num_samples = check_request(recipe, settings, split, num_samples, ks, num_prompts, overrides)
    device = eval_device(recipe.training)
    check_vllm(use_vllm, device)
    rows = recipe.dataset[split]
    rows = [rows[i] for i in range(min(num_prompts or len(rows), len(rows)))]
    return EvaluationPlan(config, recipe, split, settings, rows, num_samples, ks, device, use_vllm)


def evaluate(
    config: str,
    model_path: str | None = None,
    split: str = "test",
    num_samples: int | None = None,
    ks: tuple[int, ...] = (1, 4, 8),
    num_prompts: int | None = None,
    seed: int = 0,
    output: str | None = None,
    rollouts: str | None = None,
    use_vllm: bool = False,
    show_progress: bool = True,
    **overrides,
) -> dict:
    """Sample as the trainer samples (the recipe's device, dtype, quantization, chat template kwargs and sampling
    settings), score with the recipe's reward set, summarise; writes the JSON summary and the rollouts JSONL."""
    plan = plan_evaluation(config, model_path, split, num_samples, ks, num_prompts, use_vllm, **overrides)
    return run_evaluation(plan, model_path, seed, output, rollouts, show_progress)


def run_evaluation(
    plan: EvaluationPlan,
    model_path: str | None = None,
    seed: int = 0,
    output: str | None = None,
    rollouts: str | None = None,
    show_progress: bool = True,
) -> dict:
    """`evaluate` for a plan: sample the policy at `model_path` (default: the recipe's model), score, summarise."""
    recipe, settings, rows, num_samples, device = plan.recipe, plan.settings, plan.rows, plan.num_samples, plan.device
    config, split, use_vllm = plan.config, plan.split, plan.use_vllm
    model_path = model_path or recipe.model.model_name_or_path
    check_model_folder(model_path, "--model")
    output = Path(
        output or layout.DEFAULT_EVAL_ROOT / layout.evaluation_name(model_path, config, split, len(rows), num_samples)
    )
    rollouts = Path(rollouts or layout.rollouts_beside(output))
    print(
        f"[evaluate] {model_path}: {len(rows)} prompts x {num_samples} samples; writing {output} and {rollouts.name}",
        flush=True,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    prompt_ids = prompt_token_ids(tokenizer, [row["prompt"] for row in rows], recipe.training.chat_template_kwargs)
    torch.manual_seed(seed)
    sample, per_batch, dtype = sampler_for(
        model_path, recipe, settings, num_samples, seed, device, tokenizer, prompt_ids, use_vllm
    )
    start = time.perf_counter()
    completion_ids = generate(sample, prompt_ids, per_batch, num_samples, show_progress)
    generation_s = time.perf_counter() - start
    completions = [tokenizer.batch_decode(ids, skip_special_tokens=True) for ids in completion_ids]
    records = score(rows, completions, recipe.rewards, completion_ids, stop_ids_of(tokenizer))
    components = [key for key in records[0] if key not in RECORD_FIELDS]

    summary = {
        "model": str(model_path),
        "config": config,
        "split": split,
        "num_samples": num_samples,
        "k": plan.ks,
        "seed": seed,
        "sampling": settings,
        "device": device,
        "dtype": dtype,
        "chat_template_kwargs": recipe.training.chat_template_kwargs or {},
        "backend": "vllm" if use_vllm else "transformers",
        "prompts_per_batch": per_batch,
        "rewards": dict(zip(recipe.rewards.names, recipe.rewards.weights)),
        "generation_s": round(generation_s, 3),
        "samples_per_s": round(len(records) / generation_s, 2),
        **summarize(records, num_samples, plan.ks, components),
        "step_metrics": step_metrics_of(records, recipe.rewards, num_samples),
    }
    write_evaluation(summary, records, output, rollouts)
    summary["files"] = {"summary": str(output), "rollouts": str(rollouts)}
    return summary


def check_request(recipe, settings: dict, split: str, num_samples, ks, num_prompts, overrides: dict) -> tuple:
    """(ks, num_samples) of a valid request; a split the recipe's data lacks, a count below 1, a negative temperature,
    several greedy samples or a k outside [1, num_samples] is one ConfigError, before any model loads."""
    if split not in recipe.dataset:
        raise ConfigError("--split", f"{split!r} is not a split of the recipe's data ({list(recipe.dataset)})")
    for name, value in (
        ("--num_samples", num_samples),
        ("--num_prompts", num_prompts),
        ("--max_new_tokens", overrides.get("max_new_tokens")),
    ):
        if value is not None and value < 1:
            raise ConfigError(name, f"must be a positive integer, got {value}")
    if settings["temperature"] < 0:
        raise ConfigError("--temperature", f"must be >= 0 (0 = greedy), got {settings['temperature']}")
    greedy = settings["temperature"] == 0
    ks = [1] if greedy and num_samples is None else sorted(set(ks))
    num_samples = num_samples or ks[-1]
    if greedy and num_samples > 1:
        raise ConfigError("--num_samples", "greedy decoding (temperature 0) gives one distinct sample; use 1")
    if ks[0] < 1 or ks[-1] > num_samples:
        raise ConfigError("--k", f"each k must be in [1, num_samples={num_samples}], got {ks}")
    return ks, num_samples


def sampler_for(model_path, recipe, settings, num_samples, seed, device, tokenizer, prompt_ids, use_vllm) -> tuple:
    """(sample, prompts per batch, dtype name): vLLM's engine, or the policy loaded as the trainer loads it."""
    if use_vllm:
        return vllm_sampler(model_path, recipe, settings, num_samples, seed), 256, recipe.model.dtype
    quiet_progress_bars()  # no "Loading weights" bar in a log
    model = load_policy(model_path, recipe, device)
    per_batch = prompts_per_batch(model, device, num_samples, max(map(len, prompt_ids)), settings["max_new_tokens"])
    sample = hf_sampler(
        model, tokenizer, settings, num_samples, device, recipe.training.generation_kwargs, recipe.speedups
    )
    return sample, per_batch, str(model.dtype).replace("torch.", "")


def stop_ids_of(tokenizer) -> set:
    """The ids that end a completion (EOS, padding): one without them was cut off."""
    eos = tokenizer.eos_token_id
    return {*([eos] if isinstance(eos, int) else eos or []), tokenizer.pad_token_id}


def write_evaluation(summary: dict, records: list[dict], output: Path, rollouts: Path) -> None:
    """The summary as JSON and every scored sample as JSONL."""
    output.parent.mkdir(parents=True, exist_ok=True)
    rollouts.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(summary, indent=2) + "\n")
    with rollouts.open("w") as f:
        f.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument(
        "--config",
        required=True,
        help="recipe YAML: its model loading, chat template kwargs, data, sampling settings and reward set are used",
    )
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the recipe's model_name_or_path)")
    parser.add_argument("--split", default="test")
    parser.add_argument(
        "--num_samples", type=positive_int, default=None, help="samples per prompt, n (default: the largest k)"
    )
    parser.add_argument("--k", type=positive_int, nargs="+", default=[1, 4, 8])
    parser.add_argument(
        "--num_prompts", type=positive_int, default=None, help="first N prompts of the split (default: all)"
    )
    parser.add_argument(
        "--temperature",
        type=non_negative_float,
        default=None,
        help="0 = greedy (one sample, pass@1); default: the recipe's",
    )
    parser.add_argument("--top_p", type=flag_type("top_p"), default=None)
    parser.add_argument("--top_k", type=flag_type("top_k", int), default=None)
    parser.add_argument(
        "--max_new_tokens",
        type=flag_type("max_completion_length", int),
        default=None,
        help="default: the recipe's max_completion_length",
    )
    parser.add_argument("--use_vllm", action="store_true", help="sample with vLLM (GPU, vllm installed), same settings")
    parser.add_argument("--no_progress", dest="show_progress", action="store_false", help="no progress bar")
    parser.add_argument("--seed", type=flag_type("seed", int), default=0)
    parser.add_argument(
        "--output",
        default=None,
        help="JSON summary (default runs/eval/<model path>.<recipe>.<split>.<prompts>x<samples>.json)",
    )
    parser.add_argument("--rollouts", default=None, help="rollouts JSONL (default: beside the summary)")
    args = vars(parser.parse_args(argv))
    if args["output"] and args["rollouts"] and Path(args["output"]).resolve() == Path(args["rollouts"]).resolve():
        raise ConfigError(
            "--rollouts", f"{args['rollouts']} is also --output: the rollouts would overwrite the summary"
        )
    for flag in ("output", "rollouts"):  # written after sampling: a path under a file fails now, not then
        if args[flag]:
            if Path(args[flag]).is_dir():
                raise ConfigError(f"--{flag}", f"{args[flag]} is a folder; give a file path")
            check_writable_folder(Path(args[flag]).absolute().parent, f"--{flag}")
    summary = evaluate(args.pop("config"), model_path=args.pop("model"), ks=tuple(args.pop("k")), **args)
    s = summary["sampling"]
    print(
        f"{summary['model']} on {summary['split']}: {summary[OVERALL][PROMPTS]} prompts x {summary['num_samples']} "
        f"samples, temperature {s['temperature']}, {summary['backend']} on {summary['device']} ({summary['dtype']}), "
        f"{summary['samples_per_s']} samples/s"
    )
    print(format_table(summary))
    print(f"[evaluate] wrote {summary['files']['summary']} and {summary['files']['rollouts']}")
    return summary


if __name__ == "__main__":
    cli(main)
