"""The manifest hashes every source the run imported; `reproduce` refuses when one changed."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rl_harness.cli import main
from rl_harness.harness.provenance import library_root
from tests.tools import recipes
from tests.tools.helpers import manifest, run_dirs, run_leaf

LEAF = """
from {package}.shared import SCALE
from {package}.leaf import base

def run(context):
    return {{"scale": SCALE, "base": base.run(context)}}
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _study(repo: Path, package: str) -> Path:
    """<package>/shared.py (a study helper), <package>/leaf/{base,experiment}.py."""
    leaf = repo / package / "leaf"
    leaf.mkdir(parents=True)
    (repo / package / "__init__.py").write_text("")
    (repo / package / "shared.py").write_text("SCALE = 1.0\n")
    (leaf / "__init__.py").write_text("")
    (leaf / "base.py").write_text(recipes.SEEDED)
    (leaf / "experiment.py").write_text(LEAF.format(package=package))
    return leaf / "experiment.py"


def test_helper_change_is_refused_and_named(git_repo, tmp_path: Path, capfd):
    repo, git = git_repo
    package = f"study_{tmp_path.name.replace('-', '_')}"  # unique: modules stay imported
    leaf = _study(repo, package)
    git("add", "-A")
    git("commit", "-qm", "study")
    original = run_leaf(leaf)

    m = manifest(original)
    sources = m["experiment"]["sources"]
    expected = ["__init__.py", "leaf/__init__.py", "leaf/base.py", "leaf/experiment.py"]
    assert sorted(sources) == sorted(
        [f"{package}/{n}" for n in expected] + [f"{package}/shared.py"]
    )
    assert sources[f"{package}/shared.py"] == _sha(repo / package / "shared.py")
    library = m["library"]["sources"]
    assert library["harness/provenance.py"] == _sha(library_root() / "harness/provenance.py")
    assert not any(name.startswith("harness") for name in sources)  # the library is apart

    (repo / package / "shared.py").write_text("SCALE = 2.0\n")
    git("commit", "-qam", "change the study helper")
    capfd.readouterr()
    assert main(["reproduce", str(original)]) == 2
    err = capfd.readouterr().err
    assert f"experiment sources differ from the record: {package}/shared.py" in err
    assert run_dirs(leaf) == [original]  # nothing ran

    assert main(["reproduce", str(original), "--force"]) == 0  # SCALE moves no metric
    out, err = capfd.readouterr()
    assert "metrics: identical" in out
    assert f"warning: experiment sources differ from the record: {package}/shared.py" in err
    assert len(run_dirs(leaf)) == 2
