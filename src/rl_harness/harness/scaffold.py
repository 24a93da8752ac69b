"""Scaffold a personal experiment repo, offline (the `rl-harness new PATH` command).

The new repo is a git repo with one commit: a uv project (package `experiments`) that depends
on rl-harness through a path source to the library checkout this command ran from (a plain
dependency when the library is not a git checkout), one tiny example leaf with its test
(`tests/test_example_leaf.py`: the leaf trains at its smoke budget), a ruff configuration its
leaves pass (`ruff check`, `ruff format --check`), a .gitignore that keeps artifacts out of
git, and an AGENTS.md. Nothing is downloaded: `uv sync` is left to the
user.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rl_harness.harness.gitinfo import find_git_root
from rl_harness.harness.provenance import library_root

LEAF_MODULE = "experiments.example_study.smoke.experiment"
LEAF_PATH = "experiments/example_study/smoke/experiment.py"
# `--template NAME`: the leaf added beside the CartPole example, (module, path, source file
# under templates/; kept as text: the harness layer names no environment itself).
TEMPLATES = {
    "cartpole": None,
    "hmm-probe": (
        "experiments.hmm_probe.belief.experiment",
        "experiments/hmm_probe/belief/experiment.py",
        "hmm_probe_experiment.py.template",
    ),
}
TEMPLATE_DIR = Path(__file__).parent / "templates"
FALLBACK_IDENTITY = ("rl-harness new", "rl-harness-new@localhost")


class ScaffoldError(ValueError):
    """Bad input or a failed step: printed as one line, exit code 2."""


PYTHON_VERSION = "3.13"


def library_checkout() -> Path | None:
    """The git checkout holding the running rl_harness package, if it is one."""
    root = find_git_root(library_root())
    if root is None:
        return None
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file() or 'name = "rl-harness"' not in pyproject.read_text("utf-8"):
        return None
    return root


def source_path(repo: Path, library: Path) -> str:
    """`../rl-harness` style when the library sits beside the repo, else absolute."""
    repo, library = repo.resolve(), library.resolve()
    if library.parent == repo.parent:
        return os.path.relpath(library, repo)
    return str(library)


def distribution_name(folder: str) -> str:
    name = re.sub(r"[^a-z0-9]+", "-", folder.lower()).strip("-")
    if not name:
        raise ScaffoldError(f"cannot derive a project name from {folder!r}; pass --name")
    return name


def pyproject_text(name: str, library_source: str | None) -> str:
    sources = (
        f'\n[tool.uv.sources]\nrl-harness = {{ path = "{library_source}", editable = true }}\n'
        if library_source
        else ""
    )
    return f"""[project]
name = "{name}"
version = "0.1.0"
description = "Experiments on rl-harness (package `experiments`)"
requires-python = ">=3.13"
dependencies = ["rl-harness"]
{sources}
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
packages = ["experiments"]

[dependency-groups]
dev = ["pytest", "ruff"]

[tool.ruff]
line-length = 100
extend-exclude = ["**/artifacts/**"]

[tool.ruff.lint.isort]
# The library in its own block after the other third-party imports, as its own code does.
section-order = [
    "future", "standard-library", "third-party", "rl-harness", "first-party", "local-folder",
]

[tool.ruff.lint.isort.sections]
rl-harness = ["rl_harness"]

[tool.pytest.ini_options]
pythonpath = ["."]  # this repo's `experiments` first
testpaths = ["tests"]
"""


EXAMPLE_TEST_PATH = "tests/test_example_leaf.py"
EXAMPLE_TEST = f'''\
"""The example leaf runs end to end at its smoke budget, with the records every run keeps.

A leaf of your own gets a test like this one: `uv run pytest` (a smoke run takes seconds).
"""

from __future__ import annotations

import json

from rl_harness import train


def test_the_example_leaf_trains_at_its_smoke_budget(tmp_path):
    run = train(
        "{LEAF_MODULE}",
        smoke=True,
        results_dir=tmp_path / "results",
        artifacts_dir=tmp_path / "artifacts",
    )
    assert run.status == "completed", run.error
    assert run.result["iterations"] == 2
    manifest = json.loads((run.results_dir / "run_manifest.json").read_text())
    assert manifest["options"]["smoke"] is True
'''


GITIGNORE = """\
# Large run outputs (checkpoints, rollouts); results/<run-id>/ stays tracked.
experiments/**/artifacts/
__pycache__/
.venv/
.pytest_cache/
.ruff_cache/
"""

EXAMPLE_LEAF = '''\
"""Tiny PPO on CartPole: the smallest complete recipe, to check the setup end to end.

Budgets: smoke = 2 iterations of 200 env steps (seconds); cpu (the default) = 20 iterations
of 2000 steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from ray.rllib.algorithms.ppo import PPOConfig

from rl_harness import RETURN_KEY, Recipe, RunContext, run_algorithm


@dataclass(frozen=True)
class Budget:
    iterations: int  # PPO iterations (one algo.train() each)
    train_batch: int  # env steps per iteration (train_batch_size_per_learner)
    minibatch: int  # SGD minibatch size
    num_epochs: int  # SGD passes over each train batch
    checkpoint_every: int  # iterations between checkpoints (0: none but the last)


SMOKE = Budget(iterations=2, train_batch=200, minibatch=100, num_epochs=2, checkpoint_every=0)
CPU = Budget(iterations=20, train_batch=2000, minibatch=250, num_epochs=6, checkpoint_every=5)


def build_config(plan: Budget) -> PPOConfig:
    return (
        PPOConfig()
        .environment("CartPole-v1")
        .training(
            train_batch_size_per_learner=plan.train_batch,
            minibatch_size=plan.minibatch,
            num_epochs=plan.num_epochs,
            lr=3e-4,
        )
        .rl_module(model_config={"fcnet_hiddens": [32, 32]})
    )


def run(context: RunContext[Budget]) -> dict:
    plan = context.settings  # the chosen budget, --set applied (the harness)
    result = run_algorithm(
        build_config(plan),
        context,
        stop=plan.iterations,
        checkpoint_every=plan.checkpoint_every,
    )
    return {
        "iterations": result.iterations,
        "episode_return_mean": result.final_metrics.get(RETURN_KEY),
    }


# What the harness reads: the budgets, chosen by name, never by the hardware: `--smoke`
# (= `--budget smoke`), `--budget cpu` (the default); `--set iterations=40` changes one
# setting; `--show-settings` lists them.
RECIPE = Recipe(run=run, budgets={"smoke": SMOKE, "cpu": CPU}, default="cpu")
'''


def readme_text(name: str, library_source: str | None) -> str:
    setup = (
        f"`pyproject.toml` installs rl-harness editable from `{library_source}` "
        "(`[tool.uv.sources]`); move or clone the library there if it is missing."
        if library_source
        else "`pyproject.toml` depends on `rl-harness` from your package index; add a "
        '`[tool.uv.sources]` path source (`rl-harness = { path = "../rl-harness", '
        "editable = true }`) to work on a library checkout."
    )
    return f"""# {name}

Personal experiments on rl-harness: one leaf per folder under `experiments/`, each an
`experiment.py` with `run(context)` declared as `RECIPE = Recipe(run=run, ...)`.

## Setup

{setup}

```bash
uv sync                                         # creates .venv and uv.lock
uv run rl-harness {LEAF_MODULE} --smoke
```

## Records

Every run writes `results/<run-id>/` beside its `experiment.py` (manifest with both repos'
commits, metrics.jsonl, summary.json: commit them) and `artifacts/<run-id>/` (checkpoints:
ignored by git). `uv run rl-harness runs` lists them; `show`, `diff` and `reproduce` read them.
"""


AGENTS = f"""# Experiment repo: agent notes

- Package `experiments`; a leaf is a folder with `experiment.py` defining `run(context)` and
  declaring `RECIPE = Recipe(run=run, budgets=..., default=...)` (see `{LEAF_PATH}`). New
  study: `experiments/<study>/<leaf>/experiment.py`
  plus `__init__.py` files.
- Run: `uv run rl-harness experiments.<study>.<leaf>.experiment --smoke` (seconds) before any
  full run; `--seed N` sets the one root seed (default 42).
- Recipes own their science (env, model, budget); the harness owns seeds, records and
  hardware. Budgets: a frozen dataclass, its instances in `RECIPE`'s `budgets` with its
  `default`, read as `context.settings` (`def run(context: RunContext[Budget])`;
  `--budget NAME`, `--set KEY=VALUE`, `--show-settings`).
  Use `rl_harness` APIs (`run_algorithm`, `run_tune`, `RunContext`); do not copy
  library code here, change the library in its own repo.
- `results/<run-id>/` is small and tracked; `artifacts/` is ignored. Commit code before runs
  you care about: the manifest records this repo's commit and the library's separately, and
  `rl-harness reproduce` refuses when the code differs from the record.
"""


@dataclass(frozen=True)
class Scaffold:
    root: Path
    name: str
    library_source: str | None
    template: str = "cartpole"

    @property
    def leaf_module(self) -> str:
        """The leaf to try first: the template's, else the CartPole example."""
        chosen = TEMPLATES[self.template]
        return chosen[0] if chosen else LEAF_MODULE

    def files(self) -> dict[str, str]:
        files = {
            "pyproject.toml": pyproject_text(self.name, self.library_source),
            ".python-version": PYTHON_VERSION + "\n",  # as `uv init` and the library do
            ".gitignore": GITIGNORE,
            "README.md": readme_text(self.name, self.library_source),
            "AGENTS.md": AGENTS,
            "experiments/__init__.py": '"""Experiments: one leaf folder per experiment.py."""\n',
            "experiments/example_study/__init__.py": "",
            "experiments/example_study/smoke/__init__.py": "",
            LEAF_PATH: EXAMPLE_LEAF,
            EXAMPLE_TEST_PATH: EXAMPLE_TEST,
        }
        chosen = TEMPLATES[self.template]
        if chosen is not None:
            _, path, source = chosen
            folder = Path(path).parent
            files[str(folder.parent / "__init__.py")] = ""
            files[str(folder / "__init__.py")] = ""
            files[path] = (TEMPLATE_DIR / source).read_text(encoding="utf-8")
        return files


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60
        )
    except FileNotFoundError:
        raise ScaffoldError("git is not installed; `rl-harness new` needs it") from None


def _checked_git(root: Path, *args: str) -> None:
    out = _git(root, *args)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise ScaffoldError(f"git {args[0]} failed in {root}: {last}")


def initial_commit(root: Path) -> None:
    """git init + first commit; an identity is supplied only when none is configured."""
    _checked_git(root, "init", "-q", "-b", "main")
    _checked_git(root, "add", "-A")
    identity: tuple[str, ...] = ()
    if not _git(root, "config", "user.email").stdout.strip():
        name, email = FALLBACK_IDENTITY
        identity = ("-c", f"user.name={name}", "-c", f"user.email={email}")
        print(f"note: no git identity configured; first commit made as {email}")
    _checked_git(root, *identity, "commit", "-q", "-m", "Scaffold experiment repo (rl-harness new)")


def check_target(path: Path) -> Path:
    if path.exists() and not path.is_dir():
        raise ScaffoldError(f"{path} exists and is not a folder")
    if path.is_dir() and any(path.iterdir()):
        raise ScaffoldError(f"{path} exists and is not empty; choose a new folder")
    return path.resolve()


def scaffold(path: Path, *, name: str | None = None, template: str = "cartpole") -> Scaffold:
    """Write the repo at `path` (absent or empty) and make its first commit; `template`
    (one of TEMPLATES) adds its leaf beside the CartPole example."""
    if template not in TEMPLATES:
        raise ScaffoldError(f"unknown template {template!r}; choose one of {', '.join(TEMPLATES)}")
    root = check_target(Path(path).expanduser())
    library = library_checkout()
    plan = Scaffold(
        root=root,
        name=distribution_name(name or root.name),
        library_source=source_path(root, library) if library else None,
        template=template,
    )
    for relative, text in plan.files().items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    initial_commit(root)
    return plan
