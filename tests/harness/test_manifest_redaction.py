"""No secret reaches a run manifest, whichever path writes it: a run's start and end
(completed, failed, interrupted) and `rl-harness runs --mark-crashed`. The secret is the value
of a secret-named environment variable, and it reaches the run through argv and the options
(a `--set` value) and, on failure, the recipe's error message; a Ray address with credentials
is refused before any folder exists, its line redacted. Real CLI runs of plain recipes (no Ray
is started), real files."""

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
# A budget with a text setting, so the secret reaches argv, options and settings by `--set`.
BUDGET = (
    "from dataclasses import dataclass\n\n@dataclass(frozen=True)\nclass B:\n"
    "    note: str = ''\n\nBUDGETS = {'cpu': B()}\nDEFAULT_BUDGET = 'cpu'\n\n"
)
DECLARED = (
    "\nfrom rl_harness import Recipe\n"
    "RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET)\n"
)
RECIPES = {
    "completed": BUDGET + "def run(context):\n    return {'ok': True}\n" + DECLARED,
    "failed": (
        "import os\n\n" + BUDGET + "def run(context):\n"
        "    raise RuntimeError('login refused for ' + os.environ['CLUSTER_TOKEN'])\n" + DECLARED
    ),
    "interrupted": BUDGET + "def run(context):\n    raise KeyboardInterrupt\n" + DECLARED,
}
EXIT = {"completed": 0, "failed": 1, "interrupted": 130}


def _run(tmp_path: Path, status: str) -> Path:
    leaf = tmp_path / "study" / status / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(RECIPES[status])
    argv = [str(leaf), "--run-id", status, "--set", f"note=token-{SECRET}", "--no-upload-artifacts"]
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
    assert manifest["options"]["set"] == [f"note=token-{REDACTED}"]
    assert f"note=token-{REDACTED}" in manifest["command"]["argv"]
    if status == "failed":
        assert manifest["error"]["message"] == f"login refused for {REDACTED}"


def test_a_ray_address_with_credentials_is_refused_redacted_before_any_folder(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("CLUSTER_TOKEN", SECRET)
    leaf = tmp_path / "study" / "leaf" / "experiment.py"
    leaf.parent.mkdir(parents=True)
    leaf.write_text(RECIPES["completed"])
    assert main([str(leaf), "--ray-address", ADDRESS, "--no-upload-artifacts"]) == 2
    err = capsys.readouterr().err
    assert SECRET not in err and REDACTED_ADDRESS in err
    assert not (leaf.parent / "results").exists()


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
