"""The memory yardstick of a token-guess run (issue 37 item 3): every within-branch R² read as
"about m tokens of memory", beside baselines that need no training.

On the run's own probe episodes (the process is passive and the episodes seeded, so they are
the ones every checkpoint saw), with the agent probe's split, branches (equal last BRANCH_K
tokens) and bootstrap resamples (`rl_harness.analysis.memory_yardstick`; the definitions:
the library's docs/memory_yardstick.md):

- exact filters of only the last m tokens, m = 1..M_MAX, from the stationary law (MESS3's
  start law), each read by the agent's affine probe: R², within-branch R², the agent minus
  each (paired), and the m the agent's within-branch R² is worth (`equivalent_memory`);
- the share of the belief's variance that lies within the branches;
- untrained random ReLU features of the agent's whole input (the 10-token one-hot window),
  widths RANDOM_WIDTHS, stream ("study", "yardstick", "random_features", "width<w>");
- UNTRAINED_SEEDS untrained modules of the run's own architecture and model config
  (initialisation scheme included), seeds from ("study", "yardstick", "untrained", "<i>"):
  mean and range of their within-branch R² (the run's step-0 checkpoint is one more draw);
- the flagship's window MLP (`WindowRegressor`'s defaults) on the agent's post-final-norm
  residual and on the raw window: the nonlinear reading, like for like.

Writes `yardstick.json` (schema YARDSTICK_SCHEMA_VERSION) into the run's results folder. For
a finished run, the leaf's `analysis` stage (the whole in-run analysis, this included, on
its recorded checkpoints):

    uv run rl-harness analyze experiments.mess3_token_guess.<leaf>.experiment [RUN...]
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModule

from experiments.mess3_token_guess import shared
from rl_harness import write_json
from rl_harness.analysis import (
    Rollouts,
    branch_ids,
    equivalent_m,
    memory_yardstick,
    mlp_probe,
    random_feature_probe,
    spread,
    untrained_like,
    within_branch_variance_fraction,
)
from rl_harness.envs.hmm import window_beliefs
from rl_harness.seeding import stream_seed

YARDSTICK_FILE = "yardstick.json"
YARDSTICK_SCHEMA_VERSION = 1
M_MAX = 6  # filters of the last 1..6 tokens (m = 5 already reaches 0.98 within branches)
RANDOM_WIDTHS = (64, 256, 1024)  # 64 = the agent's d_model; wider is more generous
# The random features' affine probe: the agent's PROBE_RIDGE (1e-6) leaves a 1024-wide fit
# ill-conditioned (rank 1020 of 1024 on 12,288 train steps): token guess, seed 2, width 1024,
# held-out within-branch R² 0.307 at 1e-6 against 0.840 at 1e-3 and 0.841 at 0.1 and 1, with
# the same train R² (0.992). 1e-3 is negligible shrinkage for features of scale 1.
RANDOM_FEATURE_RIDGE = 1e-3
UNTRAINED_SEEDS = 5
BRANCHING = "tokens_2"  # the name of the branching (equal last BRANCH_K tokens) in the record
STREAM = ("study", "yardstick")

COMPETING = {
    "filters": "The agent's within-branch R² could reflect only a few tokens of exact "
    "filtering: the m-step filters say how many tokens of perfect memory the same probe needs "
    "to reach it. For m <= the branch length the filter is constant within a branch (about 0 "
    "there by construction).",
    "variance_share": "Within-branch R² is about a small share of the belief's variance "
    "(within_branch_variance_fraction); global R² is mostly the newest tokens.",
    "random_features": "A wide untrained nonlinear map of the same input, read by the same "
    "affine probe, could already give the number: training is shown only by the excess over it.",
    "untrained": "One untrained draw could be lucky or unlucky: several initialisations of "
    "the run's own architecture and config give the spread.",
    "mlp": "The affine probe could understate what the representation holds: the agent read "
    "by the windows' MLP, beside the same MLP on the raw window (the input holds the whole "
    "10-token window, so the raw-window MLP is bounded by the 10-token filter). At its "
    "defaults (20 epochs of 2,048-step batches: about 120 Adam steps at the CPU budget) the MLP "
    "may underfit: a raw-window MLP below the width-1024 random features says it does.",
}


def token_beliefs(rollouts: Rollouts, ms: Sequence[int]) -> dict[int, np.ndarray]:
    """{m: (E, T, 3)} beliefs of the exact filter of the last m tokens at each recorded step,
    from the stationary law: the newest token of each observation (warm-up included; the
    reset observation holds none, a step that updates nothing)."""
    hmm = shared.model()
    observations = rollouts.observations
    if rollouts.warmup_observations is not None:
        observations = np.concatenate([rollouts.warmup_observations, observations], axis=1)
    newest = observations[..., : shared.N_TOKENS].astype(np.float64)  # newest first: lag 0
    present = newest.sum(-1) > 0
    matrices = np.where(
        present[..., None, None],
        hmm.token_matrices[newest.argmax(-1)],
        np.eye(hmm.n_states),
    )
    first = observations.shape[1] - rollouts.episode_steps
    return {m: window_beliefs(matrices, hmm.initial, m)[:, first:] for m in ms}


def final_norm(module: RLModule, observations: np.ndarray, batch: int = 4096) -> np.ndarray:
    """(E, T, d_model): the post-final-norm residual at the newest position for each
    observation (the module reads only its window, so steps are independent)."""
    flat = torch.as_tensor(observations.reshape(-1, observations.shape[-1]), dtype=torch.float32)
    parts = []
    with torch.inference_mode():
        for start in range(0, flat.shape[0], batch):
            residuals, _ = module.encode_step_residuals({"obs": flat[start : start + batch]})
            parts.append(residuals[shared.REPRESENTATION].double().numpy())
    return np.concatenate(parts).reshape(*observations.shape[:2], -1)


def _within(row: Any) -> float | None:
    value = row.scores.within_branch.get(BRANCHING)
    return None if value is None else value.value


def _r2(row: Any) -> float | None:
    return None if row.scores.r2_pooled is None else row.scores.r2_pooled.value


def measure(
    results_dir: Path | None,
    *,
    plan: Any,
    seed: int,
    label: str,
    module: RLModule | None,
    rollouts: Rollouts | None = None,
    recorded_within: float | None = None,
    say: Any = print,
) -> dict[str, Any]:
    """The yardstick record of a run with this seed and probe budget; `module` the trained
    agent (None: only what needs no agent, and `recorded_within`, the run's recorded final
    within-branch R² on these episodes and split, stands in for the agent's point value).
    Writes yardstick.json into `results_dir` unless it is None. `rollouts`: the run's probe
    rollouts when the caller has them."""
    started = time.perf_counter()
    if rollouts is None:
        driver = module
        if driver is None:  # the episodes do not depend on the policy: any module drives them
            from experiments.mess3_token_guess.ppo import experiment as ppo

            env = shared._probe_env(1)
            spec = ppo.module_spec()
            spec.observation_space = env.single_observation_space
            spec.action_space = env.single_action_space
            env.close()
            driver = spec.build()
        say(f"probe rollouts ({plan.probe_episodes} episodes)")
        rollouts = shared._collector(plan, seed)(driver)
    targets = rollouts.targets
    tokens = rollouts.observations[..., : shared.N_TOKENS]
    branchings = {BRANCHING: branch_ids(tokens, shared.BRANCH_K)}

    def probe(features: np.ndarray) -> Any:
        return shared._probe(features, rollouts, plan, seed)

    window = probe(rollouts.observations)
    residual = final_norm(module, rollouts.observations) if module is not None else None
    agent = probe(residual) if residual is not None else None
    reference = agent if agent is not None else window  # the split and resamples are the same
    say("filters of the last m tokens")
    beliefs = token_beliefs(rollouts, range(1, M_MAX + 1))
    table = memory_yardstick(
        reference,
        beliefs,
        targets,
        branchings=branchings,
        ridge=shared.PROBE_RIDGE,
        branch_k=shared.BRANCH_K,
    )
    say(f"random ReLU features (widths {RANDOM_WIDTHS})")
    random_rows = random_feature_probe(
        rollouts.observations,
        targets,
        reference,
        widths=RANDOM_WIDTHS,
        seed=seed,
        branchings=branchings,
        ridge=RANDOM_FEATURE_RIDGE,
        stream=(*STREAM, "random_features"),
    )
    say("MLP probes (the raw window, the agent)")
    mlps = {
        "raw_window": mlp_probe(
            rollouts.observations,
            targets,
            reference,
            seed=seed,
            name="raw_window",
            branchings=branchings,
            stream=(*STREAM, "mlp"),
        )
    }
    untrained: dict[str, Any] = {"skipped": "no trained module (no local final checkpoint)"}
    if module is not None:
        mlps["agent"] = mlp_probe(
            residual,
            targets,
            reference,
            seed=seed,
            name="agent",
            branchings=branchings,
            stream=(*STREAM, "mlp"),
        )
        say(f"{UNTRAINED_SEEDS} untrained initialisations")
        seeds = [stream_seed(seed, *STREAM, "untrained", str(i)) for i in range(UNTRAINED_SEEDS)]
        reports = [
            probe(final_norm(untrained_like(module, s), rollouts.observations)).report
            for s in seeds
        ]
        untrained = {
            "seeds": seeds,
            "stream": [*STREAM, "untrained", "<i>"],
            "model_config": dict(module.model_config or {}),
            "r2": spread([r.r2_pooled.value if r.r2_pooled else None for r in reports]),
            "r2_within_branch": spread(
                [
                    r.within_branch.r2_pooled.value
                    if r.within_branch and r.within_branch.r2_pooled
                    else None
                    for r in reports
                ]
            ),
        }
    test = reference.test_episodes
    filters = {f"m{row.details['m']}": row for row in table.rows}
    agent_within = (
        recorded_within if agent is None else agent.report.within_branch.r2_pooled.value  # type: ignore[union-attr]
    )
    # Filters of m <= BRANCH_K tokens are constant within a branch: m = BRANCH_K is the
    # no-memory anchor of the within-branch scale.
    reach, interpolated = equivalent_m(
        agent_within,
        {
            row.details["m"]: _within(row)
            for row in table.rows
            if row.details["m"] >= shared.BRANCH_K
        },
    )
    record = {
        "schema_version": YARDSTICK_SCHEMA_VERSION,
        "recipe": label,
        "seed": seed,
        "budget": dict(plan.__dict__),
        "reference": "agent" if agent is not None else "raw_window (no trained module)",
        "branching": f"{BRANCHING}: equal last {shared.BRANCH_K} tokens",
        "definitions": {
            "filters": f"exact Bayes filter of the last m tokens (m = 1..{M_MAX}) from the "
            "stationary law, affine probe to the exact belief on the agent's split "
            "(rl_harness.envs.hmm.window_beliefs, rl_harness.analysis.memory_yardstick)",
            "random_features": "ReLU(z W + c) of the 10-token one-hot window, z standardized on "
            "the train steps, W ~ N(0, 1/30), c ~ N(0, 1); affine probe with ridge "
            f"{RANDOM_FEATURE_RIDGE:g} (the agent's {shared.PROBE_RIDGE:g} is ill-conditioned "
            "at width 1024)",
            "untrained": "the run's module class and model config with fresh weights per seed; "
            "affine probe of the post-final-norm residual",
            "mlp": "the window baselines' MLP (WindowRegressor defaults) on the features",
        },
        "agent": {
            "r2": None if agent is None else agent.report.r2_pooled.value,
            "r2_within_branch": agent_within,
            "source": "this probe of the final checkpoint"
            if agent is not None
            else "probe_metrics.json's final checkpoint (the same episodes and split)",
        },
        "equivalent_memory": {"reaches_agent_at_m": reach, "interpolated_m": interpolated},
        "within_branch_variance_fraction": {
            "all_steps": within_branch_variance_fraction(targets, branchings[BRANCHING]),
            "held_out": within_branch_variance_fraction(targets[test], branchings[BRANCHING][test]),
        },
        "filters_r2": {name: _r2(row) for name, row in filters.items()},
        "filters_r2_within_branch": {name: _within(row) for name, row in filters.items()},
        "random_features_r2_within_branch": {
            f"width{row.details['width']}": _within(row) for row in random_rows
        },
        "random_features_r2": {f"width{row.details['width']}": _r2(row) for row in random_rows},
        "untrained": untrained,
        "mlp_r2_within_branch": {name: _within(row) for name, row in mlps.items()},
        "mlp_r2": {name: _r2(row) for name, row in mlps.items()},
        "raw_window_affine": {
            "r2": window.report.r2_pooled.value,
            "r2_within_branch": window.report.within_branch.r2_pooled.value,  # type: ignore[union-attr]
        },
        "competing_explanations": COMPETING,
        "memory_yardstick": table.to_dict(),
        "random_features": [row.to_dict() for row in random_rows],
        "mlp": {name: row.to_dict() for name, row in mlps.items()},
        "wall_time_s": round(time.perf_counter() - started, 3),
    }
    if results_dir is not None:
        write_json(Path(results_dir) / YARDSTICK_FILE, record)
        say(f"wrote {YARDSTICK_FILE} ({record['wall_time_s']:.0f} s)")
    return record


def headline(record: Mapping[str, Any]) -> dict[str, Any]:
    """What probe_metrics.json carries of yardstick.json (the file holds the rest)."""
    keys = (
        "equivalent_memory",
        "filters_r2_within_branch",
        "within_branch_variance_fraction",
        "random_features_r2_within_branch",
        "mlp_r2_within_branch",
    )
    untrained = record["untrained"].get("r2_within_branch")
    return (
        {"file": YARDSTICK_FILE}
        | {key: record[key] for key in keys}
        | {"untrained_r2_within_branch": untrained}
    )
