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

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    result: Mapping[str, Any]
    interventions: Mapping[str, Any] | None
    yardstick: Mapping[str, Any] | None


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_run(folder: Path) -> StudyRun:
    """One completed run's records (`<study>/<arm>/results/<run-id>`); else an error."""
    manifest = _read(folder / "run_manifest.json")
    if manifest is None or manifest.get("status") != "completed":
        raise FileNotFoundError(f"{folder}: no completed run_manifest.json")
    return StudyRun(
        arm=folder.parent.parent.name,
        seed=int(manifest["seed"]),
        run_id=folder.name,
        result=_read(folder / "result.json"),
        interventions=_read(folder / "interventions.json"),
        yardstick=_read(folder / "yardstick.json"),
    )


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


def _controls(run: StudyRun, data: str) -> Mapping[str, Any]:
    return run.result["controls_by_data"][data]


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
                text, p = _interval([_controls(run, data)[key] for run in arm_runs])
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
                _controls(run, data)["agent_minus_untrained_within_branch"] for run in arm_runs
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
        arm: [r.result["return_per_step"]["greedy"] for r in runs if r.arm == arm]
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
            arm: {r.seed: _controls(r, data)[key] for r in runs if r.arm == arm}
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


TABLES: dict[str, Callable[[Sequence[StudyRun]], str]] = {
    "interventions": interventions_table,
    "controls_holm": controls_table,
    "power": power_table,
    "arms": arms_table,
    "yardstick_worth": yardstick_table,
}


def blocks(runs: Sequence[StudyRun]) -> dict[str, str]:
    return {name: table(runs) for name, table in TABLES.items()}


def main(argv: Sequence[str] | None = None) -> int:
    """`--write` rewrites the README's generated tables; `--check` exits 1 when they differ."""
    return readme_main(
        README,
        lambda: blocks(load_runs(ORIGINAL_INIT_RUNS)),
        prog="python -m experiments.mess3_belief_geometry.report",
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
