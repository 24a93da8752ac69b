"""The TorchRLModules outside an algorithm: outputs, state, encode, config errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import (
    TorchCategorical,
    TorchDiagGaussian,
)

from rl_harness.learners.models import (
    GRUActorCritic,
    MLPActorCritic,
    NextTokenAuxHeadMixin,
    StateAuxHeadMixin,
    TransformerActorCritic,
)

BOX4 = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
WINDOW = gym.spaces.Box(0.0, 1.0, (5, 3), np.float32)
ACT3 = gym.spaces.Discrete(3)


def _obs(space: gym.Space, *lead: int) -> torch.Tensor:
    samples = np.stack([space.sample() for _ in range(int(np.prod(lead)))])
    return torch.as_tensor(samples).reshape(*lead, *space.shape)


def test_mlp_outputs_values_and_encode():
    module = MLPActorCritic(observation_space=BOX4, action_space=ACT3, model_config={})
    batch = {Columns.OBS: _obs(BOX4, 7)}
    out = module.forward_train(batch)
    assert out[Columns.ACTION_DIST_INPUTS].shape == (7, 3)
    assert out[Columns.EMBEDDINGS].shape == (7, 64)  # default hidden_sizes [64, 64]
    torch.testing.assert_close(module.encode(batch), out[Columns.EMBEDDINGS])
    assert module.compute_values(batch).shape == (7,)
    assert not module.is_stateful()
    assert module.get_train_action_dist_cls() is TorchCategorical


def test_mlp_continuous_actions_and_discrete_observations():
    box_act = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    module = MLPActorCritic(
        observation_space=gym.spaces.Discrete(6),
        action_space=box_act,
        model_config={"hidden_sizes": [8]},
    )
    out = module.forward_exploration({Columns.OBS: torch.tensor([0, 5, 2])})
    assert out[Columns.ACTION_DIST_INPUTS].shape == (3, 4)  # means and log-stds
    assert module.get_exploration_action_dist_cls() is TorchDiagGaussian
    # One-hot input: different tokens give different representations.
    rep = module.encode({Columns.OBS: torch.tensor([0, 5])})
    assert not torch.allclose(rep[0], rep[1])


@pytest.mark.parametrize(
    ("model_config", "match"),
    [
        ({"hidden_sizes": "64"}, "'hidden_sizes'"),
        ({"hidden_sizes": []}, "'hidden_sizes'"),
        ({"activation": "sigmoid"}, "'activation'"),
        ({"head_hidden_sizes": [0]}, "'head_hidden_sizes'"),
    ],
)
def test_mlp_config_errors_name_the_key(model_config, match):
    with pytest.raises(ValueError, match=match):
        MLPActorCritic(observation_space=BOX4, action_space=ACT3, model_config=model_config)


def test_unsupported_action_space_is_explained():
    with pytest.raises(ValueError, match="unsupported action space"):
        MLPActorCritic(
            observation_space=BOX4,
            action_space=gym.spaces.MultiDiscrete([2, 2]),
            model_config={},
        )


def _gru(**config) -> GRUActorCritic:
    model_config = {"max_seq_len": 8, "hidden_size": 6, "num_layers": 2} | config
    return GRUActorCritic(observation_space=WINDOW, action_space=ACT3, model_config=model_config)


def test_gru_state_handling_and_encode_shape():
    module = _gru()
    assert module.is_stateful()
    init = module.get_initial_state()
    assert set(init) == {"h"} and init["h"].shape == (2, 6) and init["h"].dtype == np.float32
    h0 = torch.as_tensor(np.stack([init["h"]] * 4))
    batch = {Columns.OBS: _obs(WINDOW, 4, 5), Columns.STATE_IN: {"h": h0}}
    out = module.forward_train(batch)
    assert out[Columns.ACTION_DIST_INPUTS].shape == (4, 5, 3)
    assert out[Columns.STATE_OUT]["h"].shape == (4, 2, 6)
    assert module.encode(batch).shape == (4, 5, 6)
    assert module.compute_values(batch).shape == (4, 5)


def test_gru_stepping_with_state_out_matches_the_whole_sequence():
    torch.manual_seed(0)
    module = _gru()
    obs = _obs(WINDOW, 2, 5)
    whole = module.encode({Columns.OBS: obs})  # zero initial state
    state = {"h": torch.zeros(2, 2, 6)}
    steps = []
    for t in range(5):
        batch = {Columns.OBS: obs[:, t : t + 1], Columns.STATE_IN: state}
        steps.append(module.encode(batch))
        state = module.forward_inference(batch)[Columns.STATE_OUT]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole)


def test_gru_requires_max_seq_len_and_a_time_dim():
    with pytest.raises(ValueError, match="max_seq_len"):
        GRUActorCritic(observation_space=WINDOW, action_space=ACT3, model_config={})
    with pytest.raises(ValueError, match=r"\(B, T"):
        _gru().encode({Columns.OBS: _obs(WINDOW, 4)})


def test_transformer_window_layouts():
    module = TransformerActorCritic(
        observation_space=WINDOW, action_space=ACT3, model_config={"d_model": 16}
    )
    batch = {Columns.OBS: _obs(WINDOW, 3)}
    assert module.forward_train(batch)[Columns.ACTION_DIST_INPUTS].shape == (3, 3)
    assert module.encode(batch).shape == (3, 16)
    assert module.compute_values(batch).shape == (3,)

    flat = gym.spaces.Box(0.0, 1.0, (15,), np.float32)
    module = TransformerActorCritic(
        observation_space=flat,
        action_space=ACT3,
        model_config={"context_len": 5, "feature_dim": 3, "d_model": 8},
    )
    assert module.transformer.context_len == 5 and module.layout.feature_dim == 3
    assert module.encode({Columns.OBS: _obs(flat, 2)}).shape == (2, 8)

    tokens = gym.spaces.MultiDiscrete([4] * 6)
    module = TransformerActorCritic(
        observation_space=tokens, action_space=ACT3, model_config={"d_model": 8}
    )
    assert module.layout.tokens and module.layout.feature_dim == 4
    assert module.encode({Columns.OBS: _obs(tokens, 2)}).shape == (2, 8)


@pytest.mark.parametrize(
    ("space", "model_config", "match"),
    [
        (gym.spaces.Box(0.0, 1.0, (15,), np.float32), {}, "context_len"),
        (WINDOW, {"context_len": 4}, "does not match"),
        (gym.spaces.MultiDiscrete([4, 3]), {}, "one vocabulary"),
        (WINDOW, {"d_model": 10, "num_heads": 4}, "divisible"),
        (gym.spaces.Discrete(3), {}, "window model"),
    ],
)
def test_transformer_config_errors(space, model_config, match):
    with pytest.raises(ValueError, match=match):
        TransformerActorCritic(
            observation_space=space, action_space=ACT3, model_config=model_config
        )


class _TwoHeadGRU(StateAuxHeadMixin, NextTokenAuxHeadMixin, GRUActorCritic):
    pass


def test_head_mixins_add_namespaced_logits_in_training_only():
    module = _TwoHeadGRU(
        observation_space=WINDOW,
        action_space=ACT3,
        model_config={
            "max_seq_len": 8,
            "hidden_size": 6,
            "next_token_aux/num_classes": 3,
            "state_aux/num_classes": 4,
            "state_aux/hidden_sizes": [5],
        },
    )
    batch = {Columns.OBS: _obs(WINDOW, 2, 5)}
    out = module.forward_train(batch)
    assert out["next_token_aux/logits"].shape == (2, 5, 3)
    assert out["state_aux/logits"].shape == (2, 5, 4)
    acting = module.forward_exploration(batch)
    assert "next_token_aux/logits" not in acting and "state_aux/logits" not in acting


def test_head_mixin_requires_num_classes():
    with pytest.raises(ValueError, match="next_token_aux/num_classes"):
        _TwoHeadGRU(
            observation_space=WINDOW,
            action_space=ACT3,
            model_config={"max_seq_len": 8, "state_aux/num_classes": 4},
        )


LEAVES = {
    "mlp": (MLPActorCritic, {}),
    "gru": (GRUActorCritic, {"max_seq_len": 8}),
    "transformer": (TransformerActorCritic, {"d_model": 16}),
}


@pytest.mark.parametrize("name", sorted(LEAVES))
@pytest.mark.parametrize("dim", [1, 3])
def test_every_model_has_a_diagonal_gaussian_head_for_1d_boxes(name, dim):
    module_class, model_config = LEAVES[name]
    action_space = gym.spaces.Box(-2.0, 2.0, (dim,), np.float32)
    module = module_class(
        observation_space=WINDOW, action_space=action_space, model_config=model_config
    )
    assert module.get_exploration_action_dist_cls() is TorchDiagGaussian
    assert module.get_train_action_dist_cls() is TorchDiagGaussian
    obs = _obs(WINDOW, 4, 1) if module.is_stateful() else _obs(WINDOW, 4)
    inputs = module.forward_exploration({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    assert inputs.shape[-1] == 2 * dim  # means, then log-stds
    dist = TorchDiagGaussian.from_logits(inputs)
    assert dist.sample().shape == (*inputs.shape[:-1], dim)


def test_non_flat_box_actions_are_rejected_with_the_reason():
    with pytest.raises(ValueError, match="1-D Box"):
        MLPActorCritic(
            observation_space=BOX4,
            action_space=gym.spaces.Box(-1.0, 1.0, (2, 2), np.float32),
            model_config={},
        )


class _NextTokenMLP(NextTokenAuxHeadMixin, MLPActorCritic):
    pass


@pytest.mark.parametrize(
    ("module_class", "model_config", "key"),
    [
        # The original library's names: ours are num_layers, num_heads, hidden_sizes.
        (TransformerActorCritic, {"n_layers": 3}, "n_layers"),
        (TransformerActorCritic, {"n_heads": 4}, "n_heads"),
        (MLPActorCritic, {"d_model": 96}, "d_model"),
        (GRUActorCritic, {"max_seq_len": 8, "hiden_size": 32}, "hiden_size"),
        (MLPActorCritic, {"next_token_aux/num_classes": 3}, "next_token_aux/num_classes"),
    ],
)
def test_unknown_model_config_keys_fail_naming_the_key_and_the_accepted_ones(
    module_class, model_config, key
):
    accepted = ", ".join(sorted(module_class.accepted_model_config_keys()))
    with pytest.raises(ValueError) as err:
        module_class(observation_space=WINDOW, action_space=ACT3, model_config=model_config)
    message = str(err.value)
    assert "\n" not in message
    assert message == (
        f"{module_class.__name__}: unknown model_config key {key!r}; accepted keys: {accepted}"
    )


def test_composed_head_mixin_keys_are_accepted_and_listed():
    keys = _NextTokenMLP.accepted_model_config_keys()
    assert {"next_token_aux/num_classes", "next_token_aux/hidden_sizes", "hidden_sizes"} <= keys
    assert "next_token_aux/num_classes" not in MLPActorCritic.accepted_model_config_keys()
    module = _NextTokenMLP(
        observation_space=WINDOW,
        action_space=ACT3,
        model_config={"next_token_aux/num_classes": 3, "vf_share_layers": False},
    )
    assert module.forward_train({Columns.OBS: _obs(WINDOW, 2)})["next_token_aux/logits"].shape == (
        2,
        3,
    )
    with pytest.raises(ValueError, match="unknown model_config key 'state_aux/num_classes'"):
        _NextTokenMLP(
            observation_space=WINDOW,
            action_space=ACT3,
            model_config={"next_token_aux/num_classes": 3, "state_aux/num_classes": 3},
        )


@pytest.mark.parametrize(
    ("module_class", "model_config", "match"),
    [
        (TransformerActorCritic, {"num_layers": 2.5}, r"model_config\['num_layers'\] must be"),
        (TransformerActorCritic, {"dropout": -0.1}, r"model_config\['dropout'\] must be"),
        (GRUActorCritic, {"max_seq_len": 0}, r"model_config\['max_seq_len'\] must be"),
        (MLPActorCritic, {"hidden_sizes": [32, True]}, r"model_config\['hidden_sizes'\] must"),
    ],
)
def test_wrong_types_and_ranges_name_the_key(module_class, model_config, match):
    with pytest.raises(ValueError, match=match):
        module_class(observation_space=WINDOW, action_space=ACT3, model_config=model_config)
