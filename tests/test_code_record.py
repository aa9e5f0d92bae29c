"""code.json: the fingerprint moves with any training code (not its comments) or library version, a resumed run under
other code keeps its first record and becomes unshareable, and the checkout's fingerprint covers rewards/, data/ and
recipes/."""

import json

from conftest import REPO

from rlvr.runs.code_record import code_identity, other_code, package_roots, record_code, sources_digest


def test_the_digest_moves_with_content_and_path_and_ignores_bytecode(tmp_path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "b.py").write_text("y = 2\n")
    first = sources_digest([root])
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "a.cpython-311.py").write_text("stale")
    (root / "notes.md").write_text("not code")
    assert sources_digest([root]) == first
    (root / "a.py").write_text('"""A docstring that says why."""\n\nx = 1  # a comment\n')
    assert sources_digest([root]) == first  # the code is the same
    (root / "a.py").write_text("x = 2\n")
    assert sources_digest([root]) != first
    (root / "a.py").write_text("x = 1\n")
    assert sources_digest([root]) == first
    (root / "sub" / "b.py").rename(root / "b.py")  # same content, another module
    assert sources_digest([root]) != first


def test_the_checkouts_fingerprint_covers_the_training_sources_and_not_the_analysis():
    roots = {root.resolve() for root in package_roots()}
    for folder in ("rlvr/training", "rlvr/speedups", "rlvr/metrics", "rewards", "data", "recipes"):
        assert (REPO / folder).resolve() in roots, folder
    assert (REPO / "rlvr" / "analysis").resolve() not in roots
    identity = code_identity()
    assert len(identity["sources"]) == 16 and identity["libraries"]["torch"] and identity["libraries"]["trl"]


def test_a_run_resumed_under_other_code_keeps_its_first_record_and_is_not_shareable(tmp_path):
    now = {"sources": "aaaa", "libraries": {"torch": "2.13.0", "trl": "1.16.0"}}
    assert other_code(tmp_path, now) == "it has no code.json (trained before runs recorded their code)"
    record_code(tmp_path, now, HERE)
    assert json.loads((tmp_path / "code.json").read_text()) == {"trained_by": now, "machine": HERE}
    assert other_code(tmp_path, now) is None
    record_code(tmp_path, now, HERE)  # resumed under the same code: unchanged
    assert json.loads((tmp_path / "code.json").read_text()) == {"trained_by": now, "machine": HERE}
    assert other_code(tmp_path, {**now, "sources": "bbbb"}) == "other code trained it (the training sources)"
    newer = {**now, "libraries": {"torch": "2.13.0", "trl": "1.17.0"}}
    assert other_code(tmp_path, newer) == "other code trained it (trl 1.16.0 -> 1.17.0)"
    record_code(tmp_path, newer, HERE)  # resumed after an upgrade
    assert json.loads((tmp_path / "code.json").read_text()) == {
        "trained_by": now,
        "machine": HERE,
        "resumed_by": [newer],
    }
    assert other_code(tmp_path, now) == other_code(tmp_path, newer) == "it was resumed under other code"


HERE = {"cpu": "Example CPU", "cpu_capability": "AVX2", "cores": 2, "platform": "Linux", "gpu": None}


def test_the_machine_is_recorded_and_a_resume_elsewhere_is_listed_but_stays_shareable(tmp_path):
    now = {"sources": "aaaa", "libraries": {"torch": "2.13.0"}}
    elsewhere = {**HERE, "cpu": "Other CPU", "cpu_capability": "AVX512"}
    record_code(tmp_path, now, HERE)
    record_code(tmp_path, now, elsewhere)
    record = json.loads((tmp_path / "code.json").read_text())
    assert record == {"trained_by": now, "machine": HERE, "resumed_on": [elsewhere]}
    assert other_code(tmp_path, now) is None  # the machine is recorded, not compared


def test_this_machine_names_its_cpu_and_the_kernels_torch_dispatches_to():
    import torch

    from rlvr.runs.code_record import machine_identity

    machine = machine_identity()
    assert machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and machine["cores"] >= 1
    assert machine["cpu"]  # /proc/cpuinfo's model name on Linux
