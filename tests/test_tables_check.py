"""benchmarks/tables_check.py's logic: which committed table a CPU compares with, what counts as the same figure
(the page's printed digit), and the verdict; the re-run itself is the script's job (minutes, not a unit test)."""

from __future__ import annotations

import importlib.util
import json

from conftest import REPO

spec = importlib.util.spec_from_file_location("tables_check", REPO / "benchmarks" / "tables_check.py")
tables_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tables_check)

XEON = "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sse avx2 avx512f amx_tile amx_bf16\n"
EPYC = "model name\t: AMD EPYC 7763 64-Core Processor\nflags\t\t: fpu sse avx2 avx512f\n"


def test_a_cpu_compares_with_the_table_of_its_kind_or_none():
    assert tables_check.cpu_kind(XEON) == "Intel Xeon, AVX-512 + AMX"
    assert tables_check.cpu_kind(EPYC) is None  # no table of the current code was trained on an EPYC
    assert tables_check.cpu_kind(XEON.replace(" amx_tile", "")) is None  # a Xeon without AMX: another kernel set
    assert tables_check.cpu_kind("model name\t: Apple M2\nflags\t\t: neon\n") is None
    for _, _, page in tables_check.PAGES.values():
        rows = json.loads((REPO / page).read_text())
        assert {"grpo-s1", "rloo-s1"} <= {row["run"] for row in rows}  # the rows the check re-runs are on each page


def test_the_same_figure_is_the_same_printed_digit():
    assert tables_check.same("heldout_exact_match_after", 0.598125, 0.5984)  # both 59.8%
    assert not tables_check.same("heldout_exact_match_after", 0.598125, 0.6025)
    assert tables_check.same("speedrun_samples", 6400, 6400) and not tables_check.same("speedrun_samples", 6400, 4480)
    assert tables_check.same("speedrun_samples", None, None) and not tables_check.same("speedrun_samples", None, 6400)


def test_the_verdict_names_each_moved_row_with_its_figures():
    page = [
        {"run": "grpo-s1", "heldout_exact_match_after": 0.598125, "speedrun_samples": 6400},
        {"run": "rloo-s1", "heldout_exact_match_after": 0.5525, "speedrun_samples": 5760},
    ]
    assert tables_check.verdict(tables_check.compare(page, [dict(row) for row in page])) == "current"
    rerun = [dict(page[0], heldout_exact_match_after=0.701875, speedrun_samples=4480), dict(page[1])]
    moved = tables_check.compare(page, rerun)
    assert moved == ["grpo-s1: heldout_exact_match_after 0.598125 -> 0.701875, speedrun_samples 6400 -> 4480"]
    assert tables_check.verdict(moved).startswith("stale: the code moved these rows:\n  grpo-s1")
    assert tables_check.compare(page, rerun[:1])[-1] == "rloo-s1: missing from the re-run"


def test_the_command_is_the_tables_own(tmp_path):
    command = tables_check.sweep_command(tmp_path)
    assert command[-9:] == [
        "sweep",
        "sweeps/reference.yaml",
        "--only",
        "grpo-s1",
        "rloo-s1",
        "--jobs",
        "2",
        "--out",
        str(tmp_path),
    ]
