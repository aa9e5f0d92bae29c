"""The same held-out prompts rolled out before and after training, side by side, with pass@k by word length.

    python -m rlvr.analysis.before_after --before models/tiny-speller --after runs/tiny-grpo --config recipes/tiny/grpo.yaml

Sampling, scoring and pass@k are `rlvr.analysis.evaluate`'s (the recipe's own sampling settings and reward functions), so the
comparison measures exactly what training optimised. Output (default `<after>/before_after/`): `before.json`,
`after.json` and their rollouts JSONL from the evaluator, `before_after.json` (the pairing) and `before_after.md`.
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.analysis.evaluate import evaluate
from rlvr.analysis.tables import markdown_table, text_table
from rlvr.inputs import (
    ArgumentParser,
    ConfigError,
    check_writable_folder,
    cli,
    non_negative_int,
    one_line,
    positive_int,
    read_json,
)
from rlvr.metrics.keys import BINARY, BY_LENGTH, OVERALL, PER_K, PROMPTS, mean_key
from rlvr.runs import layout
from rlvr.training.validation import MODEL_FILES, flag_type

SIDES = ("before", "after")
MEAN_CORRECTNESS = mean_key("correctness")  # per prompt: over its samples


def compare(
    before: str,
    after: str,
    config: str,
    num_prompts: int = 32,
    num_samples: int | None = None,
    ks=(1, 4, 8),
    seed: int = 0,
    out_dir=None,
    use_vllm: bool = False,
) -> dict:
    """Evaluate both models on the first `num_prompts` test prompts and pair their rollouts prompt by prompt."""
    out = Path(out_dir or Path(after) / layout.BEFORE_AFTER_DIR)
    summaries, records = {}, {}
    for side, model in zip(SIDES, (before, after)):
        summary = evaluate(
            config,
            model_path=model,
            num_prompts=num_prompts,
            num_samples=num_samples,
            ks=tuple(ks),
            seed=seed,
            output=str(out / f"{side}.json"),
            rollouts=str(layout.rollouts_beside(out / f"{side}.json")),
            use_vllm=use_vllm,
        )
        summaries[side] = summary
        records[side] = [json.loads(line) for line in Path(summary["files"]["rollouts"]).read_text().splitlines()]
    comparison = {
        "config": config,
        "models": {"before": before, "after": after},
        "summaries": summaries,
        "prompts": pair_prompts(records["before"], records["after"]),
    }
    return save(comparison, out)


def save(comparison: dict, out: Path) -> dict:
    """`before_after.json` (what `load` and the report read) and `before_after.md` into `out`. A comparison may carry
    a `note`: one markdown line the report prints above it (how it was measured, by whom)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / layout.BEFORE_AFTER).write_text(json.dumps(comparison, indent=2, ensure_ascii=False) + "\n")
    (out / "before_after.md").write_text(render_markdown(comparison) + "\n")
    return comparison


def pair_prompts(before: list[dict], after: list[dict]) -> list[dict]:
    """Per prompt: both models' first sample with its reward components, and their mean correctness over samples."""

    def by_prompt(records):
        grouped = {}
        for r in records:
            grouped.setdefault(r["prompt_id"], []).append(r)
        return grouped

    sides = {"before": by_prompt(before), "after": by_prompt(after)}
    pairs = []
    for prompt_id, first in sorted(sides["before"].items()):
        row = {key: first[0][key] for key in ("prompt_id", "question", "answer", "difficulty")}
        for side in SIDES:
            samples = sides[side].get(prompt_id, [])
            shown = samples[0] if samples else {}
            row[side] = {key: shown.get(key) for key in ("completion", "correctness", "format", "success", BINARY)}
            row[side][MEAN_CORRECTNESS] = sum(s["correctness"] for s in samples) / len(samples) if samples else None
        pairs.append(row)
    return pairs


def changes(pairs: list[dict]) -> dict[str, int]:
    """How many prompts got better, worse or stayed level (mean correctness over their samples)."""
    deltas = [p["after"][MEAN_CORRECTNESS] - p["before"][MEAN_CORRECTNESS] for p in pairs]
    return {
        "improved": sum(d > 1e-9 for d in deltas),
        "regressed": sum(d < -1e-9 for d in deltas),
        "unchanged": sum(abs(d) <= 1e-9 for d in deltas),
    }


def pass_at_k_table(comparison: dict) -> tuple[list[str], list[list]]:
    """Rows per word length (and all): prompts, then each metric before -> after."""
    before, after = (comparison["summaries"][side] for side in SIDES)
    metrics = [key for key in before[OVERALL] if key.startswith(PER_K)] + [mean_key("format")]
    headers = ["length", "prompts", *(f"{m} {side}" for m in metrics for side in SIDES)]
    blocks = [
        *((length, before[BY_LENGTH][length], after[BY_LENGTH].get(length, {})) for length in before[BY_LENGTH]),
        ("all", before[OVERALL], after[OVERALL]),
    ]
    rows = [[length, b[PROMPTS], *(block.get(m) for m in metrics for block in (b, a))] for length, b, a in blocks]
    return headers, rows


def rollout_rows(comparison: dict, show: int, code: bool = False) -> tuple[list[str], list[list]]:
    """The first `show` prompts side by side; `code` (Markdown) wraps text in code spans so `<answer>` tags show,
    and has room for longer completions than a terminal."""
    text = (lambda t: "`" + t.replace("`", "'") + "`") if code else (lambda t: t)
    width = 100 if code else 48
    headers = ["#", "len", "question", "answer", "before", "corr/fmt", "after", "corr/fmt"]
    rows = []
    for p in comparison["prompts"][:show]:
        sides = [
            (text(_clip(p[s]["completion"], width)), f"{p[s]['correctness']:.2f}/{p[s]['format']:.2f}") for s in SIDES
        ]
        rows.append(
            [p["prompt_id"], p["difficulty"], text(_clip(p["question"], 60)), text(p["answer"]), *sides[0], *sides[1]]
        )
    return headers, rows


def render_markdown(comparison: dict, show: int = 12) -> str:
    """The before/after section of a report: what changed, pass@k by word length, rollouts side by side."""
    models, counts = comparison["models"], changes(comparison["prompts"])
    n = comparison["summaries"]["before"]["num_samples"]
    return "\n\n".join(
        [
            *([comparison["note"]] if comparison.get("note") else []),
            (
                f"Before: `{models['before']}` · after: `{models['after']}` · {len(comparison['prompts'])} held-out "
                f"prompts x {n} samples, the recipe's sampling settings (`{comparison['config']}`)."
            ),
            (
                f"Per prompt (mean correctness over its samples): **{counts['improved']} improved, {counts['regressed']} "
                f"regressed, {counts['unchanged']} unchanged**."
            ),
            (
                "pass@k and maj@k (both exact over every k of the n samples) and mean format reward by word length, "
                "before and after:"
            ),
            markdown_table(*pass_at_k_table(comparison)),
            f"The first sample of each prompt (first {min(show, len(comparison['prompts']))}), scored correctness/format:",
            markdown_table(*rollout_rows(comparison, show, code=True)),
        ]
    )


def render_text(comparison: dict, show: int = 8) -> str:
    counts = changes(comparison["prompts"])
    return "\n\n".join(
        [
            text_table(*pass_at_k_table(comparison)),
            text_table(*rollout_rows(comparison, show)),
            f"prompts improved {counts['improved']}, regressed {counts['regressed']}, unchanged {counts['unchanged']}",
        ]
    )


def load(run_dir) -> dict | None:
    """A saved comparison inside a run directory, if before_after was run into it. A damaged file, or one without
    the fields `render_markdown` reads (tried on it here), is one ConfigError naming it."""
    path = Path(run_dir) / layout.BEFORE_AFTER_DIR / layout.BEFORE_AFTER
    if not path.exists():
        return None
    comparison = read_json(path, "RUN_DIR", dict)
    try:
        render_markdown(comparison)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError) as err:
        raise ConfigError(
            "RUN_DIR", f"{path} is not a comparison as before_after writes it ({one_line(err)})"
        ) from None
    return comparison


def _clip(text: str | None, width: int = 48) -> str:
    """One line (newlines and control bytes escaped); long text keeps its head and its tail, where the answer is."""
    text = "" if text is None else repr(text)[1:-1]
    return text if len(text) <= width else text[: width // 2 - 1] + "…" + text[-(width - width // 2) :]


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--before", required=True, help="model folder before training (e.g. models/tiny-speller)")
    parser.add_argument("--after", required=True, help="model folder after training (a run's output_dir)")
    parser.add_argument("--config", required=True, help="recipe YAML: held-out split and sampling settings")
    parser.add_argument("--num_prompts", type=positive_int, default=32, help="first N held-out prompts")
    parser.add_argument(
        "--num_samples", type=positive_int, default=None, help="samples per prompt (default: the largest k)"
    )
    parser.add_argument("--k", type=positive_int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--seed", type=flag_type("seed", int), default=0)
    parser.add_argument("--out", default=None, help=f"output folder (default <after>/{layout.BEFORE_AFTER_DIR})")
    parser.add_argument("--show", type=non_negative_int, default=8, help="prompts printed side by side")
    parser.add_argument("--use_vllm", action="store_true", help="sample with vLLM (GPU, vllm installed)")
    args = parser.parse_args(argv)
    for flag in ("before", "after"):
        folder = Path(getattr(args, flag))
        if not any((folder / name).exists() for name in MODEL_FILES):
            raise ConfigError(
                f"--{flag}", f"no model at {str(folder)!r} (a folder with config.json or adapter_config.json)"
            )
    if args.out:
        check_writable_folder(args.out, "--out")
    print(f"[before-after] writing to {Path(args.out or Path(args.after) / layout.BEFORE_AFTER_DIR)}/", flush=True)
    comparison = compare(
        args.before,
        args.after,
        args.config,
        args.num_prompts,
        args.num_samples,
        args.k,
        args.seed,
        args.out,
        args.use_vllm,
    )
    print(render_text(comparison, args.show))
    print(f"[before-after] wrote {Path(args.out or Path(args.after) / layout.BEFORE_AFTER_DIR) / 'before_after.md'}")
    return comparison


if __name__ == "__main__":
    cli(main)
