"""The token-guess README's generated tables (issue 52 item 5): regenerated from the committed
run records, they must equal the README's blocks, and they read as a reviewer would: memory
"between m-1 and m tokens", every competitor beside every arm (also those the agent is
below), supervised - ppo at every checkpoint with Holm over the table, untrained networks
counted once per distinct network and never pooled across init schemes, the FULL run's
differing settings named."""

from __future__ import annotations

import dataclasses

import pytest
from experiments.mess3_token_guess import report

from rl_harness.analysis import render_blocks


@pytest.fixture(scope="module")
def runs() -> list[report.StudyRun]:
    return report.load_runs(report.CPU_RUNS)


@pytest.fixture(scope="module")
def full() -> report.StudyRun:
    return report.load_full()


def test_readme_tables_are_the_records(runs, full) -> None:
    text = report.README.read_text(encoding="utf-8")
    assert render_blocks(text, report.blocks(runs, full)) == text, (
        "README tables differ from the records: "
        "uv run python -m experiments.mess3_token_guess.report --write"
    )
    assert report.main(["--check"]) == 0


def test_a_missing_block_is_an_error() -> None:
    with pytest.raises(KeyError, match="report:memory"):
        render_blocks("no blocks", {"memory": "x"})


def test_memory_reads_between_two_filters_only_where_they_rise() -> None:
    rising = {"m3": 0.81, "m4": 0.94, "m5": 0.985, "m6": 0.996}
    assert report.memory_reading(rising, 0.974) == "between 4 and 5 tokens"
    assert report.memory_reading(rising, 0.985) == "5 tokens"
    assert report.memory_reading(rising, 0.70) == "at most 3 token"
    assert report.memory_reading(rising, 0.999) == "more than 6 tokens"
    falling = {"m1": 0.5, "m2": 0.4, "m3": 0.9}
    assert report.memory_reading(falling, 0.6).startswith("undefined (the filter falls")


def test_every_original_init_seed_is_between_4_and_5_tokens(runs) -> None:
    table = report.memory_table(runs)
    for run in runs:
        reading = "2 and 3" if run.arm == "ppo_default_init" else "4 and 5"
        row = next(r for r in table.splitlines() if r.startswith(f"| {run.arm} | {run.seed} |"))
        assert row.endswith(f"| between {reading} tokens |")


def test_the_arms_below_a_competitor_say_so(runs) -> None:
    table = report.competitors_table(runs)
    below = "1024 random ReLU (3 of 3), raw-window MLP (3 of 3) |"
    default_row = next(r for r in table.splitlines() if r.startswith("| ppo_default_init | 0.72"))
    assert default_row.endswith(below)
    assert "| ppo | 0.96-0.97 | 0.52-0.52 |" in table
    for arm in ("ppo", "supervised", "ppo_no_kl"):
        assert f"| {arm} |" in table
    assert table.count("| none |") == 9 + 3  # 9 runs and 3 arms beat every competitor


def test_untrained_networks_are_counted_once_and_not_pooled_across_inits(runs) -> None:
    table = report.untrained_table(runs)
    # ppo_no_kl's seeds are ppo's: the same 15 networks (scored on another CPU, equal to
    # ~1e-6), counted once.
    row = (
        "| normal 0.02, pi x1, vf x1 | ppo, ppo_no_kl, supervised | 9 | 15 | 0.542 | 0.468-0.598 |"
    )
    assert row in table
    assert "| torch_default, pi x0.01, vf x1 | ppo_default_init | 3 | 15 |" in table
    # Two runs naming the same untrained seeds must hold the same networks' values.
    untrained = dict(runs[0].yardstick["untrained"])
    untrained["r2_within_branch"] = {"values": [0.0] * 5}
    changed = dataclasses.replace(runs[3], yardstick={**runs[3].yardstick, "untrained": untrained})
    with pytest.raises(ValueError, match="same untrained seeds"):
        report.untrained_table([runs[0], changed])
    # Within report.UNTRAINED_RTOL they are the same networks, counted once.
    close = dict(runs[0].yardstick["untrained"])
    values = close["r2_within_branch"]["values"]
    close["r2_within_branch"] = {"values": [v * (1 + 0.1 * report.UNTRAINED_RTOL) for v in values]}
    again = dataclasses.replace(runs[3], yardstick={**runs[3].yardstick, "untrained": close})
    assert "| 2 | 5 |" in report.untrained_table([runs[0], again])


def test_supervised_minus_ppo_at_every_checkpoint_with_holm(runs) -> None:
    table = report.over_training_table(runs)
    assert "Holm over the 19 tests" in table
    rows = [r for r in table.splitlines() if r.startswith("| supervised - ppo |")]
    assert [r.split(" | ")[1] for r in rows] == [
        "0", "32,768", "65,536", "131,072", "262,144", "524,288", "786,432"
    ]  # fmt: skip
    assert "| 0 (the same network) | - | - |" in rows[0]
    assert rows[-1] == (
        "| supervised - ppo | 786,432 | +0.011, +0.017, +0.012 | +0.013 [+0.004, +0.022] "
        "| 0.024 | 0.261 |"
    )


def test_the_full_runs_differing_settings_are_named(runs, full) -> None:
    table = report.full_settings_table(runs, full)
    assert "| `probe_episodes` | 64 | 256 |" in table
    assert "| `num_envs` | 32 | 64 |" in table and "| `iterations` | 24 | 77 |" in table
    assert "train_batch" not in table  # the same in both: not listed


@pytest.mark.parametrize("study", ["mess3_token_guess", "mess3_feedback"])
def test_original_figures_are_quoted_only_with_their_path_and_commit(study) -> None:
    """Issue 52 item 6: every figure of the original study names its file and commit; where
    none was found the record says so and the README says so."""
    import json

    folder = report.STUDY_DIR.parent / study
    record = json.loads((folder / "original_figures.json").read_text(encoding="utf-8"))
    assert record["repository"] == "Al-does/RL-Harness"
    for figure in record["figures"] + record["nearest_not_matched"]:
        assert figure["path"] and len(figure["commit"]) == 40
    if not record["figures"]:
        assert record["not_found"]
        readme = (folder / "README.md").read_text(encoding="utf-8")
        assert "no record of this family at any step" in readme
