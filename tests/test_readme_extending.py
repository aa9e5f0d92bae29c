"""README's "Extending" example runs as written: its reward module and recipe, copied into a fresh `my_project/`
folder beside copies of the recipes and the tiny speller, train with README's own command line (plus `--max_steps 2`
to keep CI short) typed in a newcomer's shell with the environment entered (conftest.newcomer_shell), and the custom
reward reaches metrics.jsonl with a value that varies (not a constant)."""

from __future__ import annotations

import json
import re
import shlex
import shutil

from conftest import REPO, newcomer_shell


def extending_section() -> str:
    text = (REPO / "README.md").read_text()
    return text.split("## Extending", 1)[1].split("\n## ", 1)[0]


def blocks(section: str) -> dict[str, str]:
    """language -> body of each fenced block of the section."""
    return {
        m.group(1): m.group(2) for m in re.finditer(r"^```(\w+)\n(.*?)^```", section, flags=re.DOTALL | re.MULTILINE)
    }


def test_readme_extending_example_runs_as_written(tmp_path):
    found = blocks(extending_section())
    assert {"python", "yaml", "bash"} <= set(found)
    for language in ("python", "yaml"):  # each file block names its path on its first line
        first, _body = found[language].split("\n", 1)
        target = tmp_path / first.lstrip("# ").strip()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(found[language])
    for folder in ("recipes", "models"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    command = [line for line in found["bash"].splitlines() if line.strip() and not line.startswith("#")]
    assert len(command) == 1
    # typed in the newcomer's shell README's quickstart leaves (environment entered), 2 of the recipe's 20 steps
    result = newcomer_shell(tmp_path, command[0] + " --max_steps 2 --report_to none")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "would train on a constant" not in result.stdout + result.stderr
    rows = [json.loads(line) for line in (tmp_path / "runs" / "brevity" / "metrics.jsonl").read_text().splitlines()]
    brevity = [row["avg_brevity"] for row in rows if "avg_brevity" in row]
    assert len(brevity) == 2 and all(0.0 < value < 1.0 for value in brevity)
    assert any("zero_std_frac/brevity" in row for row in rows)
    assert shlex.split(command[0])[0].startswith("PYTHONPATH=")  # README says where the module must live
