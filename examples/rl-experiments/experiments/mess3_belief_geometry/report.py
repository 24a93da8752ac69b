"""The study README's generated tables, from the committed run records alone.

Every table between `<!-- report:NAME -->` and `<!-- /report:NAME -->` in the study README is
written by this module from the runs' result.json, interventions.json and yardstick.json; a
fast test (tests/study/test_belief_geometry_report.py) regenerates them and fails when the
README differs. Rewrite the README's blocks after new runs land:

    uv run python -m experiments.mess3_belief_geometry.report --write
    uv run python -m experiments.mess3_belief_geometry.report --check   # exit 1 on a difference

Statistics (the seed is the unit; `rl_harness.analysis.seed_statistics`): per-seed values,
their mean with a 95% Student-t interval and a two-sided t-test; each table's family of
tests is Holm-corrected and says how many tests it holds; power is computed for the stated
smallest effect of interest `SESOI_R2`, at the observed per-seed spread, never at the
observed mean. A yardstick "worth m" is read only where the filter's R² rises with m.
"""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.mess3_belief_geometry import confirmatory
from rl_harness import Results, read_results
from rl_harness.analysis import holm_adjust, readme_main, seed_test, seeds_for_power

STUDY_DIR = Path(__file__).resolve().parent
README = STUDY_DIR / "README.md"

# The runs the README's current results cite: the original initialisation and no KL term,
# CPU budget, library d2c7c58 (README "Results with the original study's initialisation").
ORIGINAL_INIT_RUNS: dict[str, tuple[str, ...]] = {
    "reward_only": (
        "20261206T183448Z-253c2c08",
        "20261206T183448Z-35834f94",
        "20261206T183448Z-ee2ac4b9",
    ),
    "next_token_aux": (
        "20261206T195026Z-95e3457c",
        "20261206T195026Z-d8045e3a",
        "20261206T195026Z-da69835b",
    ),
}
# The earlier runs the README keeps for the record (section "Earlier results"): the library's
# default initialisation and RLlib's KL term, CPU budget, library 769f6b1, 2026-12-05.
EARLIER_RUNS: dict[str, tuple[str, ...]] = {
    "reward_only": (
        "20261205T130252Z-6d2c888d",
        "20261205T170657Z-971ebfe5",
        "20261205T173242Z-56c35375",
    ),
    "next_token_aux": (
        "20261205T133045Z-dc5f2831",
        "20261205T170718Z-51349c53",
        "20261205T175604Z-d332093d",
    ),
    "belief_observation": (
        "20261205T135648Z-34da83c5",
        "20261205T173217Z-b48e42d8",
        "20261205T175645Z-63bc4c66",
    ),
}
# The smallest effect of interest for a training gain in within-branch R² (agent minus its
# untrained module): 0.02, above the spread of untrained initialisations of one run
# (<= 0.013, yardstick.json) and below the gains the token-guess study showed (0.3-0.4).
# A recorded choice: the power rows change with it, the tests do not.
SESOI_R2 = 0.02
POWER = 0.8
ALPHA = 0.05
LAYERS = ("block_2", "final_norm")
DATA_SETS = ("agent_greedy", "belief_mdp", "random")


@dataclass(frozen=True)
class StudyRun:
    arm: str
    seed: int
    run_id: str
    result: Results  # result.json's named metrics (an older nested one read by key path)
    interventions: Mapping[str, Any] | None
    yardstick: Mapping[str, Any] | None
    # The run's operating point (its budget's `task_point` setting; records from before the
    # setting: "flagship") and that point's solver values (solver_values.json, as the run
    # wrote them: the ceilings a run is compared with are always its own point's).
    task_point: str = "flagship"
    solver_values: Mapping[str, Any] | None = None
    # The probe over training (probe_metrics.json training.checkpoints), when recorded.
    checkpoints: tuple[Mapping[str, Any], ...] = ()
    # The analysis ran again on the recorded checkpoints after the in-run one failed: the
    # record saying so (`file`; its library commit `analysis_library_commit`); None for an
    # in-run analysis.
    analysis_rerun: Mapping[str, Any] | None = None
    # probe_metrics.json as recorded (the per-run intervals and best window k live there).
    probe: Mapping[str, Any] | None = None
    # Training seconds (summary.json `final_metrics.time_total_s`: RLlib's, analysis excluded).
    training_s: float | None = None
    # The first training iteration's mean episode return (metrics.jsonl): where two runs of
    # one seed and command part (the retrains).
    first_return: float | None = None
    # The budget's name as the manifest records it ("cpu", "full", "smoke"); None: a record
    # from before budgets had names.
    budget: str | None = None
    # The library commit the run trained at (run_manifest.json `library.commit`).
    library_commit: str | None = None


# The one-off rerun's record (the two memory-point seed-0 runs, made before `rl-harness
# analyze`), and the provenance `rl-harness analyze` writes for each stage it runs.
ANALYSIS_RERUN = "analysis_rerun.json"
ANALYSIS_PROVENANCE = "analysis_provenance.json"


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# A run whose training completed and whose in-run analysis did not (failed, or stopped by a
# signal: the retrains below) counts with the analysis rerun on its checkpoints.
RERUN_STATUSES = ("failed", "interrupted")


def _analysis_rerun(folder: Path, status: str | None) -> Mapping[str, Any] | None:
    """The record of an analysis rerun on a failed or interrupted run's checkpoints:
    analysis_rerun.json, else (`rl-harness analyze`) the provenance of both its `analysis`
    and `result` stages, which an in-run analysis that did not finish never writes."""
    legacy = _read(folder / ANALYSIS_RERUN)
    if legacy is not None:
        return {"file": ANALYSIS_RERUN} | legacy
    stages = (_read(folder / ANALYSIS_PROVENANCE) or {}).get("stages") or {}
    if status not in RERUN_STATUSES or not {"analysis", "result"} <= set(stages):
        return None
    analysis = stages["analysis"]
    return {
        "file": ANALYSIS_PROVENANCE,
        "analysis_library_commit": (analysis.get("library") or {}).get("commit"),
        "started_utc": analysis.get("started_utc"),
    }


def read_run(folder: Path) -> StudyRun:
    """One completed run's records (`<study>/<arm>/results/<run-id>`); else an error. A run
    whose training completed but whose in-run analysis failed or was stopped (recorded
    `failed` / `interrupted`) counts only with a record of
    the analysis rerun on its recorded checkpoints (`rl-harness analyze`'s
    analysis_provenance.json, or the one-off analysis_rerun.json) and a result.json; the
    tables name such runs."""
    manifest = _read(folder / "run_manifest.json")
    status = None if manifest is None else manifest.get("status")
    rerun = _analysis_rerun(folder, status)
    budget = (manifest or {}).get("budget") or {}
    settings = budget.get("settings") or {}
    final = (_read(folder / "summary.json") or {}).get("final_metrics") or {}
    trained = final.get("training_iteration") == settings.get("iterations")
    if status != "completed" and not (
        status in RERUN_STATUSES
        and trained
        and rerun is not None
        and (folder / "result.json").is_file()
    ):
        raise FileNotFoundError(
            f"{folder}: no completed run_manifest.json (nor a fully trained run with an "
            "analysis rerun)"
        )
    assert manifest is not None
    metrics = _read(folder / "probe_metrics.json") or {}
    return StudyRun(
        arm=folder.parent.parent.name,
        seed=int(manifest["seed"]),
        run_id=folder.name,
        result=read_results(folder),
        interventions=_read(folder / "interventions.json"),
        yardstick=_read(folder / "yardstick.json"),
        task_point=settings.get("task_point", "flagship"),
        solver_values=_read(folder / "solver_values.json"),
        checkpoints=tuple((metrics.get("training") or {}).get("checkpoints") or ()),
        analysis_rerun=rerun,
        probe=metrics or None,
        training_s=final.get("time_total_s"),
        first_return=_first_return(folder),
        budget=budget.get("name"),
        library_commit=(manifest.get("library") or {}).get("commit"),
    )


def _first_return(folder: Path) -> float | None:
    """The first training iteration's mean episode return (metrics.jsonl), if recorded."""
    path = folder / "metrics.jsonl"
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as rows:
        first = json.loads(next(rows, "{}"))
    value = first.get("env_runners/episode_return_mean")
    return None if value is None else float(value)


def one_point(runs: Sequence[StudyRun]) -> str | None:
    """The operating point all `runs` share (None for no runs); runs of different points are
    never pooled: an error naming them."""
    points = {run.task_point for run in runs}
    if len(points) > 1:
        named = ", ".join(f"{run.arm}/{run.run_id}: {run.task_point}" for run in runs)
        raise ValueError(f"runs of different task points are never pooled ({named})")
    return next(iter(points), None)


def load_runs(runs: Mapping[str, Sequence[str]], root: Path = STUDY_DIR) -> list[StudyRun]:
    """The named runs' records, arm by arm in seed order; a missing run is an error."""
    loaded = [
        read_run(root / arm / "results" / run_id) for arm, ids in runs.items() for run_id in ids
    ]
    return sorted(loaded, key=lambda run: (list(runs).index(run.arm), run.seed))


def _arms(runs: Sequence[StudyRun]) -> list[str]:
    return list(dict.fromkeys(run.arm for run in runs))


def _f(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def _interval(values: Sequence[float], digits: int = 3) -> tuple[str, float | None]:
    """'mean [low, high]' of the per-seed values and the t-test's p."""
    test = seed_test(values)
    text = f"{_f(test.mean, digits, True)} [{_f(test.low, digits, True)}, "
    return text + f"{_f(test.high, digits, True)}]", test.p_value


def _edit(run: StudyRun, module: str, layer: str) -> Mapping[str, Any]:
    assert run.interventions is not None
    return run.interventions["report"]["modules"][module][layer]["edits"]["corners"]


def interventions_table(runs: Sequence[StudyRun]) -> str:
    """The corner edit of the agent beside the same edit of its untrained module (same
    architecture and init, replayed on the same held-out steps, its own probe), before the
    env's clip; per run and layer, then across seeds with Holm over the family."""
    lines = [
        "Corner edits (16 held-out greedy episodes, 4,096 steps per run), the policy mean's "
        "shift **before** the env's clip as a fraction of the belief-MDP policy's shift and "
        "its correlation with it; the untrained module (same architecture and init, replayed on "
        "the same steps, its own probe) edited the same way; agent minus untrained is the "
        "difference on the same steps (interventions.json keeps paired intervals only after "
        "the clip, so the per-run rows have none). Post-clip / pre-clip: the agent's fraction "
        "after the clip over before it.",
        "",
        "| arm | seed | layer | agent fraction | untrained fraction | agent - untrained "
        "| agent correlation | untrained correlation | agent - untrained | agent clipped "
        "| post-clip / pre-clip (agent) | random orthogonal edit: fraction, correlation (agent) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    per_seed: dict[tuple[str, str, str], list[float]] = {}
    for run in runs:
        if run.interventions is None:
            continue
        for layer in LAYERS:
            agent, control = _edit(run, "agent", layer), _edit(run, "control", layer)
            a_pre, c_pre = agent["pre_clip"]["belief"], control["pre_clip"]["belief"]
            a_frac, c_frac = a_pre["fraction"]["value"], c_pre["fraction"]["value"]
            a_corr, c_corr = a_pre["correlation"]["value"], c_pre["correlation"]["value"]
            post = agent["belief"]["fraction"]["value"]
            rand = agent["pre_clip"]["random_orthogonal"]
            per_seed.setdefault((run.arm, layer, "fraction"), []).append(a_frac - c_frac)
            per_seed.setdefault((run.arm, layer, "correlation"), []).append(a_corr - c_corr)
            lines.append(
                f"| {run.arm} | {run.seed} | {layer} | {a_frac:.1e} | {c_frac:.1e} | "
                f"{a_frac - c_frac:+.1e} | {a_corr:.2f} | {c_corr:.2f} | {a_corr - c_corr:+.2f} | "
                f"{agent['clipped_fraction']['unedited']:.3f} | {post / a_frac:.2f} | "
                f"{rand['fraction']['value']:+.1e}, {rand['correlation']['value']:+.2f} |"
            )
    keys = list(per_seed)
    tests = [_interval(per_seed[key], 4) for key in keys]
    adjusted = holm_adjust([p for _, p in tests])
    lines += [
        "",
        f"Across seeds, agent minus untrained (mean [95% t-interval], t-test p, Holm over the "
        f"{len(keys)} tests of this table):",
        "",
        "| arm | layer | score | agent - untrained | p | p (Holm) |",
        "|---|---|---|---|---|---|",
    ]
    for (arm, layer, score), (text, p), p_holm in zip(keys, tests, adjusted, strict=True):
        lines.append(f"| {arm} | {layer} | {score} | {text} | {_p(p)} | {_p(p_holm)} |")
    return "\n".join(lines)


def _controls(run: StudyRun, data: str, name: str) -> Any:
    """The run's result.json metric `controls_by_data/<data>/<name>` (its value)."""
    return run.result.value(f"controls_by_data/{data}/{name}")


CONTROL_TESTS = (
    ("agent_minus_untrained_within_branch", "agent - untrained"),
    ("agent_minus_best_window_within_branch", "agent - best tokens+actions window"),
    ("agent_minus_best_tokens_window_within_branch", "agent - best tokens-only window"),
)


def controls_table(runs: Sequence[StudyRun]) -> str:
    """The controls' across-seed paired differences (within-branch R², equal last 2 visible
    tokens) on each data set, raw and Holm-adjusted p over the whole table."""
    rows: list[tuple[str, str, str, str, float | None]] = []
    for arm in _arms(runs):
        arm_runs = [run for run in runs if run.arm == arm]
        for data in DATA_SETS:
            for key, label in CONTROL_TESTS:
                text, p = _interval([_controls(run, data, key) for run in arm_runs])
                rows.append((arm, data, label, text, p))
    adjusted = holm_adjust([row[4] for row in rows])
    lines = [
        f"Across seeds (mean [95% t-interval], t-test p, Holm over the {len(rows)} tests of "
        "this table; a difference is called shown only where its Holm p < 0.05):",
        "",
        "| arm | data set | difference (within-branch R²) | across seeds | p | p (Holm) |",
        "|---|---|---|---|---|---|",
    ]
    for (arm, data, label, text, p), p_holm in zip(rows, adjusted, strict=True):
        lines.append(f"| {arm} | `{data}` | {label} | {text} | {_p(p)} | {_p(p_holm)} |")
    return "\n".join(lines)


def power_table(runs: Sequence[StudyRun]) -> str:
    """Seeds the agent-minus-untrained test needs for `POWER` at the stated effect `SESOI_R2`,
    at each arm and data set's observed per-seed spread."""
    lines = [
        f"Seeds needed to detect a training gain of {SESOI_R2} within-branch R² (agent minus "
        f"untrained; the stated smallest effect of interest, `report.SESOI_R2`) with power "
        f"{POWER} at two-sided alpha {ALPHA}, at each row's observed per-seed spread (sd; an "
        "estimate from the seeds in hand, itself uncertain):",
        "",
        "| arm | data set | seeds | sd across seeds | seeds for power at the stated effect |",
        "|---|---|---|---|---|",
    ]
    for arm in _arms(runs):
        arm_runs = [run for run in runs if run.arm == arm]
        for data in DATA_SETS:
            values = [
                _controls(run, data, "agent_minus_untrained_within_branch") for run in arm_runs
            ]
            test = seed_test(values)
            needed = (
                None
                if test.sd is None
                else seeds_for_power(test.sd, SESOI_R2, power=POWER, alpha=ALPHA)
            )
            lines.append(
                f"| {arm} | `{data}` | {test.n} | {_f(test.sd, 4)} | "
                f"{'> 10,000' if needed is None else needed} |"
            )
    return "\n".join(lines)


def _welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    from scipy import stats

    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def arms_table(runs: Sequence[StudyRun]) -> str:
    """next_token_aux against reward_only, within-branch R² of the agent: on the shared data
    sets (the same rollouts per seed for every arm) and on each agent's own rollouts with
    each run's within-branch variance share beside it (the share differs run to run, so a
    mean over own-rollout R² mixes different questions)."""
    arms = _arms(runs)
    if len(arms) != 2:
        return ""
    first, second = arms
    returns = {
        arm: [r.result.value("return_per_step/greedy") for r in runs if r.arm == arm]
        for arm in (first, second)
    }
    rows: list[tuple[str, list[float], list[float], float | None]] = [
        (
            "greedy return per step",
            returns[first],
            returns[second],
            _welch_p(returns[second], returns[first]),
        )
    ]
    key = "agent_r2_within_branch"
    for data in DATA_SETS:
        by_seed = {
            arm: {r.seed: _controls(r, data, key) for r in runs if r.arm == arm}
            for arm in (first, second)
        }
        a, b = list(by_seed[first].values()), list(by_seed[second].values())
        if data == "agent_greedy":  # each agent's own rollouts: no pairing
            p = _welch_p(b, a)
        else:  # the same rollouts per seed for both arms: paired by seed
            seeds = sorted(set(by_seed[first]) & set(by_seed[second]))
            p = seed_test([by_seed[second][s] - by_seed[first][s] for s in seeds]).p_value
        rows.append((f"`{data}`", a, b, p))
    adjusted = holm_adjust([row[3] for row in rows])
    lines = [
        f"`{second}` against `{first}`: greedy return per step (each agent's own rollouts, "
        f"Welch p) and the agent's within-branch R² per seed on each data set, Holm over the "
        f"{len(rows)} tests. `belief_mdp` and `random` are the same rollouts (and the same "
        "untrained module) for both arms per seed, so their p is a paired t-test over seeds; "
        "`agent_greedy` is each agent's own rollouts (Welch p), with each run's within-branch "
        "variance share (yardstick.json, held-out steps) beside it:",
        "",
        f"| quantity | {first} (seeds) | {second} (seeds) | difference of means | p | p (Holm) "
        f"| variance share within branches: {first} / {second} |",
        "|---|---|---|---|---|---|---|",
    ]
    for (data, a, b, p), p_holm in zip(rows, adjusted, strict=True):
        share = "shared data" if data.startswith("`") else "-"
        if data == "`agent_greedy`":
            share = " / ".join(
                ", ".join(
                    _f(r.yardstick["within_branch_variance_fraction"]["held_out"])
                    if r.yardstick
                    else "-"
                    for r in runs
                    if r.arm == arm
                )
                for arm in (first, second)
            )
        mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
        lines.append(
            f"| {data} | {', '.join(_f(v, 4 if share == '-' else 3) for v in a)} | "
            f"{', '.join(_f(v, 4 if share == '-' else 3) for v in b)} | "
            f"{mean_b - mean_a:+.3f} | {_p(p)} | {_p(p_holm)} | {share} |"
        )
    return "\n".join(lines)


def worth_m(filters: Mapping[str, float], agent: float) -> str:
    """The m the agent is worth, read only where the filter's within-branch R² rises with m
    (m = 1..M); otherwise 'undefined' with the first fall."""
    values = [filters[key] for key in sorted(filters, key=lambda k: int(k[1:]))]
    for m in range(1, len(values)):
        if values[m] < values[m - 1]:
            fall = f"{values[m - 1]:.3f} > {values[m]:.3f}"
            return f"undefined (R² falls from m = {m} to {m + 1}: {fall})"
    for m, value in enumerate(values, start=1):
        if value >= agent:
            return str(m)
    return f"> {len(values)}"


def yardstick_table(runs: Sequence[StudyRun]) -> str:
    lines = [
        "The m-step exact filter a within-branch R² is worth, read only where the filter's R² "
        "rises with m (otherwise undefined, with the first fall), from the stationary law and "
        "from the agent's own state law:",
        "",
        "| arm | seed | agent | worth m: stationary law | worth m: policy law |",
        "|---|---|---|---|---|",
    ]
    for run in runs:
        if run.yardstick is None:
            continue
        agent = run.yardstick["agent"]["r2_within_branch"]
        filters = run.yardstick["filters_r2_within_branch"]
        lines.append(
            f"| {run.arm} | {run.seed} | {agent:.3f} | {worth_m(filters['stationary'], agent)} "
            f"| {worth_m(filters['policy'], agent)} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------ per-run and across-seed tables
SOLVER_LABELS = {
    "oracle": "oracle (state known)",
    "belief_mdp": "belief-MDP ceiling",
    "stack_3": "best stack-3 found (not proven global)",
    "stack_2": "best stack-2 (global)",
    "memoryless": "best memoryless (global)",
}


def solver_table(runs: Sequence[StudyRun]) -> str:
    """The solver values the runs recorded (solver_values.json, one set for all of them)."""
    values = point_solver_values(runs)
    lines = ["| reference (solver) | return per step |", "|---|---|"]
    lines += [f"| {label} | {_f(values[key], 4)} |" for key, label in SOLVER_LABELS.items()]
    return "\n".join(lines)


def _difference(run: StudyRun, name: str, branching: str = "tokens_2") -> Mapping[str, Any]:
    """A paired agent-minus-control estimate of the run's own probe (probe_metrics.json
    `differences`), within branches of `branching`: value, low, high."""
    assert run.probe is not None
    return run.probe["differences"][name]["within_branch"][branching]


def _bracket(estimate: Mapping[str, Any], digits: int = 3) -> str:
    return (
        f"{_f(estimate['value'], digits, True)} [{_f(estimate['low'], digits, True)}, "
        f"{_f(estimate['high'], digits, True)}]"
    )


def _training(run: StudyRun) -> str:
    """Training minutes and env steps per second of training (summary.json)."""
    if run.training_s is None:
        return "-"
    rate = run.result.value("env_steps") / run.training_s
    return f"{run.training_s / 60:.1f} ({rate:,.0f})"


def _k(value: Any) -> str:
    return "-" if value is None else str(value)


def runs_table(runs: Sequence[StudyRun], actions: bool = True) -> str:
    """One row per run: return, the agent's probe and its controls on its own held-out
    greedy episodes (result.json; the paired intervals from probe_metrics.json), the
    permutation p and training time. `actions`: the tokens+actions branching's columns
    (recorded from the runs with action branches on)."""
    head = (
        "| arm | seed | run id | greedy | sampled | fraction (greedy) | probe R² "
        "| within-branch R² | untrained replayed, within | agent - untrained, within [95%] "
        "| best window k=2, within | agent - best window, within [95%] (k) "
        "| window reaches the agent at k |"
    )
    if actions:
        head += (
            " tokens+actions branches: agent, within (branches added) | agent - untrained, "
            "within tokens+actions [95%] |"
        )
    head += " within-branch p | training min (env steps/s) |"
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for run in runs:
        r = run.result.value  # each metric of the run's result.json, by name
        row = (
            f"| {run.arm} | {run.seed} | `{run.run_id}` "
            f"| {_f(r('return_per_step/greedy'), 4)} | {_f(r('return_per_step/sampled'), 4)} "
            f"| {_f(r('fraction_of_belief_mdp/greedy'))} "
            f"| {_f(r('probe_r2'))} | {_f(r('probe_r2_within_branch'))} "
            f"| {_f(r('untrained_r2_within_branch'))} "
            f"| {_bracket(_difference(run, 'agent_minus_untrained_module'))} "
            f"| {_f(r('window_r2_within_branch/k2'))} "
            f"| {_bracket(_difference(run, 'agent_minus_best_window'))} ({r('best_window_k')}) "
            f"| {_k(r('window_reaches_agent_within_branch_at_k'))} |"
        )
        if actions:
            gain = _difference(run, "agent_minus_untrained_module", "tokens_actions_2")
            row += (
                f" {_f(r('probe_r2_within_action_branch'))} ({r('action_branches_added')}) "
                f"| {_bracket(gain)} |"
            )
        lines.append(row + f" {_f(r('within_branch_permutation_p_value'), 4)} | {_training(run)} |")
    return "\n".join(lines)


def _mean_interval(values: Sequence[float], digits: int = 3, signed: bool = False) -> str:
    """'mean [low, high]' across seeds (Student-t); one seed: the value alone."""
    test = seed_test(values)
    if test.low is None or test.high is None:
        return _f(test.mean, digits, signed)
    return (
        f"{_f(test.mean, digits, signed)} [{_f(test.low, digits, signed)}, "
        f"{_f(test.high, digits, signed)}]"
    )


def _with_p(values: Sequence[float]) -> str:
    """A paired difference across seeds: mean [t-interval], t-test p (per test, uncorrected)."""
    p = seed_test(values).p_value
    return _mean_interval(values, 3, True) + ("" if p is None else f", p = {p:.2g}")


def seeds_table(runs: Sequence[StudyRun]) -> str:
    """Across seeds per arm: mean and 95% Student-t interval of the per-run columns, the
    paired differences with their one-sample t-test p (per test: the Holm-corrected family
    is the controls table), the window's k per seed."""
    lines = [
        "| arm | seeds | greedy | fraction (greedy) | within-branch R² | untrained replayed, "
        "within | agent - untrained, within | best window k=2, within | agent - best window, "
        "within | window reaches the agent at k |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in _arms(runs):
        results = [run.result for run in runs if run.arm == arm]
        reach = "window_reaches_agent_within_branch_at_k"

        def column(*path: str, results: list[Results] = results) -> list[float]:
            return [float(result.value("/".join(path))) for result in results]  # type: ignore[arg-type]

        lines.append(
            f"| {arm} | {len(results)} | {_mean_interval(column('return_per_step', 'greedy'), 4)} "
            f"| {_mean_interval(column('fraction_of_belief_mdp', 'greedy'))} "
            f"| {_mean_interval(column('probe_r2_within_branch'))} "
            f"| {_mean_interval(column('untrained_r2_within_branch'))} "
            f"| {_with_p(column('agent_minus_untrained_within_branch'))} "
            f"| {_mean_interval(column('window_r2_within_branch', 'k2'))} "
            f"| {_with_p(column('agent_minus_best_window_within_branch'))} "
            f"| {', '.join(_k(r.value(reach)) for r in results)} |"
        )
    return "\n".join(lines)


def controls_by_data_table(runs: Sequence[StudyRun]) -> str:
    """Per arm and data set (result.json `controls_by_data`; the best windows' k from
    probe_metrics.json): within-branch R² of the agent, the untrained module and the best
    windows across seeds, the paired differences with their per-test t-test p, and the
    branches the binned actions add per seed."""
    lines = [
        "| arm | data set | return per step | agent | untrained module | agent - untrained "
        "| best tokens+actions window (k) | agent - that window | best tokens-only window (k) "
        "| agent - that window | branches the actions added |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm in _arms(runs):
        arm_runs = [run for run in runs if run.arm == arm]
        for data in DATA_SETS:
            probes = [run.probe["controls_by_data"][data] for run in arm_runs if run.probe]
            ks = [p["best_window_k"] for p in probes]
            tks = [p["best_tokens_window_k"] for p in probes]

            def column(name: str, runs: list[StudyRun] = arm_runs, data: str = data) -> list[Any]:
                return [_controls(run, data, name) for run in runs]

            best = [
                _controls(run, data, f"window_r2_within_branch/k{k}")
                for run, k in zip(arm_runs, ks, strict=True)
            ]
            tokens = [
                _controls(run, data, f"tokens_window_r2_within_branch/k{k}")
                for run, k in zip(arm_runs, tks, strict=True)
            ]
            lines.append(
                f"| {arm} | `{data}` | {_mean_interval(column('return_per_step'), 4)} "
                f"| {_mean_interval(column('agent_r2_within_branch'))} "
                f"| {_mean_interval(column('untrained_r2_within_branch'))} "
                f"| {_with_p(column('agent_minus_untrained_within_branch'))} "
                f"| {_mean_interval(best)} ({', '.join(map(str, ks))}) "
                f"| {_with_p(column('agent_minus_best_window_within_branch'))} "
                f"| {_mean_interval(tokens)} ({', '.join(map(str, tks))}) "
                f"| {_with_p(column('agent_minus_best_tokens_window_within_branch'))} "
                f"| {', '.join(map(str, column('action_branches_added')))} |"
            )
    return "\n".join(lines)


def _worth_interpolated(equivalent: Mapping[str, Any], n: int) -> str:
    reach, interpolated = equivalent.get("reaches_agent_at_m"), equivalent.get("interpolated_m")
    if reach is None:
        return f"> {n}"
    return f"{reach}" + ("" if interpolated is None else f" ({interpolated:.1f})")


def yardstick_runs_table(runs: Sequence[StudyRun]) -> str:
    """Each run's yardstick.json: the agent beside the exact m-step filters (both laws), the
    first m whose filter reaches it (interpolated in R²), the within-branch variance share,
    random ReLU features, 5 untrained initialisations and the windows' MLP on the agent."""
    lines = [
        "| arm | seed | agent | worth m: stationary / policy law (interpolated) | exact filter of "
        "the last m steps, m = 1..6, stationary law | the same, policy law | share of variance "
        "within branches | random ReLU 64 / 256 / 1024 | untrained x5: mean (min to max) "
        "| MLP on the agent |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        record = run.yardstick
        if record is None:
            lines.append(f"| {run.arm} | {run.seed} | missing: no yardstick.json | | | | | | | |")
            continue
        filters = record["filters_r2_within_branch"]
        ordered = {
            law: [filters[law][key] for key in sorted(filters[law], key=lambda k: int(k[1:]))]
            for law in ("stationary", "policy")
        }
        widths = record["random_features_r2_within_branch"]
        relu = [widths[key] for key in sorted(widths, key=lambda k: int(k[len("width") :]))]
        untrained = record["untrained"]["r2_within_branch"]
        equivalent = record["equivalent_memory"]
        n = len(ordered["stationary"])
        lines.append(
            f"| {run.arm} | {run.seed} | {_f(record['agent']['r2_within_branch'])} "
            f"| {_worth_interpolated(equivalent['stationary'], n)} / "
            f"{_worth_interpolated(equivalent['policy'], n)} "
            f"| {', '.join(_f(v) for v in ordered['stationary'])} "
            f"| {', '.join(_f(v) for v in ordered['policy'])} "
            f"| {_f(record['within_branch_variance_fraction']['held_out'])} "
            f"| {' / '.join(_f(v) for v in relu)} "
            f"| {_f(untrained['mean'])} ({_f(untrained['min'])} to {_f(untrained['max'])}) "
            f"| {_f(record['mlp_r2_within_branch']['agent'])} |"
        )
    return "\n".join(lines)


# ------------------------------------------------------------ the original study's figures
ORIGINAL_FIGURES = STUDY_DIR / "original_figures.json"
# The original's data protocol at step 0 measured on our module (original_protocol.py).
ORIGINAL_PROTOCOL = STUDY_DIR / "original_protocol.json"
# Our probe over training per checkpoint against the original's probe_curve.json figure.
ORIGINAL_QUANTITIES = {
    "R² global": ("r2_pooled", "r2_global"),
    "R² within tokens_2": ("within_branch_r2_pooled", "r2_fine_depth2"),
}
MATCH_TOLERANCE = 0.001  # relative env-step difference still called the same checkpoint


def read_original_figures(path: Path = ORIGINAL_FIGURES) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _checkpoints(run: StudyRun) -> dict[int, Mapping[str, Any]]:
    """{env steps: checkpoint record} of the run's probe over training."""
    return {int(c["env_steps"]): c for c in run.checkpoints}


def _matched(steps: int, original: Sequence[int]) -> int | None:
    """The original's checkpoint at the same step (within MATCH_TOLERANCE), else None."""
    for candidate in original:
        if abs(candidate - steps) <= MATCH_TOLERANCE * max(steps, 1):
            return candidate
    return None


def _causes(record: Mapping[str, Any], steps: int | None) -> str:
    """The candidate causes that can act at `steps` (None: an unmatched row, all of them)."""
    return ", ".join(
        cause["id"]
        for cause in record["candidate_causes"]
        if steps is None or (cause["from_step"] is not None and cause["from_step"] <= steps)
    )


def _spread_reading(
    ours: float, theirs: Sequence[float], causes: str, measured: Sequence[float] | None = None
) -> str:
    """Within the original's per-seed range, or beyond it with the candidate causes; where the
    original's data protocol was measured on our module (`measured`, step 0), whether that
    alone lands in the original's range (then `data` explains the difference)."""
    low, high = min(theirs), max(theirs)
    if low <= ours <= high:
        return "within the original's seed range"
    if measured:
        mean = sum(measured) / len(measured)
        text = (
            f"beyond it; measured with the original's data protocol (our module rolled out by "
            f"its own sampled policy, original_protocol.json): {', '.join(_f(v) for v in measured)}"
            f", {mean - sum(theirs) / len(theirs):+.3f} from the original's mean: "
        )
        if low <= mean <= high:
            return text + "within its seed range, so `data` explains the difference"
        rest = ", ".join(c for c in causes.split(", ") if c != "data")
        return text + f"still beyond it: the rest unexplained; candidate causes: {rest}"
    return f"beyond it: unexplained; candidate causes: {causes}"


def original_table(
    runs: Sequence[StudyRun],
    record: Mapping[str, Any] | None = None,
    protocol: Mapping[str, Any] | None = None,
    runs_name: str = "ORIGINAL_INIT_RUNS",
) -> str:
    """Our runs (`report.<runs_name>`) beside the original study's figures
    (original_figures.json) at matched env steps; each row whose mean lies outside the
    original's per-seed range says which candidate causes can act at that step, and at step 0
    what the original's data protocol gives on our module (original_protocol.json, when
    measured). Runs that end where the original ended (the FULL budget) have every checkpoint
    matched: then only the original's final summary is added."""
    record = read_original_figures() if record is None else record
    if protocol is None and ORIGINAL_PROTOCOL.is_file():
        protocol = json.loads(ORIGINAL_PROTOCOL.read_text(encoding="utf-8"))
    arms = [arm for arm in _arms(runs) if arm in record["arms"]]
    lines = [
        f"Ours (`report.{runs_name}`, the probe over training in probe_metrics.json) "
        f"beside the original study's per-seed `probe_curve.json` ({record['repository']}, "
        "`original_figures.json` names each file's path and commit) at the same PPO iteration "
        f"(env steps equal within {MATCH_TOLERANCE:.1%}). Per seed, then our mean minus the "
        "original's mean; a mean outside the original's per-seed range is called beyond its "
        "seed spread, with the candidate causes (below) that can act at that step:",
        "",
        "| arm (original) | env steps: ours / original | quantity | ours (seeds) | original "
        "(seeds) | ours - original (means) | reading |",
        "|---|---|---|---|---|---|---|",
    ]
    unmatched: list[str] = []
    for arm in arms:
        arm_runs = [run for run in runs if run.arm == arm]
        figures = [
            f for f in record["figures"] if f["arm"] == arm and isinstance(f["env_steps"], int)
        ]
        original_steps = sorted({f["env_steps"] for f in figures if f["seed"] == 0})
        by_seed = {
            (f["seed"], f["env_steps"]): f["values"] for f in figures if f["seed"] is not None
        }
        seeds = sorted({f["seed"] for f in figures})
        our_steps = sorted(set.intersection(*(set(_checkpoints(run)) for run in arm_runs)))
        for steps in our_steps:
            match = _matched(steps, original_steps)
            if match is None:
                unmatched.append(f"{arm} at {steps:,}")
                continue
            for label, (ours_key, theirs_key) in ORIGINAL_QUANTITIES.items():
                ours = [_checkpoints(run)[steps][ours_key]["value"] for run in arm_runs]
                theirs = []
                for seed in seeds:  # seeds 1-2 may record 16 more steps per iteration
                    near = _matched(match, [s for (z, s) in by_seed if z == seed])
                    theirs.append(by_seed[(seed, near)][theirs_key])
                mean_ours, mean_theirs = sum(ours) / len(ours), sum(theirs) / len(theirs)
                measured = (
                    [row[ours_key]["value"] for row in protocol["rows"]]
                    if protocol is not None and steps == 0
                    else None
                )
                lines.append(
                    f"| {arm} ({figures[0]['original_arm']}) | {steps:,} / {match:,} | {label} | "
                    f"{', '.join(_f(v) for v in ours)} | {', '.join(_f(v) for v in theirs)} | "
                    f"{mean_ours - mean_theirs:+.3f} | "
                    f"{_spread_reading(mean_ours, theirs, _causes(record, steps), measured)} |"
                )
    lines += [
        "",
        (
            "No matched checkpoint (not compared as a difference at one step): "
            + "; ".join(unmatched)
            + ". Beside them, the original at its nearest checkpoint and at its end:"
            if unmatched
            else "Every checkpoint of ours matched one of the original's. Our end beside the "
            "original's end:"
        ),
        "",
        "| arm (original) | env steps: ours / original | quantity | ours (seeds) | original "
        "(seeds, or mean ± sd) | reading |",
        "|---|---|---|---|---|---|",
    ]
    for arm in arms:
        arm_runs = [run for run in runs if run.arm == arm]
        figures = [f for f in record["figures"] if f["arm"] == arm]
        steps = int(arm_runs[0].result.value("env_steps"))
        curves = [f for f in figures if isinstance(f["env_steps"], int)]
        later = {f["env_steps"] for f in curves if f["env_steps"] > steps and f["seed"] == 0}
        end_matched = _matched(steps, [f["env_steps"] for f in curves if f["seed"] == 0])
        # Every seed's checkpoint at the original's first iteration after our end; none when
        # our end is one of the original's checkpoints (matched above) or past its last.
        nearest = (
            [f for f in curves if _matched(min(later), [f["env_steps"]]) is not None]
            if later and end_matched is None
            else []
        )
        final = next(f for f in figures if f["seed"] is None)
        name = f"{arm} ({final['original_arm']})"
        ours_r2 = {
            key: [_checkpoints(run)[steps][ours_key]["value"] for run in arm_runs]
            for key, (ours_key, _) in ORIGINAL_QUANTITIES.items()
        }
        sampled = [run.result.value("return_per_step/sampled") for run in arm_runs]
        greedy = [run.result.value("return_per_step/greedy") for run in arm_runs]
        unmatched_causes = _causes(record, None)
        # Our end at one of the original's checkpoints: the causes that act there, not the
        # unmatched rows' (which add `steps`).
        end_causes = unmatched_causes if end_matched is None else _causes(record, steps)
        rows: list[tuple[str, str, list[float], list[float]]] = []
        if nearest:
            step_text = f"{steps:,} / {nearest[0]['env_steps']:,}"
            rows = [
                (
                    step_text,
                    "return per step, sampled",
                    sampled,
                    [f["values"]["reward_mean"] for f in nearest],
                ),
                *(
                    (step_text, key, ours_r2[key], [f["values"][theirs] for f in nearest])
                    for key, (_, theirs) in ORIGINAL_QUANTITIES.items()
                ),
            ]
        for step_text_, label, ours, theirs in rows:
            lines.append(
                f"| {name} | {step_text_} | {label} | {', '.join(_f(v) for v in ours)} | "
                f"{', '.join(_f(v) for v in theirs)} | "
                f"{_spread_reading(sum(ours) / len(ours), theirs, unmatched_causes)} |"
            )
        table = final["values"]
        finals = [f for f in curves if f["env_steps"] > 10_000_000]  # each seed's last record
        for label, ours, key, seed_key in (
            ("return per step, greedy", greedy, "reward_greedy", "reward_greedy"),
            ("R² global", ours_r2["R² global"], "r2_global", "r2_global"),
            ("R² within tokens_2", ours_r2["R² within tokens_2"], "r2_fine", "r2_fine_depth2"),
        ):
            mean, sd = table[key]
            theirs = [f["values"][seed_key] for f in finals]
            lines.append(
                f"| {name} | {steps:,} / final (10.03M) | {label} | "
                f"{', '.join(_f(v) for v in ours)} | {', '.join(_f(v) for v in theirs)}; "
                f"{mean:.3f} ± {sd:.3f} (arms_table.json) | "
                f"{_spread_reading(sum(ours) / len(ours), theirs, end_causes)} |"
            )
    lines += ["", "Candidate causes (`original_figures.json`, `candidate_causes`):", ""]
    for cause in record["candidate_causes"]:
        start = cause["from_step"]
        when = "unmatched rows" if start is None else f"from step {start:,}"
        lines.append(f"- `{cause['id']}` ({when}): {cause['text']}.")
    return "\n".join(lines)


# ------------------------------------------------------------ the memory point (issue 52 item 2)
# The runs the README's memory-point tables cite: `reward_only_memory` and
# `next_token_aux_memory` at `task.TASK_POINTS["memory"]`, CPU budget. Empty until they land:
# add each run id here, then `python -m experiments.mess3_belief_geometry.report --write`.
MEMORY_RUNS: dict[str, tuple[str, ...]] = {
    "reward_only_memory": (
        "20261207T054037Z-82f34eb9",
        "20261207T084650Z-60b6b127",
        "20261207T091741Z-0d997d05",
        "20261207T113829Z-34605e28",
        "20261207T122203Z-338f68a3",
    ),
    "next_token_aux_memory": (
        "20261207T054038Z-f48607e9",
        "20261207T084650Z-4e1b8172",
        "20261207T091741Z-0e0f3ec7",
        "20261207T113829Z-154f429d",
        "20261207T122232Z-4162dedd",
    ),
}
SHOWN_AT = 0.05  # a difference is called shown only where its Holm-adjusted p is below this
# result.json `incremental_r2` per k (incremental.headline): the two quantities and two scores.
INCREMENT_QUANTITIES = {
    "agent_increment": "b - a (agent increment over the window)",
    "agent_minus_control": "b - c (agent increment - untrained increment)",
}
INCREMENT_SCORES = {"": "global", "_within_branch": "within tokens_2"}
SOLVER_KEYS = ("belief_mdp", "stack_3", "stack_2", "memoryless")
# result.json keys of the incremental test (incremental.KEY, incremental.KEY_SAMPLED; named
# here so that reading records imports no torch) and the rollouts each reads.
INCREMENTAL_KEY = "incremental_r2"
INCREMENTAL_SAMPLED_KEY = "incremental_r2_sampled"
ROLLOUTS = {INCREMENTAL_KEY: "greedy", INCREMENTAL_SAMPLED_KEY: "sampled"}


def _empty(runs: Sequence[StudyRun]) -> str | None:
    if runs:
        return None
    return (
        "No runs at the memory point yet: `report.MEMORY_RUNS` is empty (add the run ids of "
        "`reward_only_memory` and `next_token_aux_memory`, then `python -m "
        "experiments.mess3_belief_geometry.report --write`)."
    )


def point_solver_values(runs: Sequence[StudyRun]) -> Mapping[str, Any]:
    """The solver values the runs' own point gives (each run's solver_values.json); runs of
    different points, or of one point with different recorded values, are an error."""
    one_point(runs)
    values = [run.solver_values for run in runs]
    if any(v is None for v in values):
        missing = [run.run_id for run in runs if run.solver_values is None]
        raise FileNotFoundError(f"runs without solver_values.json: {', '.join(missing)}")
    first = values[0]
    for run, value in zip(runs, values, strict=True):
        differ = value.get("problem") != first.get("problem") or any(
            not _same_value(value.get(key), first.get(key)) for key in SOLVER_KEYS
        )
        if differ:
            raise ValueError(f"{run.run_id}: solver values differ from {runs[0].run_id}'s")
    return first


# Each run solves its point again; two solves of one problem agree to float rounding, not to
# the bit (seen: 4e-16 between the memory point's runs), which is the same value.
SOLVER_RTOL = 1e-9


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=SOLVER_RTOL, abs_tol=SOLVER_RTOL)
    return bool(a == b)


def _one_sided_p(values: Sequence[float]) -> float | None:
    """One-sided one-sample t-test p of mean > 0 across seeds (None under 2 seeds or no
    spread: nothing to test)."""
    if len(values) < 2 or len(set(values)) < 2:
        return None
    from scipy import stats

    return float(stats.ttest_1samp(values, 0.0, alternative="greater").pvalue)


def untrained_inits(result: Results, key: str = INCREMENTAL_KEY) -> int:
    """How many untrained inits the run's `key` test replayed for (c) (1: a one-init record)."""
    value = result.optional(f"{key}/untrained_inits")
    return 1 if value is None else int(value)


def increment_metric(result: Results, key: str, k: int, name: str) -> str:
    """The run's result.json name of `name` (a quantity and score suffix) at k: b - c of a run
    with several untrained inits is the claim's minimum over them (incremental.headline:
    `agent_minus_controls_min`, its p the largest of the inits' Holm p over k x inits)."""
    quantity = "agent_minus_control"
    if name.startswith(quantity) and untrained_inits(result, key) > 1:
        return f"{key}/k{k}/agent_minus_controls_min{name[len(quantity) :]}"
    return f"{key}/k{k}/{name}"


def _several_inits(runs: Sequence[StudyRun], key: str) -> bool:
    return any(untrained_inits(run.result, key) > 1 for run in runs)


def incremental_ks(result: Results, key: str = INCREMENTAL_KEY) -> list[int]:
    """The k of the run's result.json `<key>/k<k>/...` metrics (incremental.headline), in
    order; [] for a run without the test."""
    ks = {int(name.split("/")[1][1:]) for name in result if name.startswith(f"{key}/k")}
    return sorted(ks)


def incremental_rows(
    results: Sequence[Results], key: str = INCREMENTAL_KEY
) -> dict[str, list[dict[str, Any]]]:
    """Across seeds, per quantity+score and k (the k every run has): {k, n, mean, low, high,
    values, p (one-sided t, mean > 0), p_holm (Holm over k of that quantity and score)} from
    each run's result.json `<key>/k<k>/<quantity>` metrics (b - c of a run with several
    untrained inits: its minimum over them, `increment_metric`)."""
    from rl_harness.analysis.comparison import mean_interval

    per_run = [set(incremental_ks(result, key)) for result in results]
    ks = sorted(set.intersection(*per_run)) if per_run else []
    out: dict[str, list[dict[str, Any]]] = {}
    for quantity in INCREMENT_QUANTITIES:
        for suffix in INCREMENT_SCORES:
            name = f"{quantity}{suffix}"
            rows = []
            for k in ks:
                found = [
                    result.optional(increment_metric(result, key, k, name)) for result in results
                ]
                values = [value for value in found if value is not None]
                summary = mean_interval(values)
                rows.append(
                    {
                        "k": k,
                        "n": summary.n,
                        "mean": summary.mean,
                        "low": summary.low,
                        "high": summary.high,
                        "values": summary.values,
                        "p": _one_sided_p(values),
                    }
                )
            for row, adjusted in zip(rows, holm_adjust([r["p"] for r in rows]), strict=True):
                row["p_holm"] = adjusted
            out[name] = rows
    return out


def _head(point: str | None, values: Mapping[str, Any]) -> str:
    problem = values.get("problem") or {}
    settings = ", ".join(
        f"{key} {problem[key]}"
        for key in ("alpha", "mixing", "w_max", "beta", "delay")
        if key in problem
    )
    return f"Task point `{point}` ({settings}; each run's solver_values.json)"


def memory_returns_table(runs: Sequence[StudyRun]) -> str:
    """Return per step of each run against ITS point's solver values: the belief-MDP ceiling
    and the best stack-3 table found (with the solvers' convergence flags); across seeds per
    arm and policy (greedy, sampled), the mean and t-interval of return - stack-3 and its
    one-sided t-test (> 0), Holm over every arm under both policies (stack3_gap_tests)."""
    if (empty := _empty(runs)) is not None:
        return empty
    values = point_solver_values(runs)
    converged = values.get("converged") or {}
    flags = ", ".join(f"{key} {'yes' if converged.get(key) else 'NO'}" for key in SOLVER_KEYS)
    lines = [
        f"{_head(one_point(runs), values)}: belief-MDP ceiling {_f(values['belief_mdp'], 4)}, "
        f"best stack-3 found {_f(values['stack_3'], 4)} (a search, not a proven optimum), "
        f"best stack-2 {_f(values['stack_2'], 4)}, best memoryless (stack-1) "
        f"{_f(values['memoryless'], 4)}; solvers converged: {flags}. Return per step under "
        "the greedy and the sampled policy (each run's evaluation episodes; the agent trained "
        "and is scored with the sampled one):",
        "",
        "| arm | seed | run | greedy return per step | fraction of the ceiling | "
        "- best stack-3 found | - best stack-2 | - best memoryless | sampled return per step | "
        "fraction of the ceiling | - best stack-3 found | - best stack-2 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        value = run.result.value("return_per_step/greedy")
        sampled = run.result.optional("return_per_step/sampled")
        sampled_cells = (
            "- | - | - | -"
            if sampled is None
            else f"{_f(sampled, 4)} | {_f(sampled / values['belief_mdp'])} | "
            f"{_f(sampled - values['stack_3'], 4, True)} | "
            f"{_f(sampled - values['stack_2'], 4, True)}"
        )
        lines.append(
            f"| {run.arm} | {run.seed} | `{run.run_id}` | {_f(value, 4)} | "
            f"{_f(value / values['belief_mdp'])} | {_f(value - values['stack_3'], 4, True)} | "
            f"{_f(value - values['stack_2'], 4, True)} | "
            f"{_f(value - values['memoryless'], 4, True)} | {sampled_cells} |"
        )
    tests = stack3_gap_tests(runs, values)
    lines += [
        "",
        "Across seeds, return - best stack-3 found (mean [95% t-interval] (n), one-sided t-test "
        f"p of mean > 0, Holm over the {len(tests)} tests: each arm under each policy):",
        "",
        "| arm | policy | return - stack-3 | p | p (Holm) |",
        "|---|---|---|---|---|",
    ]
    for (arm, policy), entry in tests.items():
        test = seed_test(entry["gaps"])
        interval = (
            "" if test.low is None else f" [{_f(test.low, 4, True)}, {_f(test.high, 4, True)}]"
        )
        lines.append(
            f"| {arm} | {policy} | {_f(test.mean, 4, True)}{interval} ({test.n}) | "
            f"{_p(entry['p'])} | {_p(entry['p_holm'])} |"
        )
    return "\n".join(lines)


def stack3_gap_tests(
    runs: Sequence[StudyRun], values: Mapping[str, Any]
) -> dict[tuple[str, str], dict[str, Any]]:
    """{(arm, policy): {gaps, p, p_holm}}: each run's return per step under `policy` (greedy,
    sampled) minus the best stack-3 table found; one-sided t-test p of mean > 0 across seeds,
    Holm over the whole family (every arm under both policies)."""
    tests: dict[tuple[str, str], dict[str, Any]] = {}
    for arm in _arms(runs):
        for policy in ("greedy", "sampled"):
            gaps = [
                r.result.value(f"return_per_step/{policy}") - values["stack_3"]
                for r in runs
                if r.arm == arm and r.result.optional(f"return_per_step/{policy}") is not None
            ]
            tests[(arm, policy)] = {"gaps": gaps, "p": _one_sided_p(gaps)}
    adjusted = holm_adjust([entry["p"] for entry in tests.values()])
    for entry, p_holm in zip(tests.values(), adjusted, strict=True):
        entry["p_holm"] = p_holm
    return tests


def _estimate(result: Results, name: str) -> str:
    estimate = result.get(name)
    if estimate is None or estimate.value is None:
        return "-"
    return (
        f"{_f(estimate.value, 3, True)} [{_f(estimate.low, 3, True)}, {_f(estimate.high, 3, True)}]"
    )


def memory_incremental_runs_table(runs: Sequence[StudyRun], key: str = INCREMENTAL_KEY) -> str:
    """Per run and k: the incremental test on the run's own held-out episodes (result.json
    `key`: `incremental_r2` on its greedy rollouts, `incremental_r2_sampled` on its sampled
    ones): R² of the window alone (a), b - a and b - c with their paired episode-bootstrap
    intervals and the run's one-sided bootstrap p, Holm over k within the run. Where a run
    has several untrained inits, the table names each run's number of inits and shows b - c
    as the minimum over them (p: the largest of the inits' p, Holm over k x inits) and the
    mean over them (a one-init run: both its one b - c)."""
    if (empty := _empty(runs)) is not None:
        return empty
    one_point(runs)
    if _several_inits(runs, key):
        return _incremental_runs_several(runs, key)
    lines = [
        f"Per run (its held-out {ROLLOUTS[key]} episodes; a = the windows' MLP on the last k "
        "visible tokens "
        "and executed actions, b = a + the agent's representation, c = a + the untrained "
        "module's; b - a and b - c with 95% paired episode-bootstrap intervals; p: the run's "
        "one-sided bootstrap p, Holm over k within the run, as recorded):",
        "",
        "| arm | seed | k | score | R²(a) | b - a [95%] | p (Holm over k) | b - c [95%] "
        "| p (Holm over k) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        ks = incremental_ks(run.result, key)
        if not ks:
            lines.append(f"| {run.arm} | {run.seed} | missing: no `{key}` | | | | | | |")
            continue
        for k in ks:
            for suffix, score in INCREMENT_SCORES.items():
                increment, minus = f"agent_increment{suffix}", f"agent_minus_control{suffix}"
                name = f"{key}/k{k}/{{}}".format
                optional = run.result.optional
                lines.append(
                    f"| {run.arm} | {run.seed} | {k} | {score} | "
                    f"{_f(optional(name(f'r2_window{suffix}')))} | "
                    f"{_estimate(run.result, name(increment))} | "
                    f"{_p(optional(name(f'{increment}_p_holm')))} | "
                    f"{_estimate(run.result, name(minus))} | "
                    f"{_p(optional(name(f'{minus}_p_holm')))} |"
                )
    return "\n".join(lines)


def _incremental_runs_several(runs: Sequence[StudyRun], key: str) -> str:
    """`memory_incremental_runs_table` where some run has several untrained inits."""
    lines = [
        f"Per run (its held-out {ROLLOUTS[key]} episodes; a = the windows' MLP on the last k "
        "visible tokens and executed actions, b = a + the agent's representation, c_j = a + "
        "untrained init j's; inits: how many untrained modules the run replayed; b - a and "
        "min_j (b - c_j) with 95% paired episode-bootstrap intervals (the minimum taken on each "
        "resample), mean_j (b - c_j); p: the run's one-sided bootstrap p, b - a Holm over k, "
        "the minimum's the largest of its inits' p Holm over k x inits; a one-init run's min "
        "and mean are its one b - c, Holm over k):",
        "",
        "| arm | seed | inits | k | score | R²(a) | b - a [95%] | p (Holm) | min b - c_j [95%] "
        "| p (Holm) | mean b - c_j |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        ks = incremental_ks(run.result, key)
        inits = untrained_inits(run.result, key)
        if not ks:
            lines.append(f"| {run.arm} | {run.seed} | - | missing: no `{key}` | | | | | | | |")
            continue
        for k in ks:
            for suffix, score in INCREMENT_SCORES.items():
                increment = f"agent_increment{suffix}"
                minus = increment_metric(run.result, key, k, f"agent_minus_control{suffix}")
                mean = minus if inits == 1 else f"{key}/k{k}/agent_minus_controls_mean{suffix}"
                name = f"{key}/k{k}/{{}}".format
                optional = run.result.optional
                lines.append(
                    f"| {run.arm} | {run.seed} | {inits} | {k} | {score} | "
                    f"{_f(optional(name(f'r2_window{suffix}')))} | "
                    f"{_estimate(run.result, name(increment))} | "
                    f"{_p(optional(name(f'{increment}_p_holm')))} | "
                    f"{_estimate(run.result, minus)} | {_p(optional(f'{minus}_p_holm'))} | "
                    f"{_f(optional(mean), 3, True)} |"
                )
    return "\n".join(lines)


def memory_increments(
    runs: Sequence[StudyRun], key: str = INCREMENTAL_KEY
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """{arm: incremental_rows of its runs that have `key`}."""
    return {
        arm: incremental_rows(
            [r.result for r in runs if r.arm == arm and incremental_ks(r.result, key)], key
        )
        for arm in _arms(runs)
    }


def memory_incremental_seeds_table(runs: Sequence[StudyRun], key: str = INCREMENTAL_KEY) -> str:
    """Across seeds per arm and k: b - a and b - c, mean [t-interval], one-sided t-test p of
    mean > 0, Holm over k = 1..K within each arm, quantity and score (named); on the rollouts
    `key` names (ROLLOUTS)."""
    if (empty := _empty(runs)) is not None:
        return empty
    one_point(runs)
    lines = [
        f"On each run's {ROLLOUTS[key]} rollouts. "
        "Across seeds (the seed is the unit): per arm and k, mean [95% t-interval] (n) of each "
        "run's b - a and b - c, the one-sided t-test p of mean > 0, and that p Holm-adjusted "
        "over k = 1..K within each arm, quantity and score (each family holds K tests):",
        "",
        "| arm | quantity | score | k | mean [95% t] (n) | p | p (Holm over k) | per seed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if not any(incremental_ks(run.result, key) for run in runs):
        return "\n".join([*lines, f"| no run has `{key}` | | | | | | | |"])
    several = _several_inits(runs, key)
    for arm, table in memory_increments(runs, key).items():
        for name, rows in table.items():
            quantity = next(q for q in INCREMENT_QUANTITIES if name.startswith(q))
            score = INCREMENT_SCORES[name[len(quantity) :]]
            for row in rows:
                interval = (
                    ""
                    if row["low"] is None
                    else f" [{_f(row['low'], 3, True)}, {_f(row['high'], 3, True)}]"
                )
                label = INCREMENT_QUANTITIES[quantity]
                if quantity == "agent_minus_control" and several:
                    label += ", the minimum over each run's untrained inits"
                lines.append(
                    f"| {arm} | {label} | {score} | {row['k']} | "
                    f"{_f(row['mean'], 3, True)}{interval} ({row['n']}) | {_p(row['p'])} | "
                    f"{_p(row['p_holm'])} | {', '.join(_f(v, 3, True) for v in row['values'])} |"
                )
    return "\n".join(lines)


def memory_arm_tests(runs: Sequence[StudyRun]) -> list[dict[str, Any]]:
    """The second arm against the first on data both share: per shared data set
    (controls.DATA_SETS minus the agents' own rollouts) the agent's within-branch R² and its
    gain over the untrained module, paired by seed (the same rollouts per seed for both
    arms); Holm over the family. Only seeds both arms ran enter."""
    arms = _arms(runs)
    if len(arms) != 2:
        return []
    first, second = arms
    seeds = sorted(
        {r.seed for r in runs if r.arm == first} & {r.seed for r in runs if r.arm == second}
    )
    by = {(r.arm, r.seed): r for r in runs}
    tests = []
    for data in DATA_SETS[1:]:  # agent_greedy is each agent's own rollouts: not shared
        for key, label in (
            ("agent_r2_within_branch", "agent within-branch R²"),
            ("agent_minus_untrained_within_branch", "agent - untrained, within-branch R²"),
        ):
            differences = [
                _controls(by[(second, s)], data, key) - _controls(by[(first, s)], data, key)
                for s in seeds
            ]
            test = seed_test(differences) if differences else None
            tests.append(
                {
                    "data": data,
                    "label": label,
                    "seeds": seeds,
                    "differences": differences,
                    "test": test,
                    "p": None if test is None else test.p_value,
                }
            )
    for entry, adjusted in zip(tests, holm_adjust([t["p"] for t in tests]), strict=True):
        entry["p_holm"] = adjusted
    return tests


def memory_arms_table(runs: Sequence[StudyRun]) -> str:
    if (empty := _empty(runs)) is not None:
        return empty
    one_point(runs)
    arms = _arms(runs)
    tests = memory_arm_tests(runs)
    if not tests:
        return f"One arm only ({', '.join(arms)}): no comparison."
    first, second = arms
    lines = [
        f"`{second}` minus `{first}` on the data sets both read (`belief_mdp`, `random`: the same "
        "rollouts, exact beliefs and untrained module per seed for both arms), paired by seed "
        f"(seeds {', '.join(map(str, tests[0]['seeds']))}): mean [95% t-interval], two-sided "
        f"t-test p, Holm over the {len(tests)} tests of this table. The agents' own rollouts "
        "differ between the arms and are not compared here:",
        "",
        "| data set | quantity | per seed | mean [95% t] | p | p (Holm) |",
        "|---|---|---|---|---|---|",
    ]
    for entry in tests:
        test = entry["test"]
        mean = "-" if test is None else _f(test.mean, 3, True)
        if test is not None and test.low is not None:
            mean += f" [{_f(test.low, 3, True)}, {_f(test.high, 3, True)}]"
        lines.append(
            f"| `{entry['data']}` | {entry['label']} | "
            f"{', '.join(_f(v, 3, True) for v in entry['differences'])} | {mean} | "
            f"{_p(entry['p'])} | {_p(entry['p_holm'])} |"
        )
    return "\n".join(lines)


def _ks(rows: Sequence[Mapping[str, Any]], shown: bool) -> list[int]:
    return [
        row["k"]
        for row in rows
        if (row["p_holm"] is not None and row["p_holm"] < SHOWN_AT) == shown
    ]


def memory_control_family(runs: Sequence[StudyRun]) -> list[str]:
    """The b - c claim under a stricter family: per rollouts, Holm over every b - c test of
    the seeds table (both arms, both scores, every k) instead of over k alone, since the
    sampled test was added after the greedy one was read; and how many runs have b - c > 0
    with the per-run interval above zero at every k and score (the per-run tables)."""
    quantity = "agent_minus_control"
    lines = []
    for key, rollouts in ROLLOUTS.items():
        tests = [
            (arm, name, row)
            for arm, table in memory_increments(runs, key).items()
            for name, rows in table.items()
            if name.startswith(quantity)
            for row in rows
        ]
        if not tests:
            continue
        adjusted = holm_adjust([row["p"] for _, _, row in tests])
        shown = sorted(
            {
                f"`{arm}` {INCREMENT_SCORES[name[len(quantity) :]]} k = {row['k']}"
                for (arm, name, row), p in zip(tests, adjusted, strict=True)
                if p is not None and p < SHOWN_AT
            }
        )
        smallest = min((p for p in adjusted if p is not None), default=None)
        tested = [run.result for run in runs if incremental_ks(run.result, key)]
        names = [f"{quantity}{suffix}" for suffix in INCREMENT_SCORES]
        above = 0
        for result in tested:
            estimates = [
                result.get(increment_metric(result, key, k, name))
                for k in incremental_ks(result, key)
                for name in names
            ]
            above += all(e is not None and e.low is not None and e.low > 0.0 for e in estimates)
        verdict = f"shown at {', '.join(shown)}" if shown else "not shown at any k"
        lines.append(
            f"- {rollouts} rollouts, b - c with Holm over all {len(tests)} b - c tests of the "
            f"seeds table (both arms, both scores, every k; the stricter family): {verdict} "
            f"(smallest Holm p {_p(smallest)}). Runs whose per-run b - c interval is above "
            f"zero at every k and score: {above} of {len(tested)}."
        )
    return lines


def memory_not_shown(runs: Sequence[StudyRun]) -> str:
    """ "What the evidence does not show", computed from the tables above: for each arm and
    score, the k where an increment beyond the window (b - a) or beyond the untrained
    module's (b - c) is not shown (Holm p >= SHOWN_AT, or untestable), the return above the
    best stack-3 found, and the arm differences on shared data."""
    if (empty := _empty(runs)) is not None:
        return "Nothing at the memory point is shown yet. " + empty
    one_point(runs)
    what = {
        "agent_increment": "an increment of the agent's representation beyond the k-step window",
        "agent_minus_control": "an increment beyond the untrained module's on the same window",
    }
    lines = [f"Computed from the tables above (shown: Holm p < {SHOWN_AT}):", ""]
    for key, rollouts in ROLLOUTS.items():
        for arm, table in memory_increments(runs, key).items():
            for name, rows in table.items():
                quantity = next(q for q in INCREMENT_QUANTITIES if name.startswith(q))
                score = INCREMENT_SCORES[name[len(quantity) :]]
                not_shown, shown = _ks(rows, False), _ks(rows, True)
                n = max((row["n"] for row in rows), default=0)
                text = f"- `{arm}`, {score}, {rollouts} rollouts ({n} seeds): {what[quantity]} is "
                if not rows or n == 0:
                    text += f"not shown: no run has the test on its {rollouts} rollouts"
                elif not_shown:
                    text += f"not shown at k = {', '.join(map(str, not_shown))}"
                    text += f"; shown at k = {', '.join(map(str, shown))}" if shown else ""
                else:
                    text += f"shown at every k ({', '.join(map(str, shown))})"
                lines.append(text + ".")
    lines += memory_control_family(runs)
    values = point_solver_values(runs)
    for (arm, policy), entry in stack3_gap_tests(runs, values).items():
        p_holm = entry["p_holm"]
        verdict = "shown" if p_holm is not None and p_holm < SHOWN_AT else "not shown"
        lines.append(
            f"- `{arm}`, {policy} policy: a return above the best stack-3 table found is "
            f"{verdict} ({len(entry['gaps'])} seeds; Holm p {_p(p_holm)}, the returns table)."
        )
    for entry in memory_arm_tests(runs):
        shown = entry["p_holm"] is not None and entry["p_holm"] < SHOWN_AT
        lines.append(
            f"- the arms' difference in {entry['label']} on `{entry['data']}` is "
            f"{'shown' if shown else 'not shown'} (Holm p {_p(entry['p_holm'])})."
        )
    return "\n".join(lines)


# ------------------------------------------- retrains of the six runs (issue 52 item 1)
# The six ORIGINAL_INIT_RUNS' checkpoints are gone and they do not rebuild to the bit on this
# machine (README, "memory beyond a window"). Their seeds are retrained here with the same
# command, library commit (d2c7c58) and threads (OMP_NUM_THREADS=1); each retrain's in-run
# analysis (d2c7c58's, without the incremental test) was stopped by SIGTERM once training
# completed, and the current analysis ran on its checkpoints (`rl-harness analyze`). Keyed
# by arm; a retrain names its committed run by (arm, seed).
NO_RETRAINS = "No retrains yet: `report.RETRAINED_RUNS` is empty."
RETRAINED_RUNS: dict[str, tuple[str, ...]] = {
    "reward_only": (
        "20261207T173340Z-269b6776",
        "20261207T184413Z-22a73657",
        "20261207T201542Z-584b8fdb",
    ),
    "next_token_aux": (
        "20261207T181333Z-82061823",
        "20261207T185523Z-66303c5e",
        "20261207T201542Z-9f85e4f5",
    ),
}


def retrained_table(runs: Sequence[StudyRun], committed: Sequence[StudyRun]) -> str:
    """Each retrain beside the committed run of its arm and seed: greedy return per step,
    the agent's within-branch R², agent - untrained within branches (result.json),
    the first iteration's mean training return (both to 7 digits: where they part) and the
    library commit of the retrain's analysis."""
    if not runs:
        return NO_RETRAINS
    by = {(run.arm, run.seed): run for run in committed}
    lines = [
        "Each retrain (r) beside the committed run (c) of its arm and seed (result.json of "
        "each; the first iteration's mean training return from metrics.jsonl; analysis: the "
        "library commit `rl-harness analyze` ran the retrain's analysis at):",
        "",
        "| arm | seed | retrain | committed | first iteration's return, c / r | greedy return "
        "per step, c / r | within-branch R², c / r | agent - untrained, within, c / r "
        "| analysis |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        original = by.get((run.arm, run.seed))
        if original is None:
            raise ValueError(f"retrain {run.run_id}: no committed {run.arm} run of seed {run.seed}")
        cells = []
        for name in ("return_per_step/greedy", "probe_r2_within_branch"):
            digits = 4 if name.startswith("return") else 3
            cells.append(
                f"{_f(original.result.value(name), digits)} / {_f(run.result.value(name), digits)}"
            )
        gains = " / ".join(
            _f(r.result.value("agent_minus_untrained_within_branch"), 3, True)
            for r in (original, run)
        )
        first = " / ".join(_f(r.first_return, 7) for r in (original, run))
        commit = str((run.analysis_rerun or {}).get("analysis_library_commit") or "?")[:7]
        lines.append(
            f"| {run.arm} | {run.seed} | `{run.run_id}` | `{original.run_id}` | {first} | "
            f"{cells[0]} | {cells[1]} | {gains} | `{commit}` |"
        )
    return "\n".join(lines)


def retrained_blocks(runs: Sequence[StudyRun], committed: Sequence[StudyRun]) -> dict[str, str]:
    """The retrains' tables: beside their committed runs, then the incremental test on their
    greedy and sampled rollouts (per run, and across seeds per arm)."""
    if one_point(runs) not in (None, "flagship"):
        raise ValueError("the retrains are flagship runs")
    tables = {"retrained_runs": retrained_table(runs, committed)}
    for key, name in ((INCREMENTAL_KEY, ""), (INCREMENTAL_SAMPLED_KEY, "_sampled")):
        tables[f"retrained_incremental{name}_runs"] = (
            memory_incremental_runs_table(runs, key) if runs else NO_RETRAINS
        )
        tables[f"retrained_incremental{name}_seeds"] = (
            memory_incremental_seeds_table(runs, key) if runs else NO_RETRAINS
        )
    return tables


# ------------------------------------------ more seeds per arm (issue 53 item 4)
# Seeds 3 and up of each arm, made exactly as the retrains: trained at d2c7c58 with one torch
# thread, the in-run analysis stopped once training completed, the current analysis run on
# the checkpoints (`rl-harness analyze`). With the retrains they form one pool per arm: one
# training commit and one analysis commit, so every seed is the same experiment.
NO_ADDED_SEEDS = "No added seeds yet: `report.ADDED_SEED_RUNS` is empty."
ADDED_SEED_RUNS: dict[str, tuple[str, ...]] = {
    "reward_only": (
        "20261207T230833Z-51461a14",
        "20261207T235020Z-ecb44d72",
        "20261208T015414Z-6df5b35f",
        "20261208T023309Z-20ea7ff6",
    ),
    "next_token_aux": (
        "20261207T230834Z-7c35cf35",
        "20261207T235020Z-5296bbd3",
        "20261208T015414Z-e48e01ad",
        "20261208T023343Z-c1e3f3ee",
    ),
}
# The pooled seeds' tables: the flagship's per-seed and across-seed tables (TABLES) on every
# pooled run, then the incremental test across seeds.
POOLED_TABLES = (
    "runs",
    "seeds",
    "controls_by_data",
    "controls_holm",
    "power",
    "arms",
    "interventions",
)


def _one_code(runs: Sequence[StudyRun]) -> None:
    """ValueError unless every run trained at one library commit and was analysed at one."""
    trained = {run.library_commit for run in runs}
    analysed = {str((run.analysis_rerun or {}).get("analysis_library_commit")) for run in runs}
    if len(trained) != 1 or len(analysed) != 1:
        raise ValueError(
            f"pooled seeds must share one training and one analysis commit, got training "
            f"{sorted(map(str, trained))} and analysis {sorted(analysed)}"
        )


def added_seed_blocks(retrained: Sequence[StudyRun], added: Sequence[StudyRun]) -> dict[str, str]:
    """The added seeds' own incremental tables (greedy and sampled rollouts), and the pool of
    retrains and added seeds read together (POOLED_TABLES and the incremental test across
    seeds). A pooled seed of an arm that is also a retrain's is refused (one run per seed)."""
    names = [f"added_incremental{name}_runs" for name in ("", "_sampled")]
    names += [f"pooled_{name}" for name in POOLED_TABLES]
    names += [f"pooled_incremental{name}_seeds" for name in ("", "_sampled")]
    if not added:
        return dict.fromkeys(names, NO_ADDED_SEEDS)
    pool = [*retrained, *added]
    if one_point(pool) not in (None, "flagship"):
        raise ValueError("the added seeds are flagship runs")
    seen = [(run.arm, run.seed) for run in pool]
    if len(set(seen)) != len(seen):
        raise ValueError(f"a seed is pooled twice: {sorted(seen)}")
    _one_code(pool)
    arms = _arms(pool)
    pool.sort(key=lambda run: (arms.index(run.arm), run.seed))  # each arm's seeds in order
    tables = {
        "added_incremental_runs": memory_incremental_runs_table(added, INCREMENTAL_KEY),
        "added_incremental_sampled_runs": memory_incremental_runs_table(
            added, INCREMENTAL_SAMPLED_KEY
        ),
    }
    tables |= {f"pooled_{name}": TABLES[name](pool) for name in POOLED_TABLES}
    for key, name in ((INCREMENTAL_KEY, ""), (INCREMENTAL_SAMPLED_KEY, "_sampled")):
        tables[f"pooled_incremental{name}_seeds"] = memory_incremental_seeds_table(pool, key)
    return tables


# ------------------------------------------- is the incremental test's window converged?
NO_WINDOW_CAPACITY = (
    "No window-capacity check yet: no pooled run has `window_capacity.json` "
    "(`rl-harness analyze LEAF RUN --stage window_capacity`)."
)
CAPACITY_SCORES = {"global": None, "within tokens_2": "tokens_2"}
WINDOW_CAPACITY_FILE = "window_capacity.json"  # window_capacity.FILE (not imported: no torch)


def _capacity_estimate(block: Mapping[str, Any], branching: str | None) -> Mapping[str, Any]:
    if branching is None:
        return block.get("r2_pooled") or {}
    return (block.get("within_branch") or {}).get(branching) or {}


def _capacity_interval(estimate: Mapping[str, Any]) -> str:
    return "-" if estimate.get("value") is None else _bracket(estimate, 4)


def window_capacity_table(runs: Sequence[StudyRun], root: Path = STUDY_DIR) -> str:
    """Per run with a window_capacity.json (window_capacity.py), per k, score and window MLP:
    R²(a), b - a and b - c with their 95% paired intervals and Holm p over the check's k, on
    the run's sampled rollouts; above it, how the recorded MLP's rows match the run's own
    incremental_r2_sampled record."""
    files = {
        run.run_id: root / run.arm / "results" / run.run_id / WINDOW_CAPACITY_FILE for run in runs
    }
    checked = [(run, _read(files[run.run_id])) for run in runs if files[run.run_id].is_file()]
    if not checked:
        return NO_WINDOW_CAPACITY
    matches = [value for _, record in checked for value in record["recorded_matches"].values()]
    largest = max((value for value in matches if value is not None), default=None)
    regressors = checked[0][1]["regressors"]
    described = ", ".join(
        f"{block['name']} {'x'.join(map(str, block['regressor']['hidden']))}, "
        f"{block['regressor']['epochs']} epochs"
        for block in regressors
    )
    match = "-" if largest is None else f"{largest:.1e}"
    lines = [
        f"Window MLPs: {described}. The recorded MLP's R²(a), (b), (c) repeat each run's own "
        f"`incremental_r2_sampled` record at the same k to within {match} relative (the same "
        "test on the same episodes). Sampled rollouts; p: one-sided bootstrap, Holm over the "
        "check's k within each MLP.",
        "",
        "| arm | seed | k | score | MLP | R²(a) | b - a [95%] | p (Holm over k) | b - c [95%] "
        "| p (Holm over k) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run, record in checked:
        for index, k in enumerate(record["ks"]):
            for score, branching in CAPACITY_SCORES.items():
                key = "global" if branching is None else branching
                for block in record["regressors"]:
                    name, table = block["name"], block["table"]
                    row, holm = table["rows"][index], table["p_values_holm"]
                    at = {
                        part: _capacity_estimate(row[part], branching)
                        for part in ("window", "agent_increment", "agent_minus_control")
                    }
                    lines.append(
                        f"| {run.arm} | {run.seed} | {k} | {score} | {name} | "
                        f"{_f(at['window'].get('value'), 4)} | "
                        f"{_capacity_interval(at['agent_increment'])} | "
                        f"{_p(holm['agent_increment'][key][index])} | "
                        f"{_capacity_interval(at['agent_minus_control'])} | "
                        f"{_p(holm['agent_minus_control'][key][index])} |"
                    )
    return "\n".join(lines)


# ------------------------------------------------------- the FULL budget (issue 53 item 3)
# The original study's 10M env steps (spec.FULL), trained on CPU with nothing else running.
NO_FULL_RUNS = "No FULL run yet: `report.FULL_RUNS` is empty."
FULL_RUNS: dict[str, tuple[str, ...]] = {"reward_only": ("20261207T205742Z-ee54bd56",)}


def full_blocks(runs: Sequence[StudyRun]) -> dict[str, str]:
    """The FULL runs' tables: the run table (training minutes and env steps/s included), the
    incremental test on greedy and sampled rollouts, and the original's figures at every
    matched checkpoint up to its end."""
    if not runs:
        names = ("runs", "incremental_runs", "incremental_sampled_runs", "original_figures")
        return {f"full_{name}": NO_FULL_RUNS for name in names}
    if one_point(runs) not in (None, "flagship"):
        raise ValueError("the FULL runs are flagship runs")
    budgets = {run.budget for run in runs}
    if budgets != {"full"}:
        raise ValueError(f"report.FULL_RUNS holds runs of budgets {budgets}, not only full")
    return {
        "full_runs": runs_table(runs),
        "full_incremental_runs": memory_incremental_runs_table(runs, INCREMENTAL_KEY),
        "full_incremental_sampled_runs": memory_incremental_runs_table(
            runs, INCREMENTAL_SAMPLED_KEY
        ),
        "full_original_figures": original_table(runs, runs_name="FULL_RUNS"),
    }


MEMORY_TABLES: dict[str, Callable[[Sequence[StudyRun]], str]] = {
    "memory_returns": memory_returns_table,
    "memory_incremental_runs": memory_incremental_runs_table,
    "memory_incremental_seeds": memory_incremental_seeds_table,
    "memory_incremental_sampled_runs": functools.partial(
        memory_incremental_runs_table, key=INCREMENTAL_SAMPLED_KEY
    ),
    "memory_incremental_sampled_seeds": functools.partial(
        memory_incremental_seeds_table, key=INCREMENTAL_SAMPLED_KEY
    ),
    "memory_arms": memory_arms_table,
    "memory_not_shown": memory_not_shown,
}

TABLES: dict[str, Callable[[Sequence[StudyRun]], str]] = {
    "runs": runs_table,
    "seeds": seeds_table,
    "controls_by_data": controls_by_data_table,
    "yardstick_runs": yardstick_runs_table,
    "interventions": interventions_table,
    "controls_holm": controls_table,
    "power": power_table,
    "arms": arms_table,
    "yardstick_worth": yardstick_table,
}


def blocks(runs: Sequence[StudyRun]) -> dict[str, str]:
    """The flagship's tables (its runs all at the flagship point) and the original's beside."""
    if one_point(runs) not in (None, "flagship"):
        raise ValueError(f"the flagship tables read flagship runs only, not {one_point(runs)!r}")
    return {name: table(runs) for name, table in TABLES.items()} | {
        "original_figures": original_table(runs)
    }


def earlier_blocks(runs: Sequence[StudyRun]) -> dict[str, str]:
    """The earlier runs' tables (`EARLIER_RUNS`: default init and RLlib's KL term), kept for
    the record; their records have no action branches and no controls on other data."""
    return {
        "earlier_solvers": solver_table(runs),
        "earlier_runs": runs_table(runs, actions=False),
        "earlier_seeds": seeds_table(runs),
    }


def memory_blocks(runs: Sequence[StudyRun]) -> dict[str, str]:
    """The memory point's tables (its runs all at one point, read against that point's
    solver values)."""
    if one_point(runs) not in (None, "memory"):
        raise ValueError(f"the memory-point tables read memory runs only, not {one_point(runs)!r}")
    tables = {name: table(runs) for name, table in MEMORY_TABLES.items()}
    reruns = [run for run in runs if run.analysis_rerun is not None]
    if reruns:
        named = "; ".join(
            f"`{run.run_id}` ({run.arm}, seed {run.seed}): library "
            f"`{str(run.analysis_rerun.get('analysis_library_commit', '?'))[:7]}`"
            for run in reruns
        )
        files = " / ".join(sorted({str(run.analysis_rerun["file"]) for run in reruns}))
        tables["memory_returns"] += (
            "\n\nAnalysis rerun on the recorded checkpoints after the in-run analysis failed "
            f"(the run's manifest says failed; {files} says why): {named}."
        )
    return tables


def confirmatory_block(runs: Sequence[StudyRun]) -> str:
    """The registered confirmatory test (confirmatory.PLAN) on its runs."""
    return confirmatory.block([(run.arm, run.seed, run.result) for run in runs])


def pooled_blocks(retrained: Sequence[StudyRun], added: Sequence[StudyRun]) -> dict[str, str]:
    """The pool's blocks: `added_seed_blocks` and the window-capacity table, from one load."""
    return added_seed_blocks(retrained, added) | {
        "window_capacity": window_capacity_table([*retrained, *added])
    }


def main(argv: Sequence[str] | None = None) -> int:
    """`--write` rewrites the README's generated tables; `--check` exits 1 when they differ."""
    return readme_main(
        README,
        lambda: (
            blocks(load_runs(ORIGINAL_INIT_RUNS))
            | earlier_blocks(load_runs(EARLIER_RUNS))
            | memory_blocks(load_runs(MEMORY_RUNS))
            | {"memory_confirmatory": confirmatory_block(load_runs(confirmatory.RUNS))}
            | retrained_blocks(load_runs(RETRAINED_RUNS), load_runs(ORIGINAL_INIT_RUNS))
            | full_blocks(load_runs(FULL_RUNS))
            | pooled_blocks(load_runs(RETRAINED_RUNS), load_runs(ADDED_SEED_RUNS))
        ),
        prog="python -m experiments.mess3_belief_geometry.report",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
