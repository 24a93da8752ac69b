"""The modules' hooks for causal interventions: `forward_heads` (the heads from a given
representation) on every actor-critic, and the stateful transformer's `encode_step_edited`
(one residual edited, the rest of the module run from it) against a hand computation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from rl_harness.learners.models import (
    GRUActorCritic,
    MLPActorCritic,
    StatefulTransformerActorCritic,
)

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
SMALL = {"max_seq_len": 4, "context": 5, "d_model": 16, "num_heads": 2, "num_layers": 2}


def _transformer(**config):
    torch.manual_seed(0)
    return StatefulTransformerActorCritic(
        observation_space=OBS,
        action_space=BOX,
        model_config=SMALL | {"prev_action": False} | config,
    )


def _filled_state(module, batch_size: int = 3, steps: int = 6):
    """The cache after `steps` random steps (a filled, wrapped cache, not only the empty one)."""
    state = None
    with torch.no_grad():
        for _ in range(steps):
            batch = {Columns.OBS: torch.randn(batch_size, 3)}
            if state is not None:
                batch[Columns.STATE_IN] = state
            _, state = module.encode_step(batch)
    return state


@pytest.mark.parametrize(
    "module_class, config, time_axis",
    [
        (MLPActorCritic, {"hidden_sizes": [8]}, False),
        (GRUActorCritic, {"max_seq_len": 4, "hidden_size": 8}, True),
        (StatefulTransformerActorCritic, SMALL | {"prev_action": False}, True),
    ],
)
def test_forward_heads_are_the_modules_outputs_from_its_representation(
    module_class, config, time_axis
):
    torch.manual_seed(0)
    module = module_class(observation_space=OBS, action_space=BOX, model_config=config)
    obs = torch.randn(4, 1, 3) if time_axis else torch.randn(4, 3)
    batch = {Columns.OBS: obs}
    with torch.no_grad():
        out = module.forward_inference(batch)
        inputs, values = module.forward_heads(module.encode(batch))
        expected_values = module.compute_values(batch)
    torch.testing.assert_close(inputs, out[Columns.ACTION_DIST_INPUTS], rtol=0, atol=0)
    torch.testing.assert_close(values, expected_values, rtol=0, atol=0)
    assert inputs.shape[-1] == 4 and values.shape == obs.shape[: 2 if time_axis else 1]


@pytest.mark.parametrize("layer", ["embed", "block_1", "block_2", "final_norm"])
def test_an_identity_edit_is_encode_step(layer):
    module = _transformer()
    state = _filled_state(module)
    batch = {Columns.OBS: torch.randn(3, 3), Columns.STATE_IN: state}
    with torch.no_grad():
        residuals, unedited_state = module.encode_step_residuals(batch)
        before, representation, state_out = module.encode_step_edited(batch, layer, lambda h: h)
    torch.testing.assert_close(before, residuals[layer], rtol=0, atol=1e-6)
    torch.testing.assert_close(representation, residuals["final_norm"], rtol=0, atol=1e-6)
    for key in ("k", "v", "n"):
        torch.testing.assert_close(state_out[key], unedited_state[key], rtol=0, atol=1e-6)


def test_an_edit_at_block_1_runs_the_rest_of_the_module_from_the_edited_residual():
    module = _transformer()
    state = _filled_state(module)
    saved = {key: value.clone() for key, value in state.items()}
    obs = torch.randn(3, 3)
    batch = {Columns.OBS: obs, Columns.STATE_IN: state}
    change = torch.randn(3, 16)
    with torch.no_grad():
        residuals, unedited_state = module.encode_step_residuals(batch)
        before, representation, state_out = module.encode_step_edited(
            batch, "block_1", lambda h: h + change
        )
        # By hand: block 2 and the final norm on (block_1's residual + change), with the
        # carried cache of layer 2 and the step's rotary tables and window mask.
        encoder = module.transformer
        cos, sin, window = encoder._tables_for(1, obs.device)
        mask = encoder._mask(state["n"], window)
        edited = (residuals["block_1"] + change)[:, None]
        out, keys, values = encoder.blocks[1](
            edited, state["k"][:, 1], state["v"][:, 1], mask, cos, sin
        )
        by_hand = encoder.norm(out)[:, 0]
        inputs, _ = module.forward_heads(representation)
        unedited_inputs, _ = module.forward_heads(residuals["final_norm"])
    torch.testing.assert_close(before, residuals["block_1"], rtol=0, atol=1e-6)
    torch.testing.assert_close(representation, by_hand, rtol=0, atol=1e-6)
    assert not torch.allclose(inputs, unedited_inputs, atol=1e-4)  # the edit reaches the heads
    # The carried cache is untouched; the state out holds layer 1's keys/values as
    # unedited and layer 2's from the edited residual (the new step's slot).
    for key in ("k", "v", "n"):
        assert torch.equal(state[key], saved[key])
    torch.testing.assert_close(state_out["k"][:, 0], unedited_state["k"][:, 0], rtol=0, atol=1e-6)
    torch.testing.assert_close(state_out["k"][:, 1, -1], keys[:, -1], rtol=0, atol=1e-6)
    torch.testing.assert_close(state_out["v"][:, 1, -1], values[:, -1], rtol=0, atol=1e-6)
    assert not torch.allclose(state_out["k"][:, 1, -1], unedited_state["k"][:, 1, -1])
    # Older slots are the carried cache, shifted by one step as in encode_step.
    torch.testing.assert_close(state_out["k"][:, 1, :-1], unedited_state["k"][:, 1, :-1])


def test_an_edit_of_the_final_norm_is_what_the_heads_read():
    module = _transformer()
    batch = {Columns.OBS: torch.randn(3, 3), Columns.STATE_IN: _filled_state(module)}
    change = torch.randn(3, 16)
    with torch.no_grad():
        residuals, unedited_state = module.encode_step_residuals(batch)
        _, representation, state_out = module.encode_step_edited(
            batch, "final_norm", lambda h: h + change
        )
    torch.testing.assert_close(representation, residuals["final_norm"] + change)
    for key in ("k", "v"):  # nothing downstream of the final norm feeds the cache
        torch.testing.assert_close(state_out[key], unedited_state[key], rtol=0, atol=1e-6)


def test_edit_errors_name_the_layer_and_the_shape():
    module = _transformer()
    batch = {Columns.OBS: torch.randn(2, 3)}
    with pytest.raises(ValueError, match="unknown layer 'block_9'; the residuals are embed"):
        module.encode_step_edited(batch, "block_9", lambda h: h)
    with pytest.raises(ValueError, match="the edit of 'block_2' returned"):
        module.encode_step_edited(batch, "block_2", lambda h: h[:, :4])
