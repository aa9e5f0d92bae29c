import subprocess
import sys

import pytest
from rlvr.data.generate import build_dataset, load_task_dataset
from rlvr.data.spec import DataSpec

from rlvr.inputs import ConfigError

SPEC = {
    "size": 400,
    "seed": 7,
    "test_size": 40,
    "specs": [{"name": "spell_backward", "config": {"min_word_len": 3, "max_word_len": 6}}],
}


def test_same_spec_and_seed_give_identical_rows():
    first, second = build_dataset(DataSpec.from_dict(SPEC)), build_dataset(DataSpec.from_dict(SPEC))
    assert first["train"].to_list() == second["train"].to_list()
    assert first["test"].to_list() == second["test"].to_list()
    other = build_dataset(DataSpec.from_dict({**SPEC, "seed": 8}))
    assert other["train"]["question"] != first["train"]["question"]


def test_no_question_in_both_splits_and_rows_carry_scoring_columns():
    dataset = build_dataset(DataSpec.from_dict(SPEC))
    assert len(dataset["test"]) == 40
    assert not set(dataset["train"]["question"]) & set(dataset["test"]["question"])
    row = dataset["train"][0]
    assert row["prompt"][0]["role"] == "system" and row["prompt"][-1] == {"role": "user", "content": row["question"]}
    assert row["task"] == "spell_backward" and 3 <= row["difficulty"] <= 6
    assert row["answer"] == row["question"].rsplit(": ", 1)[1][::-1]


def test_weighted_mixture_of_any_reasoning_gym_tasks():
    spec = DataSpec.from_dict(
        {
            "size": 300,
            "test_size": 20,
            "system_prompt": None,
            "specs": [{"name": "spell_backward", "weight": 3}, {"name": "basic_arithmetic", "weight": 1}],
        }
    )
    dataset = build_dataset(spec)
    tasks = dataset["train"]["task"]
    assert set(tasks) == {"spell_backward", "basic_arithmetic"}
    assert tasks.count("spell_backward") > 2 * tasks.count("basic_arithmetic")
    assert dataset["train"][0]["prompt"][0]["role"] == "user"  # no system turn


@pytest.mark.parametrize(
    "spec, field",
    [
        (
            {"specs": [{"name": "spell_backward", "config": {"min_word_len": 9, "max_word_len": 3}}]},
            "data.specs[0].config",
        ),
        ({"specs": [{"name": "no_such_task"}]}, "data.specs[0].name"),
        ({"specs": [{"name": "spell_backward", "config": {"bogus": 1}}]}, "data.specs[0].config"),
        ({"specs": [{"name": "spell_backward", "weight": 0}]}, "data.specs[0].weight"),
        ({"specs": []}, "data.specs"),
        ({"specs": [{"name": "spell_backward"}], "size": 10, "test_size": 10}, "data.test_size"),
        ({"specs": [{"name": "spell_backward"}], "sise": 10}, "data.sise"),
    ],
)
def test_bad_specs_name_the_field(spec, field):
    with pytest.raises(ConfigError) as err:
        DataSpec.from_dict(spec)
    assert err.value.field == field
    assert "\n" not in str(err.value)


def test_saved_dataset_loads_back_and_bad_sources_fail_clearly(tmp_path):
    dataset = build_dataset(DataSpec.from_dict(SPEC))
    dataset.save_to_disk(tmp_path / "ds")
    assert load_task_dataset(str(tmp_path / "ds"))["test"].to_list() == dataset["test"].to_list()
    dataset.remove_columns("metadata").save_to_disk(tmp_path / "bad")
    with pytest.raises(ConfigError, match="lacks columns"):
        load_task_dataset(str(tmp_path / "bad"))


def test_cli_writes_card_and_offline_push_fails_with_one_line(tmp_path):
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("data: {size: 200, test_size: 10, specs: [{name: spell_backward}]}\n")
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "data.cli",
            "--config",
            str(spec_file),
            "--output_dir",
            str(out),
            "--push_to_hub",
            "me/x",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and error_lines[0].startswith("error: --push_to_hub:")
    assert "Traceback" not in result.stderr
    assert (out / "dataset_dict.json").exists()  # the local copy was written before the push failed
    assert "seed: 42" in (out / "README.md").read_text()


def test_difficulty_is_an_int_whatever_the_source_gave():
    import numpy as np
    from datasets import Value
    from rlvr.data.generate import _entry_to_row, as_difficulty

    assert [as_difficulty(v) for v in (4, 4.0, "4", np.int64(4), " 7 ")] == [4, 4, 4, 4, 7]
    assert [as_difficulty(v) for v in (None, "hard", 4.5, float("nan"), True)] == [None] * 5
    entry = {"question": "q", "answer": "a", "metadata": {"source_dataset": "spell_backward", "word_len": "4"}}
    assert _entry_to_row(entry, None)["difficulty"] == 4
    built = build_dataset(DataSpec.from_dict(SPEC))["train"]
    assert built.features["difficulty"] == Value("int64") and isinstance(built[0]["difficulty"], int)


def test_a_stored_string_difficulty_column_loads_as_int(tmp_path):
    from datasets import Dataset, DatasetDict, Value

    rows = [{"prompt": "p", "answer": "a", "metadata": "{}", "difficulty": d} for d in ("4", "10", None)]
    DatasetDict({"train": Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "ds"))
    loaded = load_task_dataset(str(tmp_path / "ds"))["train"]
    assert loaded.features["difficulty"] == Value("int64") and loaded["difficulty"] == [4, 10, None]


def test_evaluation_breakdown_lists_word_lengths_in_numeric_order():
    from rlvr.metrics.scoring import summarize

    records = [
        {
            "prompt_id": i,
            "difficulty": d,
            "correctness": 0.0,
            "format": 1.0,
            "success": 0.0,
            "binary": 0.0,
            "exact": False,
            "answer": "ab",
            "completion": "<answer>ba</answer>",
        }
        for i, d in enumerate((10, 3, 9, None))
    ]
    assert list(summarize(records, 1, [1])["by_length"]) == ["3", "9", "10", "None"]


def test_a_named_held_out_set_is_one_balanced_set_whatever_the_training_mix():
    from collections import Counter

    from rlvr.data.generate import build_dataset
    from rlvr.data.spec import DataSpec

    def data(max_word_len: int):
        return build_dataset(
            DataSpec.from_dict(
                {
                    "size": 400,
                    "seed": 3,
                    "system_prompt": "tiny",
                    "held_out": "spell_backward_3_10",
                    "specs": [{"name": "spell_backward", "config": {"min_word_len": 3, "max_word_len": max_word_len}}],
                }
            )
        )

    short, long = data(4), data(10)
    assert short["test"]["question"] == long["test"]["question"]  # the same prompts, whatever is trained
    assert Counter(short["test"]["difficulty"]) == {length: 40 for length in range(3, 11)}
    for split in (short, long):
        assert not set(split["train"]["question"]) & set(split["test"]["question"])
        assert len(split["train"]) > 300
