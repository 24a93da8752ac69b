"""`rl-harness compare` and `compare_runs` on real runs made through the CLI in a git repo."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest
from scipy.stats import t

from rl_harness.analysis.comparison import ComparisonError, compare_runs, write_comparison
from rl_harness.cli import main
from tests.tools.helpers import error_line, manifest, run_leaf, write_leaf

# Seeded returns around SHIFT and a real probe report (global and within-branch R²).
ARM = """
import numpy as np
from rl_harness.analysis import ProbeSettings, evaluate_probe
from rl_harness.harness.atomic import write_json_atomic
from rl_harness.harness.metrics import MetricsLog
from rl_harness.seeding import stream_rng

SHIFT = {shift}


def run(context):
    rng = stream_rng(context.seed, "demo")
    log = MetricsLog(context.results_dir / "metrics.jsonl")
    for i in range(2):
        log.append({{
            "training_iteration": i + 1,
            "env_runners/episode_return_mean": 10.0 * SHIFT + float(rng.normal(0.0, 1.0)),
            "env_runners/episode_len_mean": 10.0,
        }})
    tokens = rng.integers(0, 3, size=(24, 8))
    hidden = rng.normal(size=(24, 8))
    targets = np.stack([tokens + hidden, hidden], axis=-1)
    features = np.stack([tokens, SHIFT * hidden + rng.normal(size=hidden.shape)], axis=-1)
    settings = ProbeSettings(seed=context.seed, n_bootstrap=20, branch_depth=1)
    report = evaluate_probe(features, targets, settings, branch_tokens=tokens).report
    write_json_atomic(context.results_dir / "probe_metrics.json", {{"probe": report.to_dict()}})
    return {{"shift": SHIFT}}
"""
FAILS = """
def run(context):
    raise RuntimeError("boom")
"""
R2 = "probe_metrics.json:probe/r2_pooled"
WITHIN = "probe_metrics.json:probe/within_branch/r2_pooled"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Two arms (3 and 2 seeds) and a failed run, in an experiment repo; made once."""
    root = tmp_path_factory.mktemp("cmp") / "exp-repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "test@example.com")
    _git(root, "config", "user.name", "Test")
    leaves = {
        "a": write_leaf(root, ARM.format(shift=1), "a"),
        "b": write_leaf(root, ARM.format(shift=3), "b"),
        "broken": write_leaf(root, FAILS, "broken"),
    }
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "arms")
    runs = {"a": [], "b": []}
    for arm, seeds in (("a", (1, 2, 3)), ("b", (4, 5))):
        for seed in seeds:
            runs[arm].append(run_leaf(leaves[arm], "--seed", str(seed), "--no-upload-artifacts"))
    run_leaf(leaves["broken"], "--no-upload-artifacts")
    return root / "study", runs


def _final(run: Path, key: str) -> float:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return rows[-1][key]


def test_arms_seeds_means_and_intervals(study):
    folder, runs = study
    comparison = compare_runs([folder])
    assert comparison.metrics[:3] == ["return_per_step", R2, WITHIN]
    arms = {arm.arm: arm for arm in comparison.arms}
    assert sorted(arms) == ["study/a", "study/b"]  # the failed run is not counted
    assert arms["study/a"].n_runs == 3 and sorted(arms["study/a"].seeds) == [1, 2, 3]
    assert sorted(arms["study/b"].seeds) == [4, 5]
    for name, paths in runs.items():
        summary = arms[f"study/{name}"].metrics
        per_step = [_final(p, "env_runners/episode_return_mean") / 10.0 for p in paths]
        mean = sum(per_step) / len(per_step)
        sd = math.sqrt(sum((v - mean) ** 2 for v in per_step) / (len(per_step) - 1))
        half = t.ppf(0.975, len(per_step) - 1) * sd / math.sqrt(len(per_step))
        got = summary["return_per_step"]
        assert sorted(got.values) == pytest.approx(sorted(per_step), abs=1e-12)
        assert (got.mean, got.low, got.high) == pytest.approx((mean, mean - half, mean + half))
        probes = [json.loads((p / "probe_metrics.json").read_text())["probe"] for p in paths]
        assert sorted(summary[R2].values) == sorted(p["r2_pooled"]["value"] for p in probes)
        assert sorted(summary[WITHIN].values) == sorted(
            p["within_branch"]["r2_pooled"]["value"] for p in probes
        )
    # The arm whose features hold more of the hidden part explains more within branches.
    assert arms["study/b"].metrics[WITHIN].mean > arms["study/a"].metrics[WITHIN].mean
    # A single run folder works too, and gives a mean without an interval.
    single = compare_runs([runs["b"][0]], ["env_runners/episode_return_mean"])
    only = single.arms[0].metrics["env_runners/episode_return_mean"]
    assert only.n == 1 and only.low is None
    assert only.mean == _final(runs["b"][0], "env_runners/episode_return_mean")


def test_mixed_library_commits_are_refused_and_named(study, tmp_path):
    folder = tmp_path / "study"
    shutil.copytree(study[0], folder)  # a copy: the shared study stays as it was
    run = sorted((folder / "a" / "results").iterdir())[0]
    other = run.parent / "copied-run"
    shutil.copytree(run, other)
    record = manifest(other)
    record["run_id"], record["library"]["commit"] = "copied-run", "f" * 40
    (other / "run_manifest.json").write_text(json.dumps(record))
    with pytest.raises(ComparisonError, match="2 library commits .*ffffffffffff: copied-run"):
        compare_runs([folder])
    mixed = compare_runs([folder], allow_mixed=True)
    assert mixed.notes[0].startswith("mixed library commits")
    assert {arm.arm: arm.n_runs for arm in mixed.arms}["study/a"] == 4


def test_compare_cli_table_json_and_files(study, tmp_path, capsys):
    folder, runs = study
    assert main(["compare", str(folder)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:5] == ["arm", "runs", "return_per_step", R2, WITHIN]
    assert table[2].startswith("study/a") and table[2].split()[1] == "3"

    out = tmp_path / "cmp"
    argv = ["compare", str(folder), "--metric", "return_per_step", "--metric", WITHIN]
    assert main([*argv, "--json", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["metrics"] == ["return_per_step", WITHIN]
    assert json.loads((out / "comparison.json").read_text()) == printed
    markdown = (out / "comparison.md").read_text()
    assert markdown.startswith("| arm | runs | return_per_step | " + WITHIN + " |")
    image = matplotlib.image.imread(out / "comparison.png")
    assert image.shape[1] > 1.3 * image.shape[0]  # two panels side by side, the legend below

    assert main(["compare", str(folder), "--metric", "nope"]) == 2
    assert error_line(capsys) == (
        "rl-harness: error: no run has the metric(s) nope; the runs' result.json metrics: shift"
    )
    assert main(["compare", str(tmp_path / "missing")]) == 2
    assert "no such folder" in error_line(capsys)


def test_compare_is_a_library_call_for_a_synthesis_leaf(study, tmp_path):
    folder, _ = study
    written = write_comparison(compare_runs([folder], ["return_per_step"]), tmp_path / "s")
    assert [p.name for p in written] == ["comparison.md", "comparison.json", "comparison.png"]


def test_compare_help_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from rl_harness.cli import main\n"
        "try:\n    main(['compare', '--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('matplotlib', 'torch', 'ray', 'scipy') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--allow-mixed" in out.stdout and "HEAVY []" in out.stdout
