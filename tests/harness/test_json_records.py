"""Numbers stay numbers and URIs stay URIs: the records of real CLI runs (no Ray needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rl_harness.analysis import RunArtifacts
from rl_harness.cli import main
from rl_harness.harness.atomic import JSONValueError, to_json_value
from tests.tools.helpers import error_line, manifest, run_leaf, write_leaf

NUMPY_RESULT = """
import numpy as np

def run(context):
    return {
        "score": np.float32(0.5),
        "tenth": np.float32(0.1),
        "steps": np.int64(3),
        "flag": np.bool_(True),
        "curve": np.arange(3),
        "matrix": np.array([[0.25, 1.5]], dtype=np.float32),
        "nested": {"count": np.uint8(7), "pair": (np.int32(1), 2.5)},
    }
"""

ECHO_RESUME = """
def run(context):
    return {"resume_from": context.resume_from, "kind": type(context.resume_from).__name__}
"""


def test_numpy_results_are_exact_numbers_through_the_cli(git_repo, capsys):
    repo, _ = git_repo
    run = run_leaf(write_leaf(repo, NUMPY_RESULT), "--no-upload-artifacts")
    assert manifest(run)["status"] == "completed"
    result = json.loads((run / "result.json").read_text())
    assert result == {
        "score": 0.5,
        "tenth": float(np.float32(0.1)),  # the float32's own value, widened exactly
        "steps": 3,
        "flag": True,
        "curve": [0, 1, 2],
        "matrix": [[0.25, 1.5]],
        "nested": {"count": 7, "pair": [1, 2.5]},
    }
    assert isinstance(result["steps"], int) and isinstance(result["nested"]["count"], int)
    # compare reads the number (a string "0.5" used to count as missing)
    capsys.readouterr()
    assert main(["compare", str(run), "--metric", "score", "--json"]) == 0
    (arm,) = json.loads(capsys.readouterr().out)["arms"]
    assert arm["metrics"]["score"]["values"] == [0.5]
    # the run ends with its headline numbers (top-level numbers of the result, in order)
    run_leaf(write_leaf(repo, NUMPY_RESULT, "again"), "--no-upload-artifacts")
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].endswith("result: score 0.5 | tenth 0.1 | steps 3")


def test_write_json_converts_exactly_or_names_the_key(tmp_path):
    assert to_json_value({"a": np.float64(2.0), np.int64(3): np.array([True])}) == {
        "a": 2.0,
        "3": [True],
    }
    with pytest.raises(JSONValueError, match=r"numpy.complex128 at key 'x/0'"):
        to_json_value({"x": [np.complex128(1j)]})
    with pytest.raises(JSONValueError, match="the top level"):
        to_json_value(object())


@pytest.mark.parametrize(
    "uri", ["s3://bucket/exp/tune", "gs://bucket/ckpt", "https://host.example/ckpt"]
)
def test_uris_stay_uris_in_context_manifest_and_records(git_repo, uri):
    repo, _ = git_repo
    run = run_leaf(write_leaf(repo, ECHO_RESUME), "--resume-from", uri, "--no-upload-artifacts")
    record = manifest(run)
    assert record["options"]["resume_from"] == uri
    assert json.loads((run / "result.json").read_text()) == {"resume_from": uri, "kind": "str"}
    assert uri in " ".join(record["command"]["argv"])
    assert RunArtifacts.open(run).manifest["options"]["resume_from"] == uri


def test_a_missing_local_resume_path_is_still_refused(git_repo, capsys):
    repo, _ = git_repo
    leaf = write_leaf(repo, ECHO_RESUME)
    assert main([str(leaf), "--resume-from", str(Path(repo) / "nope")]) == 2
    assert "resume path does not exist" in error_line(capsys)
