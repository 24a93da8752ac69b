"""The flagship README's generated tables (issue 52 items 3-4, issue 48 item 5): regenerated
from the committed run records, they must equal the README's blocks; the statistics they
print read as a reviewer would (Holm over each table, power at the stated effect, "worth m"
only where the filter rises)."""

from __future__ import annotations

import pytest
from experiments.mess3_belief_geometry import report

from rl_harness.analysis import render_blocks


@pytest.fixture(scope="module")
def runs() -> list[report.StudyRun]:
    return report.load_runs(report.ORIGINAL_INIT_RUNS)


def test_readme_tables_are_the_records(runs) -> None:
    text = report.README.read_text(encoding="utf-8")
    assert render_blocks(text, report.blocks(runs)) == text, (
        "README tables differ from the records: "
        "uv run python -m experiments.mess3_belief_geometry.report --write"
    )


def test_every_generated_table_has_a_block_and_a_missing_one_is_an_error() -> None:
    with pytest.raises(KeyError, match="report:controls_holm"):
        render_blocks("no blocks here", {"controls_holm": "x"})
    rendered = render_blocks(
        "a\n<!-- report:power -->\nold\n<!-- /report:power -->\nb", {"power": "new"}
    )
    assert rendered == "a\n<!-- report:power -->\nnew\n<!-- /report:power -->\nb"


def test_the_controls_family_is_holm_corrected(runs) -> None:
    table = report.controls_table(runs)
    assert "Holm over the 18 tests" in table
    # next_token_aux on random actions: raw p 0.010 is not shown after Holm (0.125)
    row = next(
        line
        for line in table.splitlines()
        if "next_token_aux | `random` | agent - untrained" in line
    )
    assert row.endswith("| 0.010 | 0.125 |")


def test_interventions_show_the_untrained_rows_and_their_difference(runs) -> None:
    table = report.interventions_table(runs)
    # reward_only seed 1 block_2: the untrained module's pre-clip correlation 0.74 beside 0.17
    assert (
        "| reward_only | 1 | block_2 | 3.2e-04 | 1.2e-03 | -8.9e-04 | 0.17 | 0.74 | -0.57 |"
        in table
    )
    assert "Holm over the 8 tests" in table


def test_power_uses_the_stated_effect_not_the_observed_one(runs, monkeypatch) -> None:
    before = report.power_table(runs)
    monkeypatch.setattr(report, "SESOI_R2", 0.04)
    after = report.power_table(runs)
    assert before != after  # the stated effect moves it; the observed means never enter
    assert "gain of 0.04" in after


def test_worth_m_is_undefined_where_the_filter_falls() -> None:
    rising = {"m1": 0.5, "m2": 0.7, "m3": 0.9}
    assert report.worth_m(rising, 0.6) == "2"
    assert report.worth_m(rising, 0.95) == "> 3"
    falling = {"m1": 0.378, "m2": 0.220, "m3": 0.708}
    assert report.worth_m(falling, 0.6).startswith("undefined (R² falls from m = 1 to 2")


def test_the_synthesis_writes_the_same_tables(runs) -> None:
    from experiments.mess3_belief_geometry.synthesis import experiment as synthesis

    folders = [
        report.STUDY_DIR / run.arm / "results" / run.run_id for run in reversed(runs)
    ]  # any order in: the synthesis sorts by arm and seed
    text = synthesis.reviewed_tables(folders)
    assert report.interventions_table(runs) in text
    assert report.controls_table(runs) in text
    # runs recorded before the controls on other data sets: the table says it was not made
    older = sorted((report.STUDY_DIR / "reward_only" / "results").glob("20261205T*"))
    assert "## controls_holm\n\nNot made for these runs (KeyError" in synthesis.reviewed_tables(
        older
    )
