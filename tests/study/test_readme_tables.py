"""Every results table in a study README is generated from the committed records (issue 48
item 5): a table outside a generated block (`<!-- report:NAME -->` of the study's report.py,
or the operating point's own block) must be one of the few tables of non-run facts named
below with why it stays typed; each study's `report --check` passes on the committed
records and fails on a changed number; the tables added for item 5 hold the records'
numbers, recomputed here from the JSON files with SciPy, not through the report code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from experiments.mess3_action_symmetry import report as action_symmetry
from experiments.mess3_belief_geometry import report as flagship
from experiments.mess3_feedback import report as feedback
from experiments.mess3_token_guess import report as token_guess
from scipy import stats

from rl_harness.analysis import readme_main

STUDIES = Path(flagship.STUDY_DIR).parent
REPORTS = {"mess3_belief_geometry": flagship, "mess3_token_guess": token_guess}
REPORTS_ALL = {**REPORTS, "mess3_feedback": feedback, "mess3_action_symmetry": action_symmetry}

# Tables that stay typed (their first row -> why): settings, definitions, exact ceilings
# computed by the library (not runs), and one table whose runs left no record.
TYPED: dict[str, dict[str, str]] = {
    "mess3_belief_geometry": {
        "| policy | reward per step | how sure |": "exact solver ceilings (checked below "
        "against every cited run's solver_values.json)",
        "| leaf | what changes | question |": "definitions of the leaves",
        "| budget | how | env steps | time |": "budget settings",
    },
    "mess3_token_guess": {
        "| reference | value |": "exact ceilings of the process (shared.ceilings())",
        "| leaf | what changes | question |": "definitions of the leaves",
        "| budget | how | env steps (= guessed tokens) | time |": "budget settings",
    },
    "mess3_feedback": {
        "| part | choice (recorded in `shared.py` / `ppo/experiment.py`) |": "the setup",
        "| quantity | value | how |": "exact ceilings (ceilings(), not runs)",
    },
    "mess3_next_token": {
        "| leaf | training | reward per step (Bayes-optimal 0.6834) | probe R² (pooled, held "
        "out, 95% CI over test episodes) | RMSE | unexplained variance |": "history: the runs' "
        "ids were not kept, so no record exists to generate it from (the README says so)",
    },
    "mess3_action_symmetry": {
        "| part | choice (recorded in `task.py` / `spec.py`) |": "the setup",
    },
    "example_study": {},
}
GENERATED = re.compile(
    r"<!-- report:(\w+) -->\n.*?<!-- /report:\1 -->"
    r"|<!-- operating_point table: start -->\n.*?<!-- operating_point table: end -->",
    re.DOTALL,
)


def typed_tables(text: str) -> list[str]:
    """The first row of every markdown table outside the generated blocks."""
    rest = GENERATED.sub("", text)
    heads, previous = [], ""
    for line in rest.splitlines():
        if line.startswith("|") and not previous.startswith("|"):
            heads.append(line.strip())
        previous = line
    return heads


def test_every_study_readme_is_listed() -> None:
    assert {p.parent.name for p in STUDIES.glob("*/README.md")} == set(TYPED)


@pytest.mark.parametrize("study", sorted(TYPED))
def test_every_table_outside_a_generated_block_is_a_named_typed_one(study) -> None:
    text = (STUDIES / study / "README.md").read_text(encoding="utf-8")
    heads = typed_tables(text)
    unexpected = [head for head in heads if head not in TYPED[study]]
    assert not unexpected, f"{study}: typed tables not generated from the records: {unexpected}"
    assert sorted(heads) == sorted(TYPED[study])  # the list stays true


def test_the_typed_table_with_no_record_says_so() -> None:
    text = (STUDIES / "mess3_next_token" / "README.md").read_text(encoding="utf-8")
    assert "no command regenerates this table" in text and "history" in text


@pytest.mark.parametrize("study", sorted(REPORTS_ALL))
def test_each_report_check_passes_on_the_committed_records(study) -> None:
    assert REPORTS_ALL[study].main(["--check"]) == 0


@pytest.mark.parametrize("study", sorted(REPORTS))
def test_a_changed_number_in_a_generated_table_fails_the_check(study, tmp_path, capsys) -> None:
    module = REPORTS[study]
    text = module.README.read_text(encoding="utf-8")
    block = re.search(r"<!-- report:runs -->\n(.*?)<!-- /report:runs -->", text, re.DOTALL)
    assert block is not None
    row = block.group(1).splitlines()[2]  # the first run's row
    digit = re.search(r"\| 0\.(\d)", row)
    assert digit is not None
    new_digit = str((int(digit.group(1)) + 1) % 10)
    edited = row[: digit.start(1)] + new_digit + row[digit.end(1) :]
    readme = tmp_path / "README.md"
    readme.write_text(text.replace(row, edited), encoding="utf-8")
    make = {
        "mess3_belief_geometry": lambda: flagship.blocks(
            flagship.load_runs(flagship.ORIGINAL_INIT_RUNS)
        ),
        "mess3_token_guess": lambda: token_guess.blocks(
            token_guess.load_runs(token_guess.CPU_RUNS), token_guess.load_full()
        ),
    }[study]
    assert readme_main(readme, make, prog="report", argv=["--check"]) == 1
    assert "generated tables differ" in capsys.readouterr().err
    assert readme_main(readme, make, prog="report", argv=["--write"]) == 0
    assert row in readme.read_text(encoding="utf-8")  # --write puts the records back


# ------------------------------------------------------------ the numbers, from the JSON files
def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _t_interval(values: list[float]) -> tuple[float, float, float, float]:
    """Mean, Student-t 95% interval and the one-sample t-test p, by SciPy."""
    n = len(values)
    mean = sum(values) / n
    sem = stats.sem(values)
    half = stats.t.ppf(0.975, n - 1) * sem
    return mean, mean - half, mean + half, float(stats.ttest_1samp(values, 0.0).pvalue)


def _folders(runs: dict[str, tuple[str, ...]], root: Path) -> list[tuple[str, Path]]:
    return [(arm, root / arm / "results" / run_id) for arm, ids in runs.items() for run_id in ids]


def test_the_flagship_per_run_rows_are_the_records() -> None:
    tables = flagship.blocks(flagship.load_runs(flagship.ORIGINAL_INIT_RUNS))
    earlier = flagship.earlier_blocks(flagship.load_runs(flagship.EARLIER_RUNS))
    for runs, table in (
        (flagship.ORIGINAL_INIT_RUNS, tables["runs"]),
        (flagship.EARLIER_RUNS, earlier["earlier_runs"]),
    ):
        for arm, folder in _folders(runs, flagship.STUDY_DIR):
            result = _json(folder / "result.json")
            probe = _json(folder / "probe_metrics.json")
            seconds = _json(folder / "summary.json")["final_metrics"]["time_total_s"]
            untrained = probe["differences"]["agent_minus_untrained_module"]["within_branch"]
            within = untrained["tokens_2"]
            row = next(line for line in table.splitlines() if f"`{folder.name}`" in line)
            cells = [cell.strip() for cell in row.strip("|").split("|")]
            assert cells[0] == arm
            assert cells[3] == f"{result['return_per_step']['greedy']:.4f}"
            assert cells[7] == f"{result['probe_r2_within_branch']:.3f}"
            assert cells[9] == (
                f"{within['value']:+.3f} [{within['low']:+.3f}, {within['high']:+.3f}]"
            )
            assert cells[-1] == (f"{seconds / 60:.1f} ({result['env_steps'] / seconds:,.0f})")


def test_the_flagship_across_seed_rows_are_scipys() -> None:
    for runs, table in (
        (flagship.ORIGINAL_INIT_RUNS, "seeds"),
        (flagship.EARLIER_RUNS, "earlier_seeds"),
    ):
        loaded = flagship.load_runs(runs)
        text = (flagship.blocks(loaded) if table == "seeds" else flagship.earlier_blocks(loaded))[
            table
        ]
        for arm, ids in runs.items():
            results = [_json(flagship.STUDY_DIR / arm / "results" / i / "result.json") for i in ids]
            row = next(line for line in text.splitlines() if line.startswith(f"| {arm} |"))
            greedy = _t_interval([r["return_per_step"]["greedy"] for r in results])
            assert f"| {greedy[0]:.4f} [{greedy[1]:.4f}, {greedy[2]:.4f}] |" in row
            gain = _t_interval([r["agent_minus_untrained_within_branch"] for r in results])
            assert f"{gain[0]:+.3f} [{gain[1]:+.3f}, {gain[2]:+.3f}], p = {gain[3]:.2g}" in row


def test_the_flagship_controls_rows_are_scipys() -> None:
    text = flagship.blocks(flagship.load_runs(flagship.ORIGINAL_INIT_RUNS))["controls_by_data"]
    for arm, ids in flagship.ORIGINAL_INIT_RUNS.items():
        folders = [flagship.STUDY_DIR / arm / "results" / i for i in ids]
        for data in flagship.DATA_SETS:
            blocks = [_json(f / "result.json")["controls_by_data"][data] for f in folders]
            ks = [_json(f / "probe_metrics.json")["controls_by_data"][data] for f in folders]
            best = [
                b["window_r2_within_branch"][f"k{k['best_window_k']}"]
                for b, k in zip(blocks, ks, strict=True)
            ]
            row = next(
                line for line in text.splitlines() if line.startswith(f"| {arm} | `{data}` |")
            )
            mean, low, high, _ = _t_interval(best)
            chosen = ", ".join(str(k["best_window_k"]) for k in ks)
            assert f"| {mean:.3f} [{low:.3f}, {high:.3f}] ({chosen}) |" in row
            gain = _t_interval([b["agent_minus_untrained_within_branch"] for b in blocks])
            assert f"| {gain[0]:+.3f} [{gain[1]:+.3f}, {gain[2]:+.3f}], p = {gain[3]:.2g} |" in row


def test_the_flagship_solver_values_typed_and_generated_are_the_runs() -> None:
    text = flagship.README.read_text(encoding="utf-8")
    labels = {
        "oracle": "oracle (hidden state known)",
        "belief_mdp": "belief-MDP ceiling (`belief_vi`, delay 1)",
        "stack_3": "best stack-3 found (last 3 visible tokens)",
        "stack_2": "best stack-2 (last 2 visible tokens)",
        "memoryless": "best memoryless (newest visible token, `reactive`)",
    }
    for runs in (flagship.ORIGINAL_INIT_RUNS, flagship.EARLIER_RUNS):
        for _, folder in _folders(runs, flagship.STUDY_DIR):
            values = _json(folder / "solver_values.json")
            for key, label in labels.items():
                assert f"| {label} | {values[key]:.4f} |" in text, (folder.name, key)


def test_the_token_guess_rows_are_the_records_and_scipys() -> None:
    loaded = token_guess.load_runs(token_guess.CPU_RUNS)
    tables = token_guess.blocks(loaded, token_guess.load_full())
    for arm, ids in token_guess.CPU_RUNS.items():
        folders = [token_guess.STUDY_DIR / arm / "results" / i for i in ids]
        results = [_json(f / "result.json") for f in folders]
        for folder, result in zip(folders, results, strict=True):
            row = next(line for line in tables["runs"].splitlines() if folder.name in line)
            assert f"| {result['greedy_accuracy']:.4f} |" in row
            assert f"| {result['training_wall_time_s'] / 60:.1f} |" in row
        end_minus_raw = [
            r["probe_r2_within_branch"]
            - _json(f / "yardstick.json")["raw_window_affine"]["r2_within_branch"]
            for r, f in zip(results, folders, strict=True)
        ]
        mean, low, high, p = _t_interval(end_minus_raw)
        row = next(
            line
            for line in tables["gains"].splitlines()
            if line.startswith(f"| {arm}: end - raw window")
        )
        assert f"| {mean:+.3f} [{low:+.3f}, {high:+.3f}] | {token_guess._p(p)} |" in row
        curve = [
            {
                c["env_steps"]: c["r2_within_branch"]
                for c in _json(f / "probe_metrics.json")["checkpoints"]
            }
            for f in folders
        ]
        last = max(curve[0])
        values = [c[last] for c in curve]
        row = next(
            line for line in tables["curve"].splitlines() if line.startswith(f"| {last:,} |")
        )
        assert f"{sum(values) / 3:.3f} ({min(values):.3f}-{max(values):.3f})" in row
