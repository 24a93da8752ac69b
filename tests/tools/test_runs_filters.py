"""`rl-harness runs --status / --budget / --library-commit` on real runs of quick recipes."""

from __future__ import annotations

from rl_harness.cli import main
from tests.harness import recipes as harness_recipes
from tests.tools import recipes
from tests.tools.helpers import manifest, run_leaf, write_leaf


def _listed(capsys, *argv: str) -> list[str]:
    assert main(["runs", *argv]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    return [line.split()[0] for line in lines[1:]] if lines[0].startswith("run ") else []


def test_runs_filters_by_status_budget_and_library_commit(git_repo, capsys):
    repo, git = git_repo
    leaf = write_leaf(repo, recipes.SEEDED)
    git("add", "-A")
    git("commit", "-qm", "leaf")
    plain = run_leaf(leaf, "--seed", "1")
    smoke = run_leaf(leaf, "--seed", "2", "--smoke")
    broken = run_leaf(write_leaf(repo, harness_recipes.FAILING, "broken"), "--smoke")
    capsys.readouterr()
    every = [plain.name, smoke.name, broken.name]
    assert _listed(capsys, str(repo)) == every
    assert _listed(capsys, str(repo), "--status", "failed") == [broken.name]
    assert _listed(capsys, str(repo), "--status", "completed", "--status", "failed") == every
    assert _listed(capsys, str(repo), "--budget", "smoke") == [smoke.name, broken.name]
    assert _listed(capsys, str(repo), "--budget", "-") == [plain.name]  # none recorded
    both = ["--budget", "smoke", "--status", "completed"]
    assert _listed(capsys, str(repo), *both) == [smoke.name]
    commit = manifest(plain)["library"]["commit"]
    assert _listed(capsys, str(repo), "--library-commit", commit[:7].upper()) == every
    other = "0000000" if not commit.startswith("0000000") else "1111111"
    assert main(["runs", str(repo), "--library-commit", other]) == 0
    assert "match the filters (3 run(s) in all)" in capsys.readouterr().out


def test_a_bad_filter_is_one_line(tmp_path, capsys):
    for bad, said in (
        (["--status", "done"], "unknown status 'done'; choose from running, completed"),
        (["--library-commit", "main"], "--library-commit takes a commit (hex prefix)"),
    ):
        assert main(["runs", str(tmp_path), *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("rl-harness: error: ") and said in err[0]
