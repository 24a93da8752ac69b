"""The feedback README's generated tables (issue 52 item 5): regenerated from the committed
run records, they must equal the README's blocks; the branches are named by their true
token depth (3, shown here on the study's own env and branch codes) and the probe size is
the recorded one (64 episodes of 256 recorded steps, not of 1024); the across-seeds family
is Holm-corrected."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from experiments.mess3_feedback import report, shared

from rl_harness.analysis import render_blocks
from rl_harness.analysis.probes.branches import branch_ids


@pytest.fixture(scope="module")
def runs() -> list[report.StudyRun]:
    return report.load_runs()


def test_readme_tables_are_the_records(runs) -> None:
    text = report.README.read_text(encoding="utf-8")
    assert render_blocks(text, report.blocks(runs)) == text, (
        "README tables differ from the records: "
        "uv run python -m experiments.mess3_feedback.report --write"
    )
    assert report.main(["--check"]) == 0
    with pytest.raises(KeyError, match="report:results"):
        render_blocks("no blocks", {"results": "x"})


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = {(int(x), int(y)) for x, y in zip(a.ravel(), b.ravel(), strict=True)}
    return len(pairs) == len({x for x, _ in pairs}) == len({y for _, y in pairs})


def test_the_studys_branches_are_the_last_3_tokens() -> None:
    """The study's env played with random guesses: its branch codes grouped as the probe
    groups them (`within_branch.k` = BRANCH_K steps) are the branches of the last 3 tokens."""
    env = shared.analysis_env(4)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    frames = [obs]
    for _ in range(60):
        obs, *_ = env.step(rng.integers(0, 3, size=4))
        frames.append(obs)
    env.close()
    codes = shared.branch_codes(SimpleNamespace(observations=np.stack(frames, axis=1)))
    probe_branches = branch_ids(codes, shared.BRANCH_K)
    newest = codes[..., 0]
    assert _same_partition(probe_branches, branch_ids(newest, 3))
    assert not _same_partition(probe_branches, branch_ids(newest, 2))


def test_depth_and_probe_size_are_read_from_the_records(runs) -> None:
    assert {report.branch_depth(run) for run in runs} == {3}
    assert {report.probe_size(run) for run in runs} == {
        "64 episodes of 256 recorded steps (48 fitted, 16 held out: 4,096 held-out steps)"
    }
    table = report.results_table(runs)
    assert "branches of equal last 3 visible tokens" in table
    # 35 branches recorded in seed 0: more than the 13 that 2 tokens (with start marks) allow
    within = runs[0].probe["final"]["probe"]["within_branch"]
    assert within["k"] == 2 and within["n_branches"] > 13


def test_the_across_seed_family_is_holm_corrected(runs) -> None:
    table = report.across_seeds_table(runs)
    assert "Holm over the 7 tests" in table
    row = next(r for r in table.splitlines() if "action window shuffled (replayed)" in r)
    assert row.endswith("| 0.0249 | 0.0498 |")  # raw p x 2 after the 5 smaller ones
    row = next(r for r in table.splitlines() if r.startswith("| Bayes-optimal"))
    assert row.endswith("| 0.23 | 0.23 |")
