"""No secret reaches a run manifest, whichever path writes it: a run's start and end
(completed, failed, interrupted) and `rl-harness runs --mark-crashed`. The secret is the value
of a secret-named environment variable, and it reaches the run through argv and the options
(a Ray address with credentials) and, on failure, the recipe's error message. Real CLI runs
of plain recipes (no Ray is started), real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rl_harness.cli import main
from rl_harness.harness.redaction import REDACTED

SECRET = "cluster-secret-31337"
# The URL's password is dropped as a credential; the query value only as the environment's
# secret (its name marks nothing).
ADDRESS = f"ray://researcher:{SECRET}@127.0.0.1:1/?cluster={SECRET}"
REDACTED_ADDRESS = f"ray://127.0.0.1:1/?cluster={REDACTED}"
RECIPES = {
    "completed": "def run(context):\n    return {'ok': True}\n",
    "failed": (
        "import os\n\ndef run(context):\n"
        "    raise RuntimeError('login refused for ' + os.environ['CLUSTER_TOKEN'])\n"
    ),
    "interrupted": "def run(context):\n    raise KeyboardInterrupt\n",
}
EXIT = {"completed": 0, "failed": 1, "interrupted": 130}


def _run(tmp_path: Path, status: str) -> Path:
    leaf = tmp_path / "study" / status / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(RECIPES[status])
    argv = [str(leaf), "--run-id", status, "--ray-address", ADDRESS, "--no-upload-artifacts"]
    assert main(argv) == EXIT[status]
    return leaf.parent / "results" / status


@pytest.mark.parametrize("status", sorted(RECIPES))
def test_a_secret_in_argv_options_or_error_never_reaches_the_manifest(
    tmp_path, monkeypatch, status
):
    monkeypatch.setenv("CLUSTER_TOKEN", SECRET)
    text = (_run(tmp_path, status) / "run_manifest.json").read_text()
    manifest = json.loads(text)
    assert manifest["status"] == status
    assert SECRET not in text
    assert manifest["options"]["ray_address"] == REDACTED_ADDRESS
    assert REDACTED_ADDRESS in manifest["command"]["argv"]
    if status == "failed":
        assert manifest["error"]["message"] == f"login refused for {REDACTED}"


def test_mark_crashed_writes_the_manifest_redacted(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CLUSTER_TOKEN", SECRET)
    results = _run(tmp_path, "completed")
    path = results / "run_manifest.json"
    # A record left `running` by a process that is gone, holding the secret in clear (as a
    # record written before redaction, or by hand, would).
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_OUT)
    manifest = json.loads(path.read_text())
    manifest["status"] = "running"
    manifest["process"]["pid"] = int(gone.stdout)
    manifest["notes"] = f"started with token {SECRET}"
    path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["runs", str(tmp_path), "--mark-crashed"]) == 0
    text = path.read_text()
    assert json.loads(text)["status"] == "crashed"
    assert SECRET not in text and json.loads(text)["notes"] == f"started with token {REDACTED}"


_OUT = {"capture_output": True, "text": True, "check": True}
