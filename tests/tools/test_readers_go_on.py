"""Readers name each unreadable file and go on (issue 51 item 4), through the CLI as a user
runs it (its own process) on run folders made by real CLI runs: a corrupt summary.json, a
truncated last metrics.jsonl row and a corrupt manifest each get one warning line naming the
file (and what was skipped), and `runs`, `show`, `diff`, `compare` still print. `compare`
shows the recipe's HEADLINE by default (`--metrics` for more or all), selects runs by library
commit, and writes a bounded figure with labelled panels and a legend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest

from rl_harness.analysis.comparison import MAX_PANELS, compare_runs, comparison_figure
from rl_harness.cli import main

RECIPE = """
from dataclasses import dataclass

from rl_harness import write_json
from rl_harness.harness.metrics import MetricsLog

{headline}


@dataclass(frozen=True)
class Budget:
    steps: int


BUDGETS = {{"smoke": Budget(1), "cpu": Budget(5)}}
DEFAULT_BUDGET = "cpu"


def estimate(value):
    return {{"value": value, "low": value - 0.1, "high": value + 0.1}}


def run(context):
    seed, steps = context.seed, context.settings.steps
    log = MetricsLog(context.paths.metrics)
    rows = [
        {{
            "training_iteration": i + 1,
            "env_runners/episode_return_mean": float(10 * i + seed),
            "env_runners/episode_len_mean": 10.0,
            "learners/default_policy/total_loss": 1.0 / (i + 1),
        }}
        for i in range(steps)
    ]
    for row in rows:
        log.append(row)
    # The records the runners write beside it: config.json and the direct runner's summary.
    write_json(context.paths.config, {{"lr": 0.001, "budget": context.budget_record}})
    write_json(
        context.paths.summary,
        {{"runner": "direct", "run_id": context.run_id, "iterations": steps,
          "final_metrics": rows[-1], "status": "completed"}},
    )
    probes = {{f"m{{i}}": {{"r2_pooled": estimate(0.1 * i + 0.01 * seed)}} for i in range(8)}}
    probes["probe"] = {{"r2_pooled": estimate(0.5 + 0.01 * seed)}}
    write_json(context.results_dir / "probe_metrics.json", probes)
    return {{"score": float(seed), "nested": {{"x": 2.0 * seed}}, "extra": 1.0}}


from rl_harness import Recipe
RECIPE = Recipe(run=run, budgets=BUDGETS, default=DEFAULT_BUDGET, headline=HEADLINE)
"""
HEADLINE = 'HEADLINE = ("score", "nested/x")'  # a name the RECIPE takes, as the leaves do


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """study/arm (a HEADLINE; seeds 0-3) and study/plain (none; seeds 0-1), made by the CLI."""
    root = tmp_path_factory.mktemp("readers") / "study"
    for leaf, headline, seeds in (
        ("arm", HEADLINE, range(4)),
        ("plain", "HEADLINE = ()", range(2)),
    ):
        path = root / leaf / "experiment.py"
        path.parent.mkdir(parents=True)
        path.write_text(RECIPE.format(headline=headline))
        for seed in seeds:
            argv = [str(path), "--seed", str(seed), "--run-id", f"{leaf}{seed}"]
            assert main([*argv, "--no-upload-artifacts"]) == 0
    return root


@pytest.fixture
def study(made: Path, tmp_path: Path) -> Path:
    """A copy of the made study, for a test to break."""
    copy = tmp_path / "study"
    shutil.copytree(made, copy)
    return copy


def cli(*argv: str) -> subprocess.CompletedProcess:
    """The command as a user runs it: its own process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [sys.executable, "-m", "rl_harness.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.fixture
def here(capsys):
    """The same command through `main` in this process (a subprocess costs ~10 s here)."""

    def call(*argv: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return subprocess.CompletedProcess(argv, code, captured.out, captured.err)

    return call


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_each_unreadable_file_is_one_warning_line_and_the_output_goes_on(study, here):
    results = study / "arm" / "results"
    summary_torn, row_torn, manifest_torn = results / "arm0", results / "arm1", results / "arm2"
    (summary_torn / "summary.json").write_text('{"runner": "dir')
    metrics = row_torn / "metrics.jsonl"
    metrics.write_text(metrics.read_text()[:-12])  # the last row cut mid-write
    (manifest_torn / "run_manifest.json").write_text("{ not json")

    runs = cli("runs", str(study / "arm"))
    assert runs.returncode == 0, runs.stderr
    warnings = lines(runs.stderr)
    assert len(warnings) == 3, warnings
    assert warnings[0].startswith(
        f"rl-harness runs: warning: cannot read run folder {manifest_torn}: "
        "run_manifest.json is corrupt (not valid JSON"
    )
    assert warnings[1].startswith(
        f"rl-harness runs: warning: {summary_torn / 'summary.json'} is corrupt (not valid JSON"
    )
    assert warnings[1].endswith("; read without it")
    assert warnings[2] == (
        f"rl-harness runs: warning: {metrics} row 5 truncated; final iteration read as 4"
    )
    header, *rows = lines(runs.stdout)
    table = {row.split()[0]: row.split() for row in rows}
    assert sorted(table) == ["arm0", "arm1", "arm3"]
    assert table["arm1"][header.split().index("return")] == "31"  # row 4: 10 * 3 + seed 1

    show = here("show", str(row_torn))
    assert show.returncode == 0
    assert lines(show.stderr) == [
        f"rl-harness show: warning: {metrics} row 5 truncated; final iteration read as 4"
    ]
    assert "final metrics (4 rows in metrics.jsonl):" in show.stdout
    assert "  training_iteration                  4" in show.stdout

    show = here("show", str(manifest_torn))
    assert show.returncode == 0
    (warning,) = lines(show.stderr)
    assert warning.startswith(f"rl-harness show: warning: {manifest_torn / 'run_manifest.json'}")
    assert "provenance  not shown (run_manifest.json could not be read)" in show.stdout
    assert "final metrics (5 rows in metrics.jsonl):" in show.stdout

    diff = here("diff", str(summary_torn), str(row_torn))
    assert diff.returncode == 1  # they differ (seed, metrics)
    assert [line.split(": warning: ")[1].split()[0] for line in lines(diff.stderr)] == [
        str(summary_torn / "summary.json"),
        str(metrics),
    ]
    assert "training_iteration" in diff.stdout and "5  ->  4" in diff.stdout

    compare = cli("compare", str(study / "arm"), "--metric", "score")
    assert compare.returncode == 0, compare.stderr
    named = lines(compare.stderr)
    assert len(named) == 3
    assert f"cannot read run folder {manifest_torn}: run_manifest.json is corrupt" in named[0]
    assert f"cannot read run folder {summary_torn}: summary.json is corrupt" in named[1]
    assert named[1].endswith("its runner is unknown")
    assert named[2].endswith(f"{metrics} row 5 truncated; final iteration read as 4")
    header, _, row, *_ = lines(compare.stdout)
    assert row.split()[:3] == ["arm", "2", "2"]  # arm1 and arm3: scores 1 and 3, mean 2


def test_compare_shows_the_headline_by_default_and_more_when_asked(made, here):
    arm = here("compare", str(made / "arm"))
    assert arm.returncode == 0, arm.stderr
    assert lines(arm.stdout)[0].split() == ["arm", "runs", "score", "nested/x"]
    assert lines(arm.stdout)[2].split()[:3] == ["arm", "4", "1.5"]

    # No HEADLINE: return_per_step and the first pooled R²s, 6 in all, and a note.
    plain = here("compare", str(made / "plain"))
    assert plain.returncode == 0, plain.stderr
    header = lines(plain.stdout)[0].split()
    assert header[:3] == ["arm", "runs", "return_per_step"] and len(header) == 2 + 6
    assert "showing 6 of 10 pooled metrics" in plain.stdout

    every = here("compare", str(made / "arm"), "--metrics", "all")
    assert every.returncode == 0, every.stderr
    head, _, *rows = lines(every.stdout)
    assert head.split() == ["metric", "arm", "(4", "runs)"]  # one metric per row
    keys = [row.split()[0] for row in rows if not row.startswith("mean [")]
    for key in (
        "score",
        "nested/x",
        "return_per_step",
        "probe_metrics.json:m7/r2_pooled",
        "probe_metrics.json:probe/r2_pooled",
        "extra",
        "learners/default_policy/total_loss",
    ):
        assert key in keys, key

    picked = here("compare", str(made / "arm"), "--metrics", "extra,score")
    assert lines(picked.stdout)[0].split() == ["arm", "runs", "extra", "score"]
    both = here("compare", str(made / "arm"), "--metrics", "all", "--metric", "score")
    assert both.returncode == 2
    assert lines(both.stderr) == ["rl-harness: error: give --metrics or --metric, not both"]


def test_compare_selects_runs_by_library_commit(study, here):
    results = study / "arm" / "results"
    ours = json.loads((results / "arm0" / "run_manifest.json").read_text())["library"]["commit"]
    other = results / "other"
    shutil.copytree(results / "arm3", other)
    record = json.loads((other / "run_manifest.json").read_text())
    record["run_id"], record["library"]["commit"] = "other", "f" * 40
    (other / "run_manifest.json").write_text(json.dumps(record))

    mixed = cli("compare", str(study / "arm"), "--metric", "score")
    assert mixed.returncode == 2
    (line,) = lines(mixed.stderr)
    assert "runs come from 2 library commits" in line and "--library-commit COMMIT" in line

    theirs = here("compare", str(study / "arm"), "--metric", "score", "--library-commit", "ffffff")
    assert theirs.returncode == 0, theirs.stderr
    assert lines(theirs.stdout)[2].split()[:3] == ["arm", "1", "3"]
    assert "only runs of library commit ffffff (4 left out)" in theirs.stdout

    argv = ["compare", str(study / "arm"), "--metric", "score", "--where"]
    kept = here(*argv, f"library.commit={ours[:8]}")
    assert kept.returncode == 0, kept.stderr
    assert lines(kept.stdout)[2].split()[:3] == ["arm", "4", "1.5"]

    none = here(*argv, "library.commit=0123abc")
    assert none.returncode == 2
    assert lines(none.stderr) == [
        "rl-harness: error: no completed run has library commit 0123abc; they have: "
        f"{ours[:12]} (4 runs), ffffffffffff (1 runs)"
    ]


def test_the_comparison_figure_is_bounded_labelled_and_has_a_legend(made, tmp_path):
    out = tmp_path / "cmp"
    done = cli("compare", str(made / "arm"), "--metrics", "all", "--out", str(out))
    assert done.returncode == 0, done.stderr
    image = matplotlib.image.imread(out / "comparison.png")
    assert image.shape[0] <= 1600 and image.shape[1] <= 1600  # not 24,816 px wide

    comparison = compare_runs([made / "arm"], "all")
    assert len(comparison.metrics) > MAX_PANELS
    fig = comparison_figure(comparison)
    panels = [ax for ax in fig.axes if ax.axison]
    assert len(panels) == MAX_PANELS  # the rest are in comparison.md
    for ax, key in zip(panels, comparison.metrics, strict=False):
        assert ax.get_xlabel() == "arm (experiment leaf)"
        assert ax.get_ylabel().replace("\n", "") == key.rsplit(":", 1)[-1]
        assert ax.get_title().replace("\n", " ").replace(" ", "") == key.replace(" ", "")
        assert [t.get_text() for t in ax.get_xticklabels()] == ["arm"]
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["one run (seed)", "mean, 95% t-interval"]
    title = fig.get_suptitle()
    assert f"first {MAX_PANELS} of {len(comparison.metrics)} metrics" in title
    assert "4 runs; budget cpu" in title
    # Two metrics: two panels side by side, nothing hidden.
    fig = comparison_figure(compare_runs([made / "arm"], ["score", "extra"]))
    assert len([ax for ax in fig.axes if ax.axison]) == 2
    assert f"first {MAX_PANELS}" not in fig.get_suptitle()
