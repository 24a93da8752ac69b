"""The token-guess study's memory yardstick (issue 37 item 3), fast: the m-token filter on
the probe rollouts is the exact belief once its window reaches the reset and the filter of
the newest token at m = 1; the agent's score in yardstick.json is the analysis' own probe of
the post-final-norm residual; a run without a checkpoint still gets everything that needs no
agent, its recorded within-branch R² read on the filters' scale; the synthesis table."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from experiments.mess3_token_guess import shared
from experiments.mess3_token_guess import yardstick as ys
from experiments.mess3_token_guess.ppo import experiment as ppo
from experiments.mess3_token_guess.synthesis import experiment as synthesis

from rl_harness.envs.hmm import filter_beliefs

SEED = 5
PLAN = SimpleNamespace(probe_episodes=8, warmup_steps=16, probe_steps=32, n_bootstrap=20)


def _module(seed: int):
    env = shared._probe_env(1)
    spec = ppo.module_spec()
    spec.observation_space, spec.action_space = (
        env.single_observation_space,
        env.single_action_space,
    )
    env.close()
    torch.manual_seed(seed)
    return spec.build()


@pytest.fixture(scope="module")
def rollouts():
    return shared._collector(PLAN, SEED)(_module(1))


def test_filters_of_the_last_m_tokens_on_the_probe_rollouts(rollouts):
    steps = PLAN.warmup_steps + PLAN.probe_steps
    beliefs = ys.token_beliefs(rollouts, [1, 3, steps])
    np.testing.assert_allclose(beliefs[steps], rollouts.targets, atol=1e-12)
    # m = 1: the belief after the newest token alone, from the stationary law.
    newest = rollouts.observations[..., : shared.N_TOKENS].argmax(-1)
    alone = filter_beliefs(shared.model(), newest.reshape(-1, 1))[:, -1]
    np.testing.assert_allclose(beliefs[1].reshape(-1, 3), alone, atol=1e-12)
    assert np.abs(beliefs[3] - rollouts.targets).max() > 1e-2


def test_the_agent_score_is_the_analysis_probe(rollouts):
    module = _module(2)
    replayed = shared._collector(PLAN, SEED)(module)
    names = shared.residual_names(module)
    width = replayed.representations.shape[-1] // len(names)
    column = names.index(shared.REPRESENTATION)
    analysis_features = replayed.representations[..., column * width : (column + 1) * width]
    np.testing.assert_allclose(
        ys.final_norm(module, replayed.observations), analysis_features, atol=1e-5
    )
    analysis = shared._probe(analysis_features, replayed, PLAN, SEED).report
    record = ys.measure(
        None,
        plan=PLAN,
        seed=SEED,
        label="ppo",
        module=module,
        rollouts=replayed,
        say=lambda m: None,
    )
    assert record["agent"]["r2_within_branch"] == pytest.approx(
        analysis.within_branch.r2_pooled.value, abs=1e-6
    )
    assert record["untrained"]["r2_within_branch"]["n"] == ys.UNTRAINED_SEEDS
    assert record["untrained"]["model_config"] == dict(module.model_config)
    assert set(record["mlp_r2_within_branch"]) == {"agent", "raw_window"}
    assert set(record["filters_r2_within_branch"]) == {f"m{m}" for m in range(1, ys.M_MAX + 1)}
    assert record["raw_window_affine"]["r2_within_branch"] == pytest.approx(
        shared._probe(
            replayed.observations, replayed, PLAN, SEED
        ).report.within_branch.r2_pooled.value
    )


def test_a_run_without_checkpoint_gets_the_agent_free_part(rollouts, tmp_path):
    record = ys.measure(
        tmp_path,
        plan=PLAN,
        seed=SEED,
        label="ppo",
        module=None,
        rollouts=rollouts,
        recorded_within=0.9,
        say=lambda m: None,
    )
    written = json.loads((tmp_path / ys.YARDSTICK_FILE).read_text())
    assert written["agent"]["r2_within_branch"] == 0.9
    assert written["reference"].startswith("raw_window")
    assert "skipped" in written["untrained"] and set(written["mlp_r2_within_branch"]) == {
        "raw_window"
    }
    filters = {int(k[1:]): v for k, v in record["filters_r2_within_branch"].items()}
    reach = record["equivalent_memory"]["reaches_agent_at_m"]
    assert reach is None or (
        filters[reach] >= 0.9 and all(filters[m] < 0.9 for m in filters if m < reach)
    )
    table = synthesis.yardstick_markdown(
        [
            {"arm": "ppo [a]", "leaf": "ppo", "seed": SEED, "run": "run-1", "record": written},
            {
                "arm": "supervised [a]",
                "leaf": "supervised",
                "seed": SEED,
                "run": "run-2",
                "record": None,
            },
        ]
    )
    assert "| ppo [a] | 5 | 0.900 |" in table
    assert (
        "missing: `rl-harness analyze experiments.mess3_token_guess.supervised.experiment run-2`"
        in table
    )
    widths = " / ".join(
        f"{written['random_features_r2_within_branch'][f'width{w}']:.3f}" for w in ys.RANDOM_WIDTHS
    )
    assert widths in table
