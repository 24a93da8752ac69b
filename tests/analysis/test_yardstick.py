"""The memory yardstick and its baselines on cases with known answers: the exact filter
beside short ones on MESS3 (the token-guess study's published m = 3, 4, 5 values), the
equivalent-memory reading, random ReLU features of a discrete input (R² 1) and of noise
(about 0), the MLP probe where the target is a nonlinear function of the features, the
within-branch variance share, and untrained modules of one spec from several seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rl_harness.analysis import (
    ProbeSettings,
    equivalent_m,
    evaluate_probe,
    memory_yardstick,
    mlp_probe,
    random_feature_probe,
    spread,
    untrained_like,
    within_branch_variance_fraction,
)
from rl_harness.analysis.probes import branch_ids
from rl_harness.analysis.windows import WindowRegressor
from rl_harness.envs.hmm import sampled_beliefs, window_beliefs
from rl_harness.envs.mess3 import PAPER_ALPHA, PAPER_X, mess3_model

WARMUP = 16


def mess3_steps(episodes: int, steps: int, seed: int):
    """Tokens (one-hot), exact beliefs and the step matrices of recorded MESS3 steps (after
    a warm-up), as the token-guess study records them."""
    model = mess3_model(PAPER_X, PAPER_ALPHA)
    tokens, beliefs = sampled_beliefs(model, episodes, WARMUP + steps, np.random.default_rng(seed))
    matrices = model.token_matrices[tokens]
    return model, np.eye(3)[tokens][:, WARMUP:], beliefs[:, 1:][:, WARMUP:], matrices


def test_mess3_yardstick_reproduces_the_published_values():
    """Measured from outside (DESIGN.md, facts for wave 4): within branches of equal last 2
    tokens, the filter of the last 3, 4, 5 tokens gets 0.784, 0.937, 0.984; 6.85% of the
    belief's variance lies within those branches. 256 episodes x 1008 steps here."""
    model, onehot, targets, matrices = mess3_steps(256, 1008, seed=0)
    labels = branch_ids(onehot, 2)
    # The agent here is the exact belief itself: R² 1, worth every m.
    agent = evaluate_probe(
        targets,
        targets,
        ProbeSettings(seed=0, n_bootstrap=50, branch_depth=2),
        branch_tokens=onehot,
    )
    beliefs = {m: window_beliefs(matrices, model.initial, m)[:, WARMUP:] for m in range(1, 7)}
    table = memory_yardstick(agent, beliefs, targets, branchings={"tokens_2": labels}, ridge=1e-6)
    within = {row.details["m"]: row.scores.within_branch["tokens_2"].value for row in table.rows}
    assert within[3] == pytest.approx(0.784, abs=0.01)
    assert within[4] == pytest.approx(0.937, abs=0.006)
    assert within[5] == pytest.approx(0.984, abs=0.003)
    assert within[6] > within[5] > within[4] > within[3]
    # m <= 2: the filter is constant within each branch, so it explains none of that variance.
    assert within[2] == pytest.approx(0.0, abs=0.01)
    fraction = within_branch_variance_fraction(targets, labels)
    assert fraction == pytest.approx(0.0685, abs=0.003)
    worth = table.equivalent_memory()["tokens_2"]
    assert worth["reaches_agent_at_m"] is None  # no short filter reaches the exact belief


def test_equivalent_memory_brackets_and_interpolates_the_agent():
    model, onehot, targets, matrices = mess3_steps(64, 256, seed=1)
    labels = {"tokens_2": branch_ids(onehot, 2)}
    beliefs = {m: window_beliefs(matrices, model.initial, m)[:, WARMUP:] for m in range(1, 7)}
    # An "agent" that is the filter of the last 4 tokens plus a little noise.
    noise = np.random.default_rng(2).normal(0, 0.01, size=targets.shape)
    agent = evaluate_probe(
        beliefs[4] + noise,
        targets,
        ProbeSettings(seed=0, n_bootstrap=100, ridge=1e-6, branch_depth=2),
        branch_tokens=onehot,
    )
    table = memory_yardstick(agent, beliefs, targets, branchings=labels, ridge=1e-6, branch_k=2)
    worth = table.equivalent_memory()["tokens_2"]
    assert worth["reaches_agent_at_m"] == 4
    assert 3.0 < worth["interpolated_m"] <= 4.0
    row4 = next(row for row in table.rows if row.details["m"] == 4)
    assert row4.agent_minus.within_branch["tokens_2"].value < 0  # the noise costs a little
    # The yardstick's agent score is the agent probe's own within-branch R².
    assert table.agent.within_branch["tokens_2"].value == pytest.approx(
        agent.report.within_branch.r2_pooled.value, abs=1e-12
    )
    record = table.to_dict()
    assert record["ms"] == [1, 2, 3, 4, 5, 6] and len(record["filters"]) == 6
    # Within branches of 2 tokens, filters of m <= 2 carry no memory: an agent below every
    # filter is worth at most m = 2 there, not an interpolation among m = 1, 2.
    weak = evaluate_probe(
        np.zeros_like(targets[..., :1]),
        targets,
        ProbeSettings(seed=0, n_bootstrap=20, branch_depth=2),
        branch_tokens=onehot,
    )
    weak_table = memory_yardstick(weak, beliefs, targets, branchings=labels, ridge=1e-6, branch_k=2)
    assert weak_table.equivalent_memory()["tokens_2"]["reaches_agent_at_m"] == 2
    assert weak_table.equivalent_memory()["tokens_2"]["interpolated_m"] is None


def discrete_inputs(episodes: int = 40, steps: int = 50, seed: int = 0):
    rng = np.random.default_rng(seed)
    symbols = rng.integers(0, 3, size=(episodes, steps))
    values = np.array([[0.2, 0.7], [0.9, 0.1], [0.4, 0.4]])  # any function of the symbol
    return np.eye(3)[symbols], values[symbols], symbols


def test_random_relu_features_of_a_discrete_input_read_any_function_of_it():
    inputs, targets, _ = discrete_inputs()
    agent = evaluate_probe(inputs, targets, ProbeSettings(seed=0, n_bootstrap=20))
    rows = random_feature_probe(inputs, targets, agent, widths=[8, 64], seed=3)
    for row in rows:
        assert row.scores.r2_pooled.value == pytest.approx(1.0, abs=1e-9)
    # Seeded from a named stream: the same seed gives the same features, another differs.
    again = random_feature_probe(inputs, targets, agent, widths=[8], seed=3)
    assert again[0].to_dict() == rows[0].to_dict()
    assert rows[0].details["stream"] == ["analysis", "yardstick", "width8"]


def test_random_features_of_noise_explain_nothing_held_out():
    inputs, _, _ = discrete_inputs(seed=1)
    noise = np.random.default_rng(4).normal(size=(40, 50, 2))
    agent = evaluate_probe(inputs, noise, ProbeSettings(seed=0, n_bootstrap=20))
    (row,) = random_feature_probe(inputs, noise, agent, widths=[64], seed=0)
    assert abs(row.scores.r2_pooled.value) < 0.02


def test_mlp_probe_reads_a_nonlinear_function_the_affine_probe_cannot():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, size=(40, 50, 1))
    y = np.concatenate([x**2, np.abs(x)], axis=-1)
    agent = evaluate_probe(x, y, ProbeSettings(seed=0, n_bootstrap=20))  # affine: about 0
    assert agent.report.r2_pooled.value < 0.05
    fast = WindowRegressor(hidden=(32, 32), epochs=40, batch_size=256)
    row = mlp_probe(x, y, agent, seed=0, name="agent_mlp", regressor=fast)
    assert row.scores.r2_pooled.value > 0.97
    assert row.agent_minus.r2_pooled.value < -0.9
    assert row.details["stream"] == ["analysis", "yardstick", "mlp", "agent_mlp"]


def test_within_branch_variance_fraction_by_hand():
    # Branch 0 holds 0 and 2 (mean 1), branch 1 holds 10 and 12 (mean 11); overall mean 6.
    targets = np.array([[[0.0], [2.0], [10.0], [12.0]]])
    labels = np.array([[0, 0, 1, 1]])
    total = 36 + 16 + 16 + 36
    assert within_branch_variance_fraction(targets, labels) == pytest.approx(4 / total)
    assert within_branch_variance_fraction(targets, np.zeros((1, 4))) == pytest.approx(1.0)
    assert within_branch_variance_fraction(targets, np.arange(4)[None]) == pytest.approx(0.0)


def test_untrained_like_builds_the_same_spec_with_seeded_weights():
    import gymnasium as gym
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rl_harness.learners.models import TransformerActorCritic

    spec = RLModuleSpec(
        module_class=TransformerActorCritic,
        observation_space=gym.spaces.Box(0, 1, (12,), np.float32),
        action_space=gym.spaces.Discrete(3),
        model_config={
            "context_len": 4,
            "feature_dim": 3,
            "d_model": 16,
            "num_layers": 1,
            "num_heads": 1,
        },
    )
    module = spec.build()
    first, again, other = (untrained_like(module, s) for s in (7, 7, 8))
    assert type(first) is TransformerActorCritic and first.model_config == module.model_config

    def flat(m):
        return torch.cat([p.detach().flatten() for p in m.parameters()])

    assert torch.equal(flat(first), flat(again))
    assert not torch.equal(flat(first), flat(other))
    state = torch.random.get_rng_state()
    untrained_like(module, 9)
    assert torch.equal(state, torch.random.get_rng_state())  # the global RNG is untouched


def test_spread_of_values():
    assert spread([0.5, None, 0.7]) == {
        "n": 2,
        "mean": pytest.approx(0.6),
        "min": 0.5,
        "max": 0.7,
        "values": [0.5, None, 0.7],
    }
    assert spread([None])["mean"] is None


def test_equivalent_m_by_hand():
    values = {1: -1.0, 2: 0.0, 3: 0.8, 4: 0.9, 5: 1.0}
    assert equivalent_m(0.85, values) == (4, pytest.approx(3.5))
    assert equivalent_m(0.8, values) == (3, pytest.approx(3.0))
    assert equivalent_m(-2.0, values) == (1, None)  # worth at most the smallest m
    assert equivalent_m(1.1, values) == (None, None)  # beyond the largest m
    assert equivalent_m(None, values) == (None, None)


@pytest.mark.parametrize("ridge", [0.0, 0.5])
def test_the_affine_baselines_are_fit_affines_fit(ridge):
    """`affine_test_predictions` (a QR of the train rows) predicts what `fit_affine` (the
    SVD) does, to float rounding: on random ReLU features with dead units (zero columns) and
    more width than the inputs' rank, at ridge 0 and above."""
    from rl_harness.analysis.probes import fit_affine
    from rl_harness.analysis.yardstick import affine_test_predictions, random_relu_features

    rng = np.random.default_rng(5)
    inputs = rng.integers(0, 2, size=(30, 20, 4)).astype(np.float64)
    targets = rng.dirichlet(np.ones(3), size=(30, 20))
    agent = evaluate_probe(targets, targets, ProbeSettings(seed=1, n_bootstrap=10))
    train, test = agent.train_episodes, agent.test_episodes
    features = random_relu_features(inputs, train, 64, rng)
    assert (features[train].reshape(-1, 64).std(axis=0) == 0).any()  # dead units
    probe = fit_affine(features[train].reshape(-1, 64), targets[train].reshape(-1, 3), ridge)
    expected = probe.predict(features[test].reshape(-1, 64)).reshape(len(test), 20, 3)
    got = affine_test_predictions(features, targets, agent, ridge)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-10)
