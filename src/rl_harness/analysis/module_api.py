"""What analysis reads from a module beyond RLlib's `RLModule`: one typed contract per
capability, as RLlib declares `ValueFunctionAPI` or `TargetNetworkAPI` for what a Learner
needs.

Stepping a module (rollouts, replay, interventions) uses only RLlib's own `RLModule` API:
`is_stateful`, `get_initial_state`, `forward_inference` / `forward_exploration`, the action
distribution classes, STATE_IN / STATE_OUT. What each analysis reads on top of that:

- `EncoderAPI.encode(batch)`: the representation a probe reads (the default extractor of
  `collect_rollouts` and `replay_rollouts`).
- `StepEncoderAPI.encode_step(batch)`: a stateful module's own read of one step without its
  time axis; the default extractor prefers it to `encode` when the module is stateful.
- `ResidualStreamAPI.encode_step_residuals(batch)`: every named residual of one step
  (`probe_layers`, `replay_rollouts_named`, `residual_representations`).
- `SequenceResidualAPI.encode_sequence_residuals(batch)`: a stateful module reading T steps
  in one call (every residual and the state after them): replays of many steps
  (`replay_rollouts(..., steps_per_call=T)`), equal to T single steps up to float rounding.
- `PolicyHeadsAPI.forward_heads(representation)`: the policy and value heads from a given
  representation (every intervention).
- `ResidualEditAPI.encode_step_edited(batch, layer, edit)` (and `encode_step_residuals`):
  one step with one residual edited and the rest of the module run from it (interventions
  at a layer other than "representation").
- `PrevActionInputAPI.prev_action_width()`: a module that reads the previous action from
  the `prev_actions` batch column (written by connectors when RLlib acts); `ModuleStepper`
  then writes the same column itself, so rollouts and replay step such a module as RLlib does.

They are `typing.Protocol`s: a module satisfies one by having its methods, so a module of
any library works, and `learners` (which may not import `analysis`) need not inherit them.
tests/analysis/test_module_api.py checks which contracts each bundled module
(`rl_harness.learners.models`) satisfies. An analysis states what it needs with
`require_api` before it does any work: a module lacking a method fails at once with one
line naming the method.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

__all__ = [
    "EncoderAPI",
    "PolicyHeadsAPI",
    "PrevActionInputAPI",
    "ResidualEditAPI",
    "ResidualStreamAPI",
    "SequenceResidualAPI",
    "StepEncoderAPI",
    "missing_methods",
    "require_api",
]


@runtime_checkable
class EncoderAPI(Protocol):
    """A module whose representation a probe can read."""

    def encode(self, batch: dict[str, Any]) -> torch.Tensor:
        """The representation of `batch` (the batch `forward_inference` takes): (N, d), or
        (N, T, d) for a stateful module's (N, T, ...) batch."""
        ...


@runtime_checkable
class StepEncoderAPI(Protocol):
    """A stateful module with its own read of one step."""

    def encode_step(self, batch: dict[str, Any]) -> tuple[torch.Tensor, Any]:
        """One step without a time axis (obs (N, *obs_shape), STATE_IN) -> (representation
        (N, d), state out): the same representation and state as `forward_inference` of
        the step with a time axis of 1."""
        ...


@runtime_checkable
class ResidualStreamAPI(Protocol):
    """A module that exposes its residual stream, one named (N, d) tensor per depth."""

    def encode_step_residuals(self, batch: dict[str, Any]) -> tuple[dict[str, torch.Tensor], Any]:
        """({name: (N, d)}, state out) for one step: a stateful module reads it without a
        time axis (as `encode_step`), a stateless one the batch `encode` takes (state out
        {}). Names: "embed", "block_1".."block_L", "final_norm" (what the heads read)."""
        ...


@runtime_checkable
class SequenceResidualAPI(Protocol):
    """A stateful module that reads many steps in one call (a replay's fast path)."""

    def encode_sequence_residuals(
        self, batch: dict[str, Any]
    ) -> tuple[dict[str, torch.Tensor], Any]:
        """T steps at once: obs (N, T, *obs_shape), STATE_IN the state before the first ->
        ({name: (N, T, d)} named as `encode_step_residuals` names them, the state after the
        last step): T calls of `encode_step_residuals` in one, equal up to float rounding."""
        ...


@runtime_checkable
class PolicyHeadsAPI(Protocol):
    """A module whose heads can read a representation given to them."""

    def forward_heads(self, representation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(action distribution inputs (..., A_in), values (...)) of the heads reading
        `representation` (..., d): for `encode(batch)`, the module's own outputs."""
        ...


@runtime_checkable
class ResidualEditAPI(ResidualStreamAPI, Protocol):
    """A module that runs one step with one residual edited."""

    def encode_step_edited(
        self,
        batch: dict[str, Any],
        layer: str,
        edit: Callable[[torch.Tensor], torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """One step as `encode_step_residuals` takes it, with the residual at `layer`
        replaced by `edit(residual)` and the rest of the module run from there: (the residual
        before the edit (N, d), the representation the heads read (N, d), state out)."""
        ...


@runtime_checkable
class PrevActionInputAPI(Protocol):
    """A module that reads the agent's previous action from the `prev_actions` column."""

    def prev_action_width(self) -> int:
        """Floats per step of `prev_actions` (one-hot for Discrete actions, the action as
        sampled for a Box; zeros before an episode's first action); 0: the module reads none."""
        ...


def prev_action_width(module: object) -> int:
    """`module.prev_action_width()` when the module has it, else 0."""
    method = getattr(module, "prev_action_width", None)
    return int(method()) if callable(method) else 0


def missing_methods(module: object, api: type) -> list[str]:
    """The methods of the contract `api` that `module` lacks, sorted (empty: it satisfies
    it). Looked up statically, as `isinstance` checks a runtime protocol."""
    return sorted(
        name
        for name in typing.get_protocol_members(api)
        if not callable(inspect.getattr_static(module, name, None))
    )


def require_api(module: object, *apis: type, purpose: str) -> None:
    """Raise TypeError, naming every missing method and `purpose` (what needs it), unless
    `module` satisfies each contract in `apis`. Call it before any work."""
    missing = sorted({name for api in apis for name in missing_methods(module, api)})
    if missing:
        names = ", ".join(api.__name__ for api in apis)
        raise TypeError(
            f"{type(module).__name__} has no {', '.join(missing)}: {purpose} needs a module "
            f"with {names} (rl_harness.analysis.module_api)"
        )
