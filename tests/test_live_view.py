"""Live curves without an account: a run with `--report_to tensorboard` writes its rows (our zero-std and reward
components among them) into `<output_dir>/tensorboard/`, TensorBoard serves them on 127.0.0.1, and a real headless
browser shows the zero-std card with the run's values.

The browser test is slow-marked for one reason: it needs a Chromium binary (Debian's `apt-get install chromium`) and
playwright to drive it, and CI installs with pip only. Run it with
`apt-get install -y chromium && pip install -e ".[live-test]"`, then
`python -m pytest -m slow tests/test_live_view.py`."""

import contextlib
import importlib.util
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import read_jsonl

from rlvr.inputs import ConfigError
from rlvr.runs import tracking

needs_tensorboard = pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None, reason="tensorboard is the `live` extra (pip install -e '.[live]')"
)

CURVES = ("zero_std_frac/total", "zero_std_frac/correctness", "avg_correctness", "avg_format")
VIEWER_START_S = 120  # how long to wait for TensorBoard to load the event files (a wait, not a measurement)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


@contextlib.contextmanager
def viewer(logdir: Path, tag: str):
    """TensorBoard on 127.0.0.1 as a user starts it, yielding its address once it serves `tag`."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    address = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + VIEWER_START_S
        while True:
            try:
                if tag in get_json(f"{address}/data/plugin/scalars/tags").get(".", {}):
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"TensorBoard never served {tag}: {process.stderr.read1().decode()[-2000:]}")
            time.sleep(0.5)
        yield address
    finally:
        process.terminate()
        process.wait(timeout=30)


def tensorboard_run(run_recipe, monkeypatch) -> tuple[Path, list[dict]]:
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)  # restored after the test: the runner sets it
    _, out = run_recipe("--max_steps", "3", "--report_to", "tensorboard")
    rows = [row for row in read_jsonl(Path(out) / "metrics.jsonl") if "loss" in row]
    return Path(out), rows


def test_report_to_tensorboard_without_it_installed_is_one_line_of_bad_input(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "tensorboard" else real_find_spec(name)
    )
    with pytest.raises(ConfigError, match="tensorboard is not installed") as err:
        tracking.configure_trackers(["tensorboard"], "runs/x")
    assert err.value.field == "report_to"


@needs_tensorboard
def test_a_tensorboard_folder_that_cannot_be_made_is_one_line_before_anything_is_written(monkeypatch, tmp_path):
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "afile" / "tb"))
    with pytest.raises(ConfigError, match="is a file, not a folder") as err:
        tracking.configure_trackers(["tensorboard"], str(tmp_path / "run"))
    assert err.value.field == "TENSORBOARD_LOGGING_DIR" and not (tmp_path / "run").exists()
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR")
    with pytest.raises(ConfigError, match="unknown tracker 'tensorbord'; did you mean 'tensorboard'") as err:
        tracking.check_trackers(["tensorbord"], None)
    assert err.value.field == "report_to"


@needs_tensorboard
def test_each_run_writes_into_its_own_folder_unless_the_user_chose_one(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    for run in ("a", "b"):  # two runs in one process (a test run, a notebook)
        tracking.configure_tensorboard(["tensorboard"], str(tmp_path / run))
        assert tracking.os.environ["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / run / "tensorboard")
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(tmp_path / "mine"))
    assert f"--logdir {tmp_path / 'mine'} " in tracking.configure_tensorboard(["tensorboard"], str(tmp_path / "c"))
    assert tracking.configure_tensorboard(["none"], str(tmp_path / "d")) is None


@needs_tensorboard
def test_the_viewer_serves_our_curves_with_the_run_values(run_recipe, monkeypatch, capsys):
    out, rows = tensorboard_run(run_recipe, monkeypatch)
    assert f"tensorboard --logdir {out / 'tensorboard'} --host 127.0.0.1" in capsys.readouterr().out
    with viewer(out / "tensorboard", "train/zero_std_frac/total") as address:
        for key in CURVES:
            query = urllib.parse.urlencode({"run": ".", "tag": f"train/{key}"})
            served = [(step, value) for _, step, value in get_json(f"{address}/data/plugin/scalars/scalars?{query}")]
            assert served == [(row["step"], pytest.approx(row[key], abs=1e-6)) for row in rows], key


@needs_tensorboard
@pytest.mark.slow  # needs Chromium (apt-get) and playwright; CI installs with pip only
def test_live_view_in_a_headless_browser(run_recipe, monkeypatch, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium binary: apt-get install -y chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    out, rows = tensorboard_run(run_recipe, monkeypatch)
    tag = "train/zero_std_frac/total"
    with viewer(out / "tensorboard", tag) as address, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{address}/?tagFilter={urllib.parse.quote(tag)}#timeseries")
        card = page.locator("scalar-card", has_text=tag).first
        card.wait_for(timeout=60_000)
        card.locator("text=Relative").wait_for(timeout=60_000)  # the data table under the chart has rendered
        page.wait_for_timeout(1000)  # the chart's line is drawn after its table
        page.screenshot(path=str(tmp_path / "live_view.png"))
        words = card.inner_text().split()
        browser.close()
    print(f"screenshot: {tmp_path / 'live_view.png'}")
    # the table row under the chart: run ".", smoothed, value, step, relative time
    run_at = words.index(".", words.index("Relative"))
    value, step = float(words[run_at + 2]), int(words[run_at + 3])
    assert step == rows[-1]["step"] and value == pytest.approx(rows[-1]["zero_std_frac/total"], abs=1e-4)
    assert (tmp_path / "live_view.png").stat().st_size > 10_000
