"""`rl-harness sweep` resuming and reading its children (issue 49, classes 3-4), through the
CLI on real child runs of Ray-free leaves:

- a rerun with the same options in another order (flags, `--set` overrides) is the same run:
  found completed, not trained again;
- a child whose process died while its manifest still says `running` is reported failed.
"""

from __future__ import annotations

import json

from rl_harness.cli import main
from tests.harness.test_budgets import BUDGETED
from tests.tools.helpers import manifest, run_dirs, write_leaf

# Dies without a word: no handler runs, so the manifest keeps the status it had: running.
DIES = """
import os

def run(context):
    os._exit(9)
"""


def test_a_rerun_with_options_in_another_order_is_done_before(git_repo, capsys):
    repo, _ = git_repo
    leaf = write_leaf(repo, BUDGETED, "budgeted")
    first = ["--budget", "full", "--set", "iterations=7", "--set", "lr=0.5"]
    first += ["--hardware-profile", "cpu-local"]
    again = ["--hardware-profile", "cpu-local", "--set", "lr=0.5", "--budget", "full"]
    again += ["--set", "iterations=7"]
    assert main(["sweep", str(leaf), "--seeds", "0", *first, "--no-upload-artifacts"]) == 0
    (run,) = run_dirs(leaf)
    result = json.loads((run / "result.json").read_text())
    assert (result["budget"], result["iterations"], result["lr"]) == ("full", 7, 0.5)
    capsys.readouterr()

    assert main(["sweep", str(leaf), "--seeds", "0", "--no-upload-artifacts", *again]) == 0
    out = capsys.readouterr().out
    assert run_dirs(leaf) == [run]  # not trained again
    assert f"done before  {run.name}" in out

    # Another value is another run.
    other = [*again[:-1], "iterations=8"]
    assert main(["sweep", str(leaf), "--seeds", "0", "--no-upload-artifacts", *other]) == 0
    assert len(run_dirs(leaf)) == 2


def test_a_child_that_died_with_its_manifest_running_is_failed(git_repo, capsys):
    repo, _ = git_repo
    leaf = write_leaf(repo, DIES, "dies")
    assert main(["sweep", str(leaf), "--seeds", "0", "--no-upload-artifacts"]) == 1
    out = capsys.readouterr().out
    (run,) = run_dirs(leaf)
    assert manifest(run)["status"] == "running"  # what the dead child left behind
    assert f"{leaf} seed 0: failed, console in " in out
    final_row = out.strip().splitlines()[-2]  # the table's row, then the failure line
    assert final_row.split()[1:5] == ["-", "0", "failed", run.name]  # arm, seed, status, run
