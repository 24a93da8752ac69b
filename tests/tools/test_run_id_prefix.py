"""A RUN argument that is both a whole run id and the prefix of another (run-1, run-10).

`rl-harness show/diff/reproduce RUN` accept a run id or a unique prefix of one; a whole id
must name its own run even when it also begins a longer one, and only a true prefix of
several runs is ambiguous.
"""

from __future__ import annotations

import json

from rl_harness.cli import main
from tests.tools import recipes
from tests.tools.helpers import run_leaf, write_leaf


def test_a_whole_run_id_wins_over_the_runs_it_prefixes(git_repo, monkeypatch, capsys):
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.SEEDED)
    git("add", "-A")
    git("commit", "-qm", "leaf")
    run_1 = run_leaf(leaf, "--run-id", "run-1", "--seed", "1")
    run_10 = run_leaf(leaf, "--run-id", "run-10", "--seed", "10")
    assert (run_1.name, run_10.name) == ("run-1", "run-10")
    monkeypatch.chdir(repo)
    capsys.readouterr()

    for run_id, seed in (("run-1", 1), ("run-10", 10)):
        assert main(["show", run_id, "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["manifest"]["run_id"] == run_id and shown["manifest"]["seed"] == seed

    assert main(["show", "run-"]) == 2  # a true prefix of both
    assert "2 runs match 'run-'" in capsys.readouterr().err
    assert main(["diff", "run-1", "run-10"]) in (0, 1)  # both resolve, each to itself
    out = capsys.readouterr().out
    assert "run-1" in out and "run-10" in out
