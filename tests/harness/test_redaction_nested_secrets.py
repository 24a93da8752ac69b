"""Secrets that contain one another (issue 49, class 8): the longer one is replaced whole, so
no tail of it survives next to the marker of the shorter. Through a real failing run of the
CLI: its error line, console output, manifest and error.txt."""

from __future__ import annotations

import json
from pathlib import Path

from rl_harness.cli import main
from rl_harness.harness.redaction import REDACTED

SHORT = "s3cr3t-base"  # a password
LONG = SHORT + "-TAIL-ONLY-IN-THE-LONG-ONE"  # a token built from it
LEAKY = """
import os

def run(context):
    raise RuntimeError("login as " + os.environ["SVC_TOKEN"] + " / " + os.environ["DB_PASSWORD"])
"""


def test_a_secret_containing_another_is_redacted_whole(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("DB_PASSWORD", SHORT)
    monkeypatch.setenv("SVC_TOKEN", LONG)
    leaf = tmp_path / "study" / "leaky" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(LEAKY)

    assert main([str(leaf), "--no-upload-artifacts"]) == 1
    captured = capsys.readouterr()
    (run,) = (leaf.parent / "results").iterdir()
    manifest = json.loads((run / "run_manifest.json").read_text())
    assert manifest["error"]["message"] == f"login as {REDACTED} / {REDACTED}"
    texts = {
        "stdout": captured.out,
        "stderr": captured.err,
        # (the repo patches hold source text, this test's own included)
        **{name: (run / name).read_text() for name in ("run_manifest.json", "error.txt")},
    }
    for name, text in texts.items():
        assert "TAIL-ONLY" not in text, name
        assert SHORT not in text, name
