"""The test itself: does a module act on the belief its probe reads?

`belief_interventions` composes the parts for the agent and a control module: per-layer
probes (`probe_named`, the same split for both), the edits on the probes' held-out
episodes (`intervene`), scores (`shift_scores`), the random-direction control, paired
bootstrap differences (belief edit minus random edit, agent minus control) and the arrays
`plot_action_shifts` draws. Both modules are checked for what the layers need
(`require_intervention_api`) before any replay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rl_harness.analysis.interventions.actions import clipped_fraction, is_box, policy_actions
from rl_harness.analysis.interventions.edits import (
    BeliefEdit,
    orthogonal_directions,
    probe_subspace,
)
from rl_harness.analysis.interventions.intervene import (
    intervene,
    layer_features,
    require_intervention_api,
)
from rl_harness.analysis.interventions.scores import ShiftScores, shift_difference, shift_scores
from rl_harness.analysis.layer_probes import probe_named
from rl_harness.analysis.probes.bootstrap import Estimate, bootstrap_weights
from rl_harness.analysis.probes.evaluate import ProbeReport
from rl_harness.analysis.probes.settings import ProbeSettings
from rl_harness.analysis.replay import Preprocess
from rl_harness.analysis.rollouts import ActionTransform, Rollouts
from rl_harness.seeding import stream_rng

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule

DEFAULT_STREAM = ("analysis", "interventions")
BELIEF, RANDOM = "belief", "random_orthogonal"  # the two edits of each counterfactual


@dataclass(frozen=True)
class EditScores:
    """One counterfactual at one layer of one module: the belief edit and its
    random-direction control scored against the optimal shift, and their paired
    difference; sizes say how large the edits were."""

    belief: ShiftScores
    random_orthogonal: ShiftScores
    belief_minus_random: dict[str, Estimate | None]
    edit_norm_mean: float  # mean |delta| of the belief edit (the control's is the same)
    representation_norm_mean: float  # mean |h| at the layer
    probe_miss_rms: float  # RMS of (probe reading after the belief edit - b'): ~0 if reached
    value_shift_mean: float  # mean change of the value head under the belief edit
    # Box actions only (None for Discrete): the belief edit's and the control's shift of the
    # pre-transform action mean (in env units through `pre_clip_transform`), scored alike;
    # and the fraction of action coordinates the transform clips: {"unedited", "belief",
    # "random_orthogonal"}.
    pre_clip: dict[str, ShiftScores] | None = None
    clipped_fraction: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            BELIEF: self.belief.to_dict(),
            RANDOM: self.random_orthogonal.to_dict(),
            "belief_minus_random": _estimates_dict(self.belief_minus_random),
            "edit_norm_mean": self.edit_norm_mean,
            "representation_norm_mean": self.representation_norm_mean,
            "probe_miss_rms": self.probe_miss_rms,
            "value_shift_mean": self.value_shift_mean,
            "pre_clip": None
            if self.pre_clip is None
            else {kind: scores.to_dict() for kind, scores in self.pre_clip.items()},
            "clipped_fraction": self.clipped_fraction,
        }


@dataclass(frozen=True)
class LayerInterventions:
    """A module's probe at one layer (fitted on the rollouts' train episodes) and the
    scores of every counterfactual's edits on the held-out ones."""

    layer: str
    probe: ProbeReport
    probe_rank: int
    edits: dict[str, EditScores]

    def to_dict(self) -> dict[str, Any]:
        r2 = self.probe.r2_pooled
        return {
            "layer": self.layer,
            "probe_r2_pooled": None if r2 is None else r2.to_dict(),
            "probe_rank": self.probe_rank,
            "n_features": self.probe.n_features,
            "edits": {name: scores.to_dict() for name, scores in self.edits.items()},
        }


def _estimates_dict(values: Mapping[str, Estimate | None]) -> dict[str, Any]:
    return {key: None if value is None else value.to_dict() for key, value in values.items()}


@dataclass(frozen=True)
class InterventionReport:
    """`belief_interventions`' result. `modules[label][layer]`: LayerInterventions;
    `differences["agent_minus_control"][layer][counterfactual]`: paired differences of the
    belief edit's statistics; `shifts[(label, layer, counterfactual, edit)]`: the (policy,
    optimal) shift arrays (E, T, A) behind each score (`plot_action_shifts` draws them)."""

    layers: list[str]
    counterfactuals: list[str]
    modules: dict[str, dict[str, LayerInterventions]]
    differences: dict[str, dict[str, dict[str, dict[str, Estimate | None]]]]
    test_episodes: list[int]
    episode_steps: int
    n_bootstrap: int
    confidence: float
    seed: int
    stream: list[str]
    carry_edit: bool
    shifts: dict[tuple[str, str, str, str], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (Estimates as {value, low, high}, undefined scores as None)."""
        return {
            "layers": self.layers,
            "counterfactuals": self.counterfactuals,
            "modules": {
                label: {layer: item.to_dict() for layer, item in layers.items()}
                for label, layers in self.modules.items()
            },
            "differences": {
                name: {
                    layer: {cf: _estimates_dict(values) for cf, values in per_cf.items()}
                    for layer, per_cf in per_layer.items()
                }
                for name, per_layer in self.differences.items()
            },
            "test_episodes": self.test_episodes,
            "n_test_episodes": len(self.test_episodes),
            "episode_steps": self.episode_steps,
            "n_bootstrap": self.n_bootstrap,
            "confidence": self.confidence,
            "seed": self.seed,
            "stream": self.stream,
            "carry_edit": self.carry_edit,
        }


def belief_interventions(
    module: RLModule,
    rollouts: Rollouts,
    *,
    layers: Sequence[str],
    optimal_policy: Callable[[np.ndarray], np.ndarray],
    counterfactuals: Mapping[str, np.ndarray],
    seed: int,
    control: RLModule | None = None,
    action_transform: ActionTransform | None = None,
    pre_clip_transform: ActionTransform | None = None,
    preprocess: Preprocess | None = None,
    ridge: float = 0.0,
    test_fraction: float = 0.25,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    max_test_episodes: int | None = None,
    carry_edit: bool = False,
    stream: Sequence[str] = DEFAULT_STREAM,
    progress: Callable[[str], None] | None = None,
) -> InterventionReport:
    """Does `module` act on the belief its probes read? For each layer: fit a probe of
    `rollouts.targets` (the beliefs b) on the train episodes, edit the held-out episodes'
    representation so the probe reads each counterfactual's b' (E, T, k) (and, as a control,
    by the same length along a random direction orthogonal to the probe), and score the
    policy's action shift against `optimal_policy(b') - optimal_policy(b)`
    (`optimal_policy`: (n, k) beliefs -> (n, A) actions, in `policy_actions`' units).

    For Box actions also the shift before the transform's clipping (`pre_clip_transform`:
    `action_transform` without its clipping, mapping the distribution's mean to env units,
    e.g. `rllib_action_transform(space, unclipped=True)`; None: the mean's own units) and the
    fraction of clipped action coordinates (`EditScores.pre_clip`, `clipped_fraction`).

    `control` (e.g. an untrained module of the same architecture) goes through the same
    steps with its own probes fitted on the same rollouts and split. The split, resamples
    and random directions come from named streams of `seed`: `(*stream, "probe", ...)` (as
    `evaluate_probe`'s), `(*stream, "bootstrap")`, `(*stream, "random_direction", layer,
    counterfactual)`. `max_test_episodes` caps the held-out episodes edited (the first ones).
    Both modules are checked for what `layers` (and `carry_edit`) need before any replay
    (`require_intervention_api`: one TypeError naming the missing method).
    """
    if not layers:
        raise ValueError("belief_interventions needs at least one layer")
    if not counterfactuals:
        raise ValueError("belief_interventions needs at least one set of counterfactual beliefs")
    targets = np.asarray(rollouts.targets, dtype=np.float64)
    for name, beliefs in counterfactuals.items():
        if np.shape(beliefs) != targets.shape:
            raise ValueError(
                f"counterfactual {name!r} is {np.shape(beliefs)}, the targets {targets.shape}"
            )
    stream = tuple(stream)
    say = progress or (lambda message: None)
    modules = {"agent": module} | ({} if control is None else {"control": control})
    for member in modules.values():  # before any replay: one line naming a missing method
        require_intervention_api(member, layers, carry_edit=carry_edit)
    probes_of = {}
    for label, member in modules.items():
        say(f"interventions: replaying the rollouts through the {label}, probing {list(layers)}")
        features = layer_features(member, rollouts, layers, preprocess)
        probes_of[label] = probe_named(
            features,
            targets,
            ProbeSettings(
                seed=seed,
                stream=(*stream, "probe"),
                ridge=ridge,
                test_fraction=test_fraction,
                n_bootstrap=n_bootstrap,
                confidence=confidence,
            ),
        )
    first = probes_of["agent"].evaluations[layers[0]]
    test = np.asarray(first.test_episodes)
    if max_test_episodes is not None:
        test = test[:max_test_episodes]
    truth = targets[test]
    steps = truth.shape[1]

    def optimal(beliefs: np.ndarray) -> np.ndarray:
        actions = np.asarray(optimal_policy(beliefs.reshape(-1, beliefs.shape[-1])), np.float64)
        return actions.reshape(*beliefs.shape[:-1], -1)

    base = optimal(truth)
    optimal_shift = {
        name: optimal(np.asarray(cf)[test]) - base for name, cf in counterfactuals.items()
    }
    weights = bootstrap_weights(len(test), n_bootstrap, stream_rng(seed, *stream, "bootstrap"))
    results: dict[str, dict[str, LayerInterventions]] = {}
    shifts: dict[tuple[str, str, str, str], tuple[np.ndarray, np.ndarray]] = {}
    for label, member in modules.items():
        results[label] = {}
        for layer in layers:
            evaluation = probes_of[label].evaluations[layer]
            edits: dict[str, BeliefEdit] = {}
            for name, cf in counterfactuals.items():
                goal = np.asarray(cf, dtype=np.float64)[test]
                rng = stream_rng(seed, *stream, "random_direction", layer, name)
                edits[f"{name}/{BELIEF}"] = BeliefEdit(targets=goal)
                edits[f"{name}/{RANDOM}"] = BeliefEdit(
                    targets=goal,
                    directions=orthogonal_directions(evaluation.probe, (len(test), steps), rng),
                )
            say(f"interventions: {label} at {layer}, {len(edits)} edits on {len(test)} episodes")
            done = intervene(
                member,
                rollouts,
                evaluation.probe,
                edits,
                layer=layer,
                episodes=test,
                preprocess=preprocess,
                carry_edit=carry_edit,
            )
            before = policy_actions(member, done.before.action_inputs, action_transform)
            box = is_box(member.action_space)
            raw_before = policy_actions(member, done.before.action_inputs) if box else None

            def unclipped(raw: np.ndarray) -> np.ndarray:
                if pre_clip_transform is None:
                    return raw
                flat = raw.reshape(-1, raw.shape[-1])
                return np.asarray(pre_clip_transform(flat), np.float64).reshape(raw.shape)

            scores = {}
            for name in counterfactuals:
                pairs, pre_pairs, clipped = {}, {}, {}
                if raw_before is not None:
                    clipped["unedited"] = clipped_fraction(
                        raw_before, action_transform, pre_clip_transform
                    )
                for kind in (BELIEF, RANDOM):
                    after = done.after[f"{name}/{kind}"]
                    moved = policy_actions(member, after.action_inputs, action_transform) - before
                    pairs[kind] = (moved, optimal_shift[name])
                    shifts[(label, layer, name, kind)] = pairs[kind]
                    if raw_before is not None:
                        raw_after = policy_actions(member, after.action_inputs)
                        pre_pairs[kind] = (
                            unclipped(raw_after) - unclipped(raw_before),
                            optimal_shift[name],
                        )
                        clipped[kind] = clipped_fraction(
                            raw_after, action_transform, pre_clip_transform
                        )
                key = f"{name}/{BELIEF}"
                miss = done.probe_after[key] - np.asarray(counterfactuals[name])[test]
                scores[name] = EditScores(
                    belief=shift_scores(*pairs[BELIEF], weights=weights, confidence=confidence),
                    random_orthogonal=shift_scores(
                        *pairs[RANDOM], weights=weights, confidence=confidence
                    ),
                    belief_minus_random=shift_difference(
                        pairs[BELIEF], pairs[RANDOM], weights=weights, confidence=confidence
                    ),
                    edit_norm_mean=float(done.edit_norm[key].mean()),
                    representation_norm_mean=float(done.representation_norm.mean()),
                    probe_miss_rms=float(np.sqrt((miss**2).sum(-1).mean())),
                    value_shift_mean=float((done.after[key].values - done.before.values).mean()),
                    pre_clip={
                        kind: shift_scores(*pair, weights=weights, confidence=confidence)
                        for kind, pair in pre_pairs.items()
                    }
                    if box
                    else None,
                    clipped_fraction=clipped if box else None,
                )
            results[label][layer] = LayerInterventions(
                layer=layer,
                probe=evaluation.report,
                probe_rank=probe_subspace(evaluation.probe).rank,
                edits=scores,
            )
    differences: dict[str, dict[str, dict[str, dict[str, Estimate | None]]]] = {}
    if control is not None:
        differences["agent_minus_control"] = {
            layer: {
                name: shift_difference(
                    shifts[("agent", layer, name, BELIEF)],
                    shifts[("control", layer, name, BELIEF)],
                    weights=weights,
                    confidence=confidence,
                )
                for name in counterfactuals
            }
            for layer in layers
        }
    return InterventionReport(
        layers=list(layers),
        counterfactuals=list(counterfactuals),
        modules=results,
        differences=differences,
        test_episodes=[int(e) for e in test],
        episode_steps=int(steps),
        n_bootstrap=int(n_bootstrap),
        confidence=float(confidence),
        seed=int(seed),
        stream=list(stream),
        carry_edit=carry_edit,
        shifts=shifts,
    )
