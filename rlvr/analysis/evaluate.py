"""Evaluate any checkpoint on a recipe's held-out prompts: pass@k, exact match and mean reward, by word length.

    python -m rlvr.analysis.evaluate --model models/tiny-speller --config recipes/tiny/grpo.yaml --k 1 4 8 --output eval.json

The data spec and the sampling settings (temperature, top_p, top_k, min_p, repetition_penalty, max_completion_length)
come from the recipe YAML, so "before" and "after" are measured exactly as GRPO samples; flags override them.
Completions are scored by the same reward functions the trainer uses (`rewards.functions`). pass@k uses the
unbiased estimator over n samples per prompt, 1 - C(n-c, k) / C(n, k); pass@1 equals the exact-match rate.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

from rlvr.cli import ArgumentParser, ConfigError

SAMPLES_PER_BATCH = 512  # sequences per `generate` call: big batches amortise the per-token Python overhead on CPU


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


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


def generate(model, tokenizer, prompts: list, num_samples: int, settings: dict) -> list[list[str]]:
    """`num_samples` completions per conversational prompt, batched with left padding; decoded as TRL decodes them."""
    import torch

    tokenizer.padding_side = "left"
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
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    per_batch = max(1, SAMPLES_PER_BATCH // num_samples)
    completions = []
    for start in range(0, len(texts), per_batch):
        batch = tokenizer(texts[start : start + per_batch], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**batch, **kwargs)
        decoded = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        completions += [decoded[i : i + num_samples] for i in range(0, len(decoded), num_samples)]
    return completions


def score(rows: list[dict], completions: list[list[str]]) -> list[dict]:
    """One record per rollout with its reward components, from the trainer's own reward functions."""
    from rlvr.rewards.functions import binary, correctness, format

    records = []
    for prompt_id, (row, samples) in enumerate(zip(rows, completions)):
        answers, metadata = [row["answer"]] * len(samples), [row["metadata"]] * len(samples)
        scores = zip(correctness(samples, answers, metadata), format(samples), binary(samples, answers, metadata))
        for sample_id, (text, (corr, fmt, binr)) in enumerate(zip(samples, scores)):
            records.append({
                "prompt_id": prompt_id, "sample": sample_id, "question": row["question"], "answer": row["answer"],
                "difficulty": row["difficulty"], "completion": text,
                "correctness": corr, "format": fmt, "binary": binr, "exact": corr == 1.0,
            })
    return records


def summarize(records: list[dict], num_samples: int, ks: list[int]) -> dict:
    """Exact match, mean rewards and pass@k, overall and per difficulty (word length)."""
    by_prompt = defaultdict(list)
    for record in records:
        by_prompt[record["prompt_id"]].append(record)

    def block(prompt_ids: list[int]) -> dict:
        rollouts = [r for p in prompt_ids for r in by_prompt[p]]
        correct = [sum(r["exact"] for r in by_prompt[p]) for p in prompt_ids]
        out = {"prompts": len(prompt_ids), "samples": len(rollouts)}
        out["exact_match"] = sum(r["exact"] for r in rollouts) / len(rollouts)
        for key in ("correctness", "format", "binary"):
            out[f"mean_{key}"] = sum(r[key] for r in rollouts) / len(rollouts)
        for k in ks:
            out[f"pass@{k}"] = sum(pass_at_k(num_samples, c, k) for c in correct) / len(correct)
        return out

    lengths = defaultdict(list)
    for prompt_id, rollouts in by_prompt.items():
        lengths[rollouts[0]["difficulty"]].append(prompt_id)
    return {
        "overall": block(list(by_prompt)),
        "by_length": {str(length): block(ids) for length, ids in sorted(lengths.items(), key=lambda kv: str(kv[0]))},
    }


def format_table(summary: dict) -> str:
    ks = [key for key in summary["overall"] if key.startswith("pass@")]
    headers = ["length", "prompts", "exact", "correct", "format", *ks]
    rows = [[length, b["prompts"], b["exact_match"], b["mean_correctness"], b["mean_format"], *(b[k] for k in ks)]
            for length, b in [*summary["by_length"].items(), ("all", summary["overall"])]]
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = lambda values: "  ".join(v.rjust(w) for v, w in zip(values, widths))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


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
    **overrides,
) -> dict:
    """Sample, score and summarise; writes the JSON summary and the rollouts JSONL; returns the summary."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.training.config import parse_args, validate

    args, training, model_args = parse_args(["--config", config])
    model_path = model_path or model_args.model_name_or_path
    if not (Path(model_path) / "config.json").exists():
        raise ConfigError("--model", f"no model at {model_path!r} (a folder with config.json)")
    model_args.model_name_or_path = model_path
    recipe = validate(args, training, model_args)
    settings = sampling_settings(recipe.training, overrides)
    if split not in recipe.dataset:
        raise ConfigError("--split", f"{split!r} is not a split of the recipe's data ({list(recipe.dataset)})")
    greedy = settings["temperature"] == 0
    ks = [1] if greedy and num_samples is None else sorted(set(ks))
    num_samples = num_samples or ks[-1]
    for name, value in (("--num_samples", num_samples), ("--num_prompts", num_prompts)):
        if value is not None and value < 1:
            raise ConfigError(name, f"must be a positive integer, got {value}")
    if greedy and num_samples > 1:
        raise ConfigError("--num_samples", "greedy decoding (temperature 0) gives one distinct sample; use 1")
    if ks[0] < 1 or ks[-1] > num_samples:
        raise ConfigError("--k", f"each k must be in [1, num_samples={num_samples}], got {ks}")
    rows = recipe.dataset[split]
    rows = [rows[i] for i in range(min(num_prompts or len(rows), len(rows)))]

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    torch.manual_seed(seed)
    start = time.perf_counter()
    completions = generate(model, tokenizer, [row["prompt"] for row in rows], num_samples, settings)
    generation_s = time.perf_counter() - start
    records = score(rows, completions)

    summary = {
        "model": str(model_path), "config": config, "split": split, "num_samples": num_samples, "k": ks,
        "seed": seed, "sampling": settings, "generation_s": round(generation_s, 3),
        "samples_per_s": round(len(records) / generation_s, 2), **summarize(records, num_samples, ks),
    }
    output = Path(output or Path("runs/eval") / f"{Path(model_path).name}_{split}.json")
    rollouts = Path(rollouts or output.with_suffix(".rollouts.jsonl"))
    output.parent.mkdir(parents=True, exist_ok=True)
    rollouts.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(summary, indent=2) + "\n")
    with rollouts.open("w") as f:
        f.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    summary["files"] = {"summary": str(output), "rollouts": str(rollouts)}
    return summary


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="recipe YAML: its data spec and sampling settings are used")
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the recipe's model_name_or_path)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--num_samples", type=int, default=None, help="samples per prompt, n (default: the largest k)")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--num_prompts", type=int, default=None, help="first N prompts of the split (default: all)")
    parser.add_argument("--temperature", type=float, default=None, help="0 = greedy (one sample, pass@1); default: the recipe's")
    parser.add_argument("--top_p", type=float, default=None)
    parser.add_argument("--top_k", type=int, default=None)
    parser.add_argument("--max_new_tokens", type=int, default=None, help="default: the recipe's max_completion_length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="JSON summary (default runs/eval/<model>_<split>.json)")
    parser.add_argument("--rollouts", default=None, help="rollouts JSONL (default: beside the summary)")
    args = vars(parser.parse_args(argv))
    summary = evaluate(
        args.pop("config"), model_path=args.pop("model"), ks=tuple(args.pop("k")), **args
    )
    s = summary["sampling"]
    print(f"{summary['model']} on {summary['split']}: {summary['overall']['prompts']} prompts x {summary['num_samples']} "
          f"samples, temperature {s['temperature']}, {summary['samples_per_s']} samples/s")
    print(format_table(summary))
    print(f"summary: {summary['files']['summary']}  rollouts: {summary['files']['rollouts']}")
    return summary


if __name__ == "__main__":
    try:
        main()
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
