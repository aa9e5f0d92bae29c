"""Docs, result pages and code comments describe the software and its measurements, never how the work on it went:
no word of work sessions, tracker issue numbers or who asked for what. Also: the README stays one screen (<= 10 KB),
and every repo path a result page names exists (README and docs/ pages are checked by tests/test_docs_commands.py).

The patterns are narrow on purpose. pytest's own "session" (`scope="session"`, "per test session") and "the homework
asks" (the course homework's questions) are legitimate; "issue 22", "this session", "the fourth session", "as asked"
are not. A hit is listed as file:line: text, all at once.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO
from test_docs_commands import missing_paths

CODE_DIRS = (
    "rlvr",
    "rewards",
    "data",
    "recipes",
    "benchmarks",
    "toy_rlvr",
    "slurm",
    "sweeps",
    "tests",
    "models",
    "accelerate_configs",
    ".ci",
)
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".slurm", ".toml", ".cfg", ".jinja", ""}
THIS_FILE = Path(__file__).resolve()

WORK_LOG_WORDS = re.compile(
    r"(?<!test )(?<!scope=\")(?<!scope=')(?<!wandb )\bsessions?\b"  # a work session, not pytest's or wandb's
    r"|\bissues?\s*#?\s*\d+"  # a tracker reference: issue 22, issue #22, issues 22
    r"|#\d{1,4}\b(?=[^\n]*\bissue)"  # '#22' on a line that speaks of an issue
    r"|\b(?:the|this|that)\s+issue(?:'s)?\b"  # 'the issue measured', 'the target'
    r"|\basked\b"  # who asked for what
    r"|\brequested\s+by\b",
    flags=re.IGNORECASE,
)


def scanned_files() -> list[Path]:
    files = [
        REPO / "README.md",
        REPO / "pyproject.toml",
        *sorted((REPO / "docs").rglob("*.md")),
        *sorted((REPO / "results").rglob("*.md")),
    ]
    for folder in CODE_DIRS:
        files += sorted(
            p
            for p in (REPO / folder).rglob("*")
            if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts and p.resolve() != THIS_FILE
        )
    return [p for p in files if p.exists()]


def work_log_hits(text: str) -> list[tuple[int, str]]:
    """(line number, matched line) for every line that speaks of sessions, issues or who asked."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1) if WORK_LOG_WORDS.search(line)]


def test_the_pattern_flags_work_log_words_and_spares_legitimate_uses():
    flagged = [
        "Measured in the fourth session.",
        "This session looked for it.",
        "earlier sessions gave 60%",
        "issue 22's target x0.33",
        "see issue #31",
        "The case from the issue: two groups",
        "the x0.33 asked",
        "Issues 22 and 23 asked for it",
        "as requested by the reviewer",
    ]
    spared = [
        '@pytest.fixture(scope="session")',
        "one tiny model built once per test session",
        "the homework asks about GRPO vs RLOO",
        "a wandb session opens per run",
        "a known TRL issue with bf16",
        "masked_fill(mask, 0.0)",
        "leaves_torch_at_the_asked_count",
    ]
    assert [text for text in flagged if not WORK_LOG_WORDS.search(text)] == []
    assert [text for text in spared if WORK_LOG_WORDS.search(text)] == []


def test_docs_results_and_comments_speak_of_the_software_not_of_work_sessions():
    hits = [
        f"{path.relative_to(REPO)}:{number}: {line[:160]}"
        for path in scanned_files()
        for number, line in work_log_hits(path.read_text(errors="replace"))
    ]
    assert not hits, "words about how the work went (rephrase as what the software does):\n" + "\n".join(hits)


def test_readme_is_one_screen_of_front_door():
    assert (REPO / "README.md").stat().st_size <= 10_000


def test_every_path_a_result_page_names_exists():
    missing = [
        f"{page.relative_to(REPO)}: {raw}"
        for page in sorted((REPO / "results").rglob("*.md"))
        for raw in missing_paths(page.read_text(), page)
    ]
    assert not missing, "\n".join(missing)


DATED_HEADING = re.compile(r"^#+ .*(\b20\d\d-\d\d-\d\d\b|\(code [0-9a-f]{7,}|\bMeasured:)", flags=re.MULTILINE)


def test_measurement_pages_are_reference_pages_not_a_diary():
    """docs/measurements/ holds the current figure per question (<= 40 KB in all, no dated or per-commit headings,
    no path outside the repository); earlier figures are in the git history."""
    pages = sorted((REPO / "docs" / "measurements").glob("*.md"))
    assert sum(p.stat().st_size for p in pages) <= 40_000
    dated = [f"{p.name}: {m.group(0)}" for p in pages for m in DATED_HEADING.finditer(p.read_text())]
    assert not dated, dated
    outside = [p.name for p in pages if re.search(r"(?<![\w.])\.\./shared/|/work/", p.read_text())]
    assert not outside, outside
