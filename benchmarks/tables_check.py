"""Are README's algorithm tables what today's code trains? Re-run a few named rows and compare them with the page.

    python benchmarks/tables_check.py                  # GRPO and RLOO, seed 1, default kernels: about 3 minutes
    python benchmarks/tables_check.py --dry_run        # which page this CPU compares with, and the command

Why: a change that sums anything in another order (a faster attention, a fused kernel) moves every trained figure
the way another seed does, and the committed tables then describe earlier code. This re-runs `ROWS` of
sweeps/reference.yaml the way the tables were made (`rlvr sweep ... --jobs 2`: one thread a run, two at a time,
default kernels) and compares held-out exact match (to the printed 0.1 point) and speedrun samples (exactly) with the
committed summary of the same CPU kind. It says "current", or "stale: the code moved these rows" with each row's
figures, or that no committed table was trained on this CPU kind. Run it after any change that may change rounding
on the training path (docs/sweeps.md); exit 0 current, 1 stale, 3 not comparable here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from the repo root

from rlvr.inputs import ArgumentParser, cli
from rlvr.runs import layout, tools

SPEC = "sweeps/reference.yaml"
ROWS = ("grpo-s1", "rloo-s1")  # GRPO, and an algorithm without an importance ratio in its advantage
COMPARED = {"heldout_exact_match_after": 0.001, "speedrun_samples": 0}  # summary field -> printed resolution
# The committed tables by CPU kind: (what /proc/cpuinfo shows, the flags its default kernels use) -> summary
PAGES = {
    "Intel Xeon, AVX-512 + AMX": (("Xeon",), ("avx512f", "amx_tile"), "results/algorithms/summary.json"),
}


def cpu_kind(cpuinfo: str) -> str | None:
    """The PAGES kind whose model name and flags this CPU has (None: no committed table for it)."""
    model = next((line.split(":", 1)[1] for line in cpuinfo.splitlines() if line.startswith("model name")), "")
    flags = set(next((line.split(":", 1)[1] for line in cpuinfo.splitlines() if line.startswith("flags")), "").split())
    for kind, (names, needed, _) in PAGES.items():
        if any(name in model for name in names) and set(needed) <= flags:
            return kind
    return None


def same(field: str, page, now) -> bool:
    """Equal as the page prints them: exact match to 0.1 point, speedrun samples exactly (None: never reached)."""
    if page is None or now is None:
        return page is None and now is None
    resolution = COMPARED[field]
    return round(page / resolution) == round(now / resolution) if resolution else page == now


def compare(page_rows: list[dict], new_rows: list[dict], names=ROWS) -> list[str]:
    """One line per row that moved: 'grpo-s1: heldout_exact_match_after 0.598 -> 0.702, ...'; empty = current."""
    page = {row["run"]: row for row in page_rows}
    new = {row["run"]: row for row in new_rows}
    moved = []
    for name in names:
        if name not in page or name not in new:
            moved.append(f"{name}: missing from {'the page' if name not in page else 'the re-run'}")
            continue
        changes = [
            f"{field} {page[name].get(field)} -> {new[name].get(field)}"
            for field in COMPARED
            if not same(field, page[name].get(field), new[name].get(field))
        ]
        if changes:
            moved.append(f"{name}: " + ", ".join(changes))
    return moved


def verdict(moved: list[str]) -> str:
    return "current" if not moved else "stale: the code moved these rows:\n  " + "\n  ".join(moved)


def sweep_command(out: Path) -> list[str]:
    return [*tools.command("rlvr"), "sweep", SPEC, "--only", *ROWS, "--jobs", "2", "--out", str(out)]


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="where the re-run goes (default: a temporary folder, removed after)")
    parser.add_argument("--dry_run", action="store_true", help="say what would be compared and run nothing")
    args = parser.parse_args(argv)
    kind = cpu_kind(Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else "")
    if kind is None:
        print(f"not comparable: no committed table was trained on this CPU kind (tables: {', '.join(PAGES)})")
        return 3
    page_path = REPO / PAGES[kind][2]
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(args.out or scratch)
        command = sweep_command(out)
        print(f"[tables_check] {kind}: {', '.join(ROWS)} against {PAGES[kind][2]}\n$ {' '.join(command)}", flush=True)
        if args.dry_run:
            return 0
        subprocess.run(command, check=True, cwd=REPO)
        new_rows = json.loads((out / "reference" / layout.SUMMARY_JSON).read_text())
    print(verdict(moved := compare(json.loads(page_path.read_text()), new_rows)))
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(cli(main))
