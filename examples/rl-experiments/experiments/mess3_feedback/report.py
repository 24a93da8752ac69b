"""The study README's generated tables, from the committed run records alone.

Every table between `<!-- report:NAME -->` and `<!-- /report:NAME -->` in the study README is
written by this module from the runs' probe_metrics.json and run_manifest.json; a fast test
(tests/study/test_feedback_report.py) regenerates them and fails when the README differs:

    uv run python -m experiments.mess3_feedback.report --write
    uv run python -m experiments.mess3_feedback.report --check   # exit 1 on a difference

Branches are named by their true token depth: the probe's within-branch R² groups steps by
the last `branch_k` steps' codes, and each step's code is its newest `shared.BRANCH_K`
visible tokens, so a branch is the last BRANCH_K + branch_k - 1 tokens (`branch_depth`).
The probe size is the one each record states (episodes fitted and held out, steps each).
Across seeds: per-seed values, mean with a 95% Student-t interval, a t-test of the paired
differences; the table's family of tests is Holm-corrected and says how many it holds.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.mess3_feedback import shared
from rl_harness.analysis import holm_adjust, readme_main, seed_test

STUDY_DIR = Path(__file__).resolve().parent
README = STUDY_DIR / "README.md"

# The runs the README cites: CPU budget, library f7bc155, 2026-12-06, seeds 0, 1, 2.
CPU_RUNS: tuple[str, ...] = (
    "20261206T153049Z-440ecc16",
    "20261206T153049Z-d3cf0436",
    "20261206T153049Z-3dc88449",
)


@dataclass(frozen=True)
class StudyRun:
    seed: int
    run_id: str
    probe: Mapping[str, Any]


def read_run(folder: Path) -> StudyRun:
    manifest = json.loads((folder / "run_manifest.json").read_text(encoding="utf-8"))
    if manifest.get("status") != "completed":
        raise FileNotFoundError(f"{folder}: not a completed run")
    probe = json.loads((folder / "probe_metrics.json").read_text(encoding="utf-8"))
    return StudyRun(seed=int(manifest["seed"]), run_id=folder.name, probe=probe)


def load_runs(run_ids: Sequence[str] = CPU_RUNS, root: Path = STUDY_DIR) -> list[StudyRun]:
    runs = [read_run(root / "ppo" / "results" / run_id) for run_id in run_ids]
    return sorted(runs, key=lambda run: run.seed)


def branch_depth(run: StudyRun) -> int:
    """The number of visible tokens two steps of one branch share (see the module doc)."""
    return shared.BRANCH_K + int(run.probe["final"]["probe"]["within_branch"]["k"]) - 1


def probe_size(run: StudyRun) -> str:
    probe = run.probe["final"]["probe"]
    steps = probe["n_test_samples"] // probe["n_test_episodes"]
    return (
        f"{probe['n_train_episodes'] + probe['n_test_episodes']} episodes of {steps} recorded "
        f"steps ({probe['n_train_episodes']} fitted, {probe['n_test_episodes']} held out: "
        f"{probe['n_test_samples']:,} held-out steps)"
    )


def _within(probe: Mapping[str, Any]) -> float:
    return probe["within_branch"]["r2_pooled"]["value"]


def _quantities(run: StudyRun) -> dict[str, float]:
    """The per-run values the README reads, from probe_metrics.json."""
    final = run.probe["final"]
    ablations = final["ablations"]
    step0 = next(p for p in run.probe["replay_probes"] if p["env_steps"] == 0)
    return {
        "accuracy": final["scores"]["accuracy"],
        "exact": final["scores"]["exact_accuracy"],
        "bayes_same_steps": final["scores"]["bayes_optimal_same_steps"],
        "agreement": final["agreement_with_bayes_guesser"]["greedy"],
        "r2": final["probe"]["r2_pooled"]["value"],
        "within": _within(final["probe"]),
        "within_low": final["probe"]["within_branch"]["r2_pooled"]["low"],
        "within_high": final["probe"]["within_branch"]["r2_pooled"]["high"],
        "untrained": step0["within_branch_r2_pooled"]["value"],
        **{f"filter_{m}": _within(final["window_filters"][m]) for m in ("m1", "m2", "m3", "m10")},
        "mask": _within(ablations["mask"]["probe_replayed"]),
        "shuffle": _within(ablations["shuffle"]["probe_replayed"]),
        "mask_exact": ablations["mask"]["closed_loop_scores"]["exact_accuracy"],
        "shuffle_exact": ablations["shuffle"]["closed_loop_scores"]["exact_accuracy"],
        "cosine": final["counterfactual_previous_action"]["cosine"],
    }


def results_table(runs: Sequence[StudyRun]) -> str:
    depth = {branch_depth(run) for run in runs}
    sizes = {probe_size(run) for run in runs}
    if len(depth) != 1 or len(sizes) != 1:
        raise ValueError("the runs differ in their branch depth or probe size")
    lines = [
        f"Probe: {sizes.pop()}, on the final checkpoint's own greedy rollouts. Within-branch "
        f"R² is over branches of equal last {depth.pop()} visible tokens. The untrained "
        "(step-0) module, the action-ablated inputs and the m-pair filters are scored on the "
        "same held-out steps.",
        "",
        "| seed | run id | accuracy (realized) | exact accuracy of its guesses | Bayes-optimal "
        "on the same steps | agreement with the Bayes guess (greedy) | probe R² | within-branch "
        "R² [95%] | untrained (step 0) replayed | action window masked | shuffled "
        "| filter of last 1 / 2 / 3 pairs | filter of last 10 pairs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        q = _quantities(run)
        lines.append(
            f"| {run.seed} | `{run.run_id}` | {q['accuracy']:.4f} | {q['exact']:.4f} | "
            f"{q['bayes_same_steps']:.4f} | {q['agreement']:.3f} | {q['r2']:.4f} | "
            f"{q['within']:.3f} [{q['within_low']:.3f}, {q['within_high']:.3f}] | "
            f"{q['untrained']:.3f} | {q['mask']:.3f} | {q['shuffle']:.3f} | "
            f"{q['filter_m1']:.2f} / {q['filter_m2']:.3f} / {q['filter_m3']:.3f} | "
            f"{q['filter_m10']:.3f} |"
        )
    return "\n".join(lines)


# Paired differences tested against 0 (first minus second, per seed), as the README reads them.
TESTS: tuple[tuple[str, str, str], ...] = (
    ("Bayes-optimal on the agent's steps minus the agent (exact)", "bayes_same_steps", "exact"),
    ("agent minus the untrained module on the same inputs, within", "within", "untrained"),
    ("agent minus the exact filter of the last 3 pairs, within", "within", "filter_m3"),
    ("agent minus the action window masked (replayed), within", "within", "mask"),
    ("agent minus the action window shuffled (replayed), within", "within", "shuffle"),
    ("exact accuracy lost in closed loop, action window masked", "exact", "mask_exact"),
    ("exact accuracy lost in closed loop, action window shuffled", "exact", "shuffle_exact"),
)


def across_seeds_table(runs: Sequence[StudyRun]) -> str:
    values = [_quantities(run) for run in runs]
    rows = []
    for label, first, second in TESTS:
        per_seed = [v[first] - v[second] for v in values]
        test = seed_test(per_seed)
        rows.append((label, per_seed, test))
    adjusted = holm_adjust([test.p_value for _, _, test in rows])
    lines = [
        f"Across seeds (per seed, mean [95% t-interval], t-test p, Holm over the {len(rows)} "
        "tests of this table; a difference is called shown only where its Holm p < 0.05):",
        "",
        "| paired difference | per seed (0, 1, 2) | mean [95% CI] | p | p (Holm) |",
        "|---|---|---|---|---|",
    ]
    for (label, per_seed, test), p_holm in zip(rows, adjusted, strict=True):
        assert test.low is not None and test.high is not None and test.p_value is not None
        lines.append(
            f"| {label} | {', '.join(f'{v:+.3f}' for v in per_seed)} | {test.mean:+.3f} "
            f"[{test.low:+.3f}, {test.high:+.3f}] | {test.p_value:.3g} | {p_holm:.3g} |"
        )
    for name, key in (
        ("exact accuracy of the agent's guesses", "exact"),
        ("within-branch R², agent", "within"),
        ("previous-action counterfactual: cosine", "cosine"),
    ):
        test = seed_test([v[key] for v in values])
        assert test.low is not None and test.high is not None
        lines.append(
            f"| {name} (not a test) | {', '.join(f'{v[key]:.3f}' for v in values)} | "
            f"{test.mean:.3f} [{test.low:.3f}, {test.high:.3f}] | - | - |"
        )
    return "\n".join(lines)


TABLES: dict[str, Callable[[Sequence[StudyRun]], str]] = {
    "results": results_table,
    "across_seeds": across_seeds_table,
}


def blocks(runs: Sequence[StudyRun]) -> dict[str, str]:
    return {name: table(runs) for name, table in TABLES.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """`--write` rewrites the README's generated tables; `--check` exits 1 when they differ."""
    return readme_main(
        README,
        lambda: blocks(load_runs()),
        prog="python -m experiments.mess3_feedback.report",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
