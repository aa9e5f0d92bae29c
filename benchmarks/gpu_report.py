"""The tables of a GPU measurement page from `benchmarks/gpu_check.py`'s `gpu_check.json`, as Markdown.

    python benchmarks/gpu_report.py runs/gpu_check/gpu_check.json     # the page's tables, then README's GPU rows

Every figure comes from the file: a row the run did not measure says why (its note), and README's rows keep the
planned figure beside the measured one, marked with the GPU it was measured on.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the repo root

from rlvr.inputs import ArgumentParser, ConfigError, cli, read_text
from rlvr.metrics.keys import TIME_PHASES
from rlvr.planning import GIB, MARGIN_BYTES


def gib(value) -> str:
    return "–" if value is None else f"{value / GIB:.2f}"


def short_device(device: str) -> str:
    """'NVIDIA H200' -> 'H200' (how README's table names the GPU)."""
    return device.removeprefix("NVIDIA ").strip()


def fit_table(rows: list[dict]) -> list[str]:
    """Peak against the plan (allocator, margin left out) and the training throughput of each 6.9 GiB config."""
    lines = [
        (
            "| config | steps, cap | planned GiB | measured GiB | fits | samples/s | tokens/s (step / generating) | "
            "time split (generation / scoring / log-probs / optimization) | seconds (write + run) |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        f = row["figures"]
        window = f.get("window") or (f.get("uncapped") or {}).get("window") or {}  # a run that hit the cap: uncapped
        split = (
            " / ".join(f"{window['seconds'][p] / window['seconds']['total']:.0%}" for p in TIME_PHASES)
            if window
            else "–"
        )
        rates = f"{window['tokens_per_s']:.0f} / {window['generation_tokens_per_s']:.0f}" if window else "–"
        fits = "–" if row["fits"] is None else ("yes" if row["fits"] else f"NO: {row['note']}")
        seconds = f"{f['write_s']} + {f['seconds']}" if "write_s" in f else row["note"] or "–"
        samples = "–" if row["value"] is None else f"{row['value']:.2f}"
        lines.append(
            f"| `{row['name']}` | {row['phase']} | {gib(row['planned'])} | {gib(row['measured'])} | {fits} | "
            f"{samples} | {rates} | {split} | {seconds} |"
        )
    return lines


def other_table(rows: list[dict]) -> list[str]:
    """The main job, speed-up and other rows: what was measured, in the row's own words."""
    lines = ["| section | case | what | result |", "|---|---|---|---|"]
    lines += [f"| {r['section']} | {r['name']} | {r['phase']} | {r['note'] or '–'} |" for r in rows]
    return lines


def readme_cells(rows: list[dict], device: str) -> list[str]:
    """README's 'peak GiB, planned / measured' cell per fit config: planned with the margin (as `rlvr plan` prints
    it), measured by the allocator on `device`; unmeasured rows keep 'not measured'."""
    gpu = short_device(device)
    cells = []
    for row in rows:
        planned = gib(row["planned"] + MARGIN_BYTES) if row["planned"] is not None else "–"
        measured = f"{gib(row['measured'])} ({gpu})" if row["measured"] is not None and row["fits"] else "not measured"
        cells.append(f"`recipes/{row['name']}.yaml`: {planned} / {measured}")
    return cells


def report(data: dict) -> str:
    rows = data["rows"]
    fit = [r for r in rows if r["section"] == "fit"]
    other = [r for r in rows if r["section"] != "fit"]
    parts = [
        (f"Device: {data['device']}; arguments: `{' '.join(data.get('argv', []))}`; {data.get('elapsed_s', '?')} s."),
        "",
    ]
    if fit:
        parts += fit_table(fit) + [""]
    if other:
        parts += other_table(other) + [""]
    if fit:
        parts += ["README's GPU table, peak GiB planned / measured:", ""] + [
            f"- {c}" for c in readme_cells(fit, data["device"])
        ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> str:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("json", help="gpu_check.json from benchmarks/gpu_check.py --out")
    args = parser.parse_args(argv)
    try:
        data = json.loads(read_text(args.json, "json"))
    except json.JSONDecodeError as err:
        raise ConfigError("json", f"{args.json} is not JSON ({err.msg}, line {err.lineno})") from None
    text = report(data)
    print(text)
    return text


if __name__ == "__main__":
    cli(main)
