"""Plant a fixed list of realistic one-line bugs, one at a time, and check the tests catch each.

    python3 -m uv run python tools/mutation_check.py            # all mutations
    python3 -m uv run python tools/mutation_check.py --list     # what would be planted
    python3 -m uv run python tools/mutation_check.py aux-mask   # just the named ones

Each mutation names its file, the exact original text and its replacement, and the tests
that must fail on it ("kill" it). The file is edited in place and always restored byte for
byte (and to its old mtime) before the next one, on Ctrl-C and SIGTERM too. First the named
tests run on the unmutated code: a mutant is only "killed" if they passed there. Exit code
0 when every mutant is killed; 1 when one survives; 2 when the list is stale (an original
text no longer occurs exactly once: update the entry with the code it guards).

In a checkout others are editing, run it on a snapshot of HEAD instead (docs/mutation_check.md):
    snap=$(mktemp -d) && git archive HEAD | tar -x -C "$snap"
    PYTHONPATH="$snap/src" .venv/bin/python "$snap/tools/mutation_check.py" NAME...
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = "src/rl_harness"
EXPERIMENTS = "examples/rl-experiments/experiments"  # the bundled experiment repo's package


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str  # relative to `root`
    edits: tuple[tuple[str, str], ...]  # (original text, mutant text), each original unique
    tests: tuple[str, ...]  # pytest node ids that must fail on the mutant
    why: str
    root: str = SRC  # the package folder `file` is in, relative to the checkout

    @property
    def path(self) -> Path:
        return ROOT / self.root / self.file


MUTATIONS = [
    Mutation(
        "analysis-stage-inputs-ignored",
        "analysis/stages.py",
        (
            (
                '_IDENTITY_FIELDS = ("library", "experiment", "budget", "overrides", "inputs")',
                '_IDENTITY_FIELDS = ("library", "experiment", "budget", "overrides")',
            ),
        ),
        (
            "tests/analysis/test_analyze_stages.py::"
            "test_one_stage_and_a_changed_input_makes_only_its_reader_stale",
        ),
        "`rl-harness analyze` would skip a stage whose input changed since it ran",
    ),
    Mutation(
        "incremental-min-over-controls",
        "analysis/incremental.py",
        (
            (
                "min_over_controls=scores(_over(minus, np.min)) if minus else None,",
                "min_over_controls=scores(_over(minus, np.max)) if minus else None,",
            ),
        ),
        (
            "tests/analysis/test_incremental_r2.py::"
            "test_a_control_that_is_the_agent_gives_zero_and_so_does_the_minimum",
        ),
        "the claim against several untrained inits would rest on the easiest one, not the worst",
    ),
    Mutation(
        "redaction-token",
        "harness/redaction.py",
        (
            (
                "(KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL)",
                "(KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)",
            ),
        ),
        ("tests/harness/test_redaction_names.py",),
        "GH_TOKEN-style values would reach manifests and logs",
    ),
    Mutation(
        "final-checkpoint-only-on-completed",
        "harness/runners/direct.py",
        (
            (
                "and status != FAILED",
                "and status == COMPLETED",
            ),
        ),
        ("tests/harness/test_interrupted_checkpoint.py",),
        "an interrupted run would lose its last checkpoint",
    ),
    Mutation(
        "aux-mask",
        "losses/aux_mixins.py",
        (
            (
                "loss = masked_cross_entropy(logits, targets, mask)",
                "loss = masked_cross_entropy(logits, targets)",
            ),
        ),
        ("tests/losses/test_aux_mask.py",),
        "padded and invalid steps would count in the auxiliary loss",
    ),
    Mutation(
        "probe-bootstrap-over-samples",
        "analysis/probes/evaluate.py",
        (
            (
                "per_episode = episode_sums(y[test], test_pred, reference)",
                "per_episode = episode_sums("
                "y[test].reshape(-1, 1, k), test_pred.reshape(-1, 1, k), reference)",
            ),
            (
                "bootstrap_weights(len(test), n_bootstrap",
                "bootstrap_weights(len(per_episode.count), n_bootstrap",
            ),
        ),
        ("tests/analysis/test_probe_bootstrap_episodes.py",),
        "probe intervals would be too narrow when steps within an episode are correlated",
    ),
    Mutation(
        "plot-predictions-panel",
        "analysis/plots.py",
        (
            (
                "panels.append((predicted_beliefs, labels[1]))",
                "panels.append((true_beliefs, labels[1]))",
            ),
        ),
        ("tests/analysis/test_plot_positions.py",),
        "the prediction panel would show the true beliefs",
    ),
    Mutation(
        "transformer-post-norm",
        "learners/components/transformer.py",
        (
            (
                "        h = h + self.drop(self.attn(self.norm1(h), rotary))\n"
                "        return h + self.drop(self.mlp(self.norm2(h)))",
                "        h = self.norm1(h + self.drop(self.attn(h, rotary)))\n"
                "        return self.norm2(h + self.drop(self.mlp(h)))",
            ),
        ),
        ("tests/learners/test_transformer_values.py",),
        "a post-norm transformer, not the documented pre-norm one",
    ),
    Mutation(
        "transformer-no-causal-mask",
        "learners/components/transformer.py",
        (
            (
                "q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True",
                "q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=False",
            ),
        ),
        (
            "tests/learners/test_learner_components.py::test_transformer_is_causal",
            "tests/learners/test_transformer_values.py::test_token_input_is_causal_at_every_position",
        ),
        "positions would see the future",
    ),
    Mutation(
        "context-unchecked-artifacts-dir",
        "harness/context.py",
        (('    _check_base("artifacts dir", artifacts_base)\n', ""),),
        ("tests/harness/test_rejected_run_leaves_nothing.py",),
        "a rejected run would leave an orphan results/<id>/",
    ),
    Mutation(
        "masked-mean-denominator",
        "losses/classification.py",
        (
            (
                "return (values * weights).sum() / weights.sum().clamp_min(1.0)",
                "return (values * weights).sum() / weights.numel()",
            ),
        ),
        ("tests/losses/test_losses_classification.py",),
        "masked steps would dilute the mean",
    ),
    Mutation(
        "belief-unnormalized",
        "envs/hmm/beliefs.py",
        (("    return unnormalized / norm\n", "    return unnormalized\n"),),
        ("tests/envs/test_beliefs.py",),
        "beliefs would not be probability vectors",
    ),
    Mutation(
        "window-beliefs-newest-first",
        "envs/hmm/beliefs.py",
        (
            (
                "for lag in range(min(m, steps) - 1, -1, -1):",
                "for lag in range(min(m, steps)):",
            ),
        ),
        (
            "tests/envs/test_window_beliefs.py::test_window_m_is_the_filter_of_the_last_m_tokens_alone",
        ),
        "the memory yardstick's filter would apply the last m steps newest first",
    ),
    Mutation(
        "recipe-old-names-half-read",
        "harness/recipe.py",
        (("    if old:\n", "    if False:\n"),),
        (
            "tests/harness/test_recipe_declaration.py::test_an_old_style_leaf_is_refused_with_the_migration",
        ),
        "a leaf with BUDGETS but no RECIPE would run its bare run(), its budgets silently ignored",
    ),
    Mutation(
        "options-checked-twice",
        "harness/context.py",
        (("        if self._checked:\n", "        if False:\n"),),
        ("tests/harness/test_recipe_declaration.py::test_a_run_checks_its_options_once",),
        "a run's options would be checked again on each step from the CLI to the recipe",
    ),
    Mutation(
        "seed-upper-bound",
        "harness/context.py",
        (("if not 0 <= seed <= MAX_SEED:", "if not 0 <= seed <= MAX_SEED + 1:"),),
        ("tests/harness/test_context.py::test_bad_seed_rejected",),
        "seed 2**32 would be accepted (NumPy and RLlib reject it mid-run)",
    ),
    Mutation(
        "split-without-train-episode",
        "analysis/probes/split.py",
        (
            (
                "n_test = min(n_episodes - 1, max(1, round(test_fraction * n_episodes)))",
                "n_test = max(1, round(test_fraction * n_episodes))",
            ),
        ),
        ("tests/analysis/test_probes.py::test_split_is_by_episode_and_seeded",),
        "a large test fraction would leave no episode to fit the probe on",
    ),
    Mutation(
        "r2-pooled-denominator",
        "analysis/probes/scores.py",
        (("sst_all = (sst * keep).sum(axis=-1)", "sst_all = (sst * keep).sum(axis=-1) + 1.0"),),
        ("tests/analysis/test_probes.py::test_scores_match_direct_formulas",),
        "pooled R² would not be 1 - SSE/SST",
    ),
    # -- issue 31: bug classes the fast suite once let through ---------------------------------
    Mutation(
        "vast-spare-whole-budget",
        "devops/vast/launch.py",
        (
            (
                "offer = _next_spare(spares, machines, budget_dph - committed, box)",
                "offer = _next_spare(spares, machines, budget_dph, box)",
            ),
        ),
        ("tests/devops/test_vast_replacement_budget.py",),
        "a spare replacing a taken offer could rent beyond the budget already committed",
    ),
    Mutation(
        "vast-spare-ignores-planned-boxes",
        "devops/vast/launch.py",
        (
            (
                "committed = dph_so_far + sum(b.offer.dph for b in plan.boxes[box.index + 1 :])",
                "committed = dph_so_far",
            ),
        ),
        (
            "tests/devops/test_vast_replacement_budget.py"
            "::test_replacing_an_early_box_leaves_room_for_the_boxes_still_planned",
        ),
        "replacing an early box could leave too little budget for the boxes still planned",
    ),
    Mutation(
        "b2-abort-prefix-no-slash",
        "harness/storage/upload.py",
        (
            (
                'prefix = object_key(config.prefix, run_path, "") + "/"',
                'prefix = object_key(config.prefix, run_path, "")',
            ),
        ),
        ("tests/storage/test_mirror_abort_scope.py",),
        "run-1's mirror would abort run-10's multipart uploads",
    ),
    Mutation(
        "b2-ctrl-c-blocking-wait",
        "harness/storage/upload.py",
        (
            (
                "wait(pending, timeout=_SIGNAL_POLL_S, return_when=FIRST_COMPLETED)",
                "wait(pending, timeout=None, return_when=FIRST_COMPLETED)",
            ),
        ),
        (
            "tests/storage/test_storage_mirror.py"
            "::test_ctrl_c_cancels_transfers_and_aborts_their_multipart_uploads",
        ),
        "a SIGINT the kernel hands to a worker thread would go unseen until a file finished",
    ),
    Mutation(
        "b2-download-folder-no-slash",
        "harness/storage/download.py",
        (
            (
                'folder = key.rstrip("/") + "/" if key.strip("/") else ""',
                'folder = key if key.strip("/") else ""',
            ),
        ),
        (
            "tests/storage/test_mirror_abort_scope.py"
            "::test_download_of_a_run_folder_fetches_that_run_only",
        ),
        "downloading s3://.../run-1 would also fetch run-10's objects",
    ),
    Mutation(
        "hmm-belief-stride",
        "envs/hmm/simulator.py",
        (
            (
                "which = actions * k + token if self._controlled else token",
                "which = actions * self.model.n_states + token if self._controlled else token",
            ),
        ),
        ("tests/envs/test_beliefs_nonsquare.py",),
        "beliefs under actions would use another action's token matrix (states != tokens)",
    ),
    Mutation(
        "hmm-transition-stride",
        "envs/hmm/simulator.py",
        (
            (
                "row = actions * s + before if self._controlled else before",
                "row = actions * self.model.n_tokens + before if self._controlled else before",
            ),
        ),
        ("tests/envs/test_beliefs_nonsquare.py",),
        "the hidden state would move by another (action, state) row (states != tokens)",
    ),
    Mutation(
        "hmm-emission-stride",
        "envs/hmm/simulator.py",
        (
            (
                "token = self._emission_table.draw(row * s + state, u_emission)",
                "token = self._emission_table.draw(row * self.model.n_tokens + state, u_emission)",
            ),
        ),
        ("tests/envs/test_beliefs_nonsquare.py",),
        "tokens would be drawn from another move's emission (states != tokens)",
    ),
    Mutation(
        "hmm-box-emission-transposed",
        "envs/hmm/simulator.py",
        (
            (
                "self._emission_by_token = np.ascontiguousarray(emission.T)",
                "self._emission_by_token = np.ascontiguousarray(emission)",
            ),
        ),
        (
            "tests/envs/test_beliefs_nonsquare.py"
            "::test_continuous_task_beliefs_use_the_emission_of_the_state_entered",
        ),
        "Box-task beliefs would read the emission matrix transposed (invisible when symmetric)",
    ),
    Mutation(
        "redaction-first-at",
        "harness/redaction.py",
        (('userinfo, host = netloc.rsplit("@", 1)', 'userinfo, host = netloc.split("@", 1)'),),
        ("tests/harness/test_redaction_at_in_password.py",),
        "a URL password holding '@' would leak its tail into records and logs",
    ),
    Mutation(
        "recipe-failure-runtimeerror-only",
        "harness/lifecycle.py",
        (
            (
                "except Exception as failure:  # the recipe's own failure",
                "except RuntimeError as failure:  # the recipe's own failure",
            ),
        ),
        ("tests/harness/test_recipe_failure_types.py",),
        "a ValueError, KeyError or custom failure would escape without status failed/error.txt",
    ),
    Mutation(
        "probe-baseline-sees-test",
        "analysis/probes/evaluate.py",
        (
            (
                "reference = y[train].reshape(-1, k).mean(axis=0)",
                "reference = y.reshape(-1, k).mean(axis=0)",
            ),
        ),
        ("tests/analysis/test_probe_train_mean_baseline.py",),
        "the constant baseline would see the held-out targets",
    ),
    Mutation(
        "tune-sigterm-reported-as-sigint",
        "harness/runners/tune.py",
        (("signum = interrupts.stop_requested() or signal.SIGINT", "signum = signal.SIGINT"),),
        ("tests/harness/test_tune_sigterm.py",),
        "a Tune run stopped by SIGTERM would report SIGINT and exit 130, not 143",
    ),
    Mutation(
        "rollout-seeds-default-stream",
        "analysis/rollouts.py",
        (
            (
                'seeds = [stream_seed(seed, *stream, "episode", str(i))',
                'seeds = [stream_seed(seed, *DEFAULT_STREAM, "episode", str(i))',
            ),
        ),
        (
            "tests/analysis/test_rollout_seed_streams.py"
            "::test_episode_seeds_come_from_the_given_stream",
        ),
        "collect_rollouts would ignore its stream: every probe would see the same episodes",
    ),
    Mutation(
        "muon-gru-input-matrix",
        "learners/models/gru.py",
        (("return [self.gru.gru.weight_ih_l0]", "return []"),),
        ("tests/learners/test_muon_groups_gru.py",),
        "Muon would orthogonalize the GRU's input matrix (raw features in)",
    ),
    Mutation(
        "tune-best-checkpoint-order",
        "harness/runners/tune.py",
        (
            (
                "best = result.get_best_checkpoint(attribute, order)",
                'best = result.get_best_checkpoint(attribute, "max")',
            ),
        ),
        ("tests/harness/test_tune_best_checkpoint_min.py",),
        'checkpoint_score_order="min" would report the highest-scoring checkpoint as best',
    ),
    Mutation(
        "tune-keep-order",
        "harness/runners/tune.py",
        (
            (
                "checkpoint_score_order=checkpoint_score_order,",
                'checkpoint_score_order="max",',
            ),
        ),
        ("tests/harness/test_tune_best_checkpoint_min.py",),
        'with checkpoint_score_order="min", num_to_keep would keep the highest-scoring ones',
    ),
    Mutation(
        "run-id-prefix-over-exact",
        "harness/runtools/records.py",
        (
            (
                "matches = [f for f in folders if f.name == text] or [",
                "matches = [f for f in folders if f.name.startswith(text)] or [",
            ),
        ),
        ("tests/tools/test_run_id_prefix.py",),
        "`show run-1` would be ambiguous (or wrong) once a run-10 exists",
    ),
    Mutation(
        "occupancy-action-cost-norm",
        "envs/mess3/solvers/problem.py",
        (
            (
                "self.action_cost * np.sqrt((actions * actions).sum(-1))[..., None]",
                "self.action_cost * np.abs(actions).sum(-1)[..., None]",
            ),
        ),
        (
            "tests/envs/test_solver_action_cost.py::"
            "test_solver_step_reward_is_the_env_reward_on_the_same_actions",
        ),
        "with action_cost > 0 the solvers would pay an L1 norm, the env the Euclidean one",
    ),
    Mutation(
        "intervention-no-rank-threshold",
        "analysis/interventions/edits.py",
        (("    keep = s > rank_tol * s[0]\n", "    keep = s > 0\n"),),
        (
            "tests/analysis/test_interventions.py::"
            "test_minimum_norm_edit_reaches_the_target_inside_the_probe_subspace",
        ),
        "a belief probe's ~1e-16 singular value inverted: huge edits, a rank-3 subspace",
    ),
    Mutation(
        "intervention-edited-cache-carried",
        "analysis/interventions/intervene.py",
        (
            (
                "carried = plan.carry_edit and edited_state is not None",
                "carried = edited_state is not None",
            ),
            (
                "            if plan.carry_edit:\n                edited_state = edited_out\n",
                "            edited_state = edited_out\n",
            ),
        ),
        ("tests/analysis/test_interventions.py::test_a_carried_edit_changes_later_steps_only",),
        "a within-step edit would leak into later steps through the K/V cache",
    ),
    Mutation(
        "init-normal-keeps-biases",
        "learners/models/init.py",
        (("parameter.zero_()", "pass"),),
        ("tests/learners/test_module_init.py::test_normal_scheme_gives_the_stated_statistics",),
        "the 'normal' scheme would leave PyTorch's random biases in the trunk",
    ),
    Mutation(
        "kv-steps-env-runner-unchecked",
        "learners/connectors/kv_cache.py",
        (
            (
                "    if config.add_default_connectors_to_env_to_module_pipeline:\n",
                "    if False:\n",
            ),
        ),
        (
            "tests/learners/test_kv_cache.py::"
            "test_a_harness_run_without_store_kv_steps_is_refused_before_ray",
            "tests/learners/test_kv_cache.py::"
            "test_a_half_installed_config_is_refused_naming_what_is_missing",
        ),
        "a stateful transformer whose env runners keep RLlib's default pieces (the whole "
        "K/V cache stored at every step) would train without the refusal naming it",
    ),
    Mutation(
        "init-vf-scale-ignored",
        "learners/models/base.py",
        (("output_scale=self.init.vf_output_scale,", ""),),
        ("tests/learners/test_module_init.py::test_output_scales_scale_the_heads_last_layer",),
        "vf_output_scale would be recorded in config.json but never applied",
    ),
    Mutation(
        "interventions-pre-clip-reads-clipped-actions",
        "analysis/interventions/report.py",
        (
            (
                "raw_after = policy_actions(member, after.action_inputs)",
                "raw_after = policy_actions(member, after.action_inputs, action_transform)",
            ),
        ),
        (
            "tests/analysis/test_interventions.py"
            "::test_a_saturated_policy_moves_fully_before_the_clip_and_the_clipped_fraction_is_exact",
        ),
        "the pre-clip shift would be read after the clip: saturation would hide again",
    ),
    Mutation(
        "prefix-trie-parent",
        "learners/components/transformer.py",
        (
            (
                "ancestors = previous_ancestors[parent if j > 0 else torch.zeros_like(parent)]",
                "ancestors = previous_ancestors[torch.zeros_like(parent)]",
            ),
        ),
        (
            "tests/learners/test_prefix_shared_forward.py::"
            "test_trie_has_one_node_per_distinct_prefix_and_ancestors_spell_it",
            "tests/learners/test_prefix_shared_forward.py::"
            "test_recipe_train_batch_prefix_shared_equals_per_window[ppo]",
        ),
        "prefix-shared training would attend to another window's prefix (wrong parent)",
    ),
    Mutation(
        "prefix-shared-position",
        "learners/components/transformer.py",
        (
            (
                "h = h + self.position[trie.depth]",
                "h = h + self.position[width - 1 - trie.depth]",
            ),
        ),
        (
            "tests/learners/test_prefix_shared_forward.py::"
            "test_encoder_prefix_shared_equals_per_window_in_float64[4-paper-tokens]",
            "tests/learners/test_prefix_shared_forward.py::"
            "test_recipe_train_batch_prefix_shared_equals_per_window[supervised]",
        ),
        "prefix-shared training would add a node the position of the other end of its window",
    ),
    Mutation(
        "compare-pools-budgets",
        "analysis/comparison.py",
        (("    if len(by_budget) <= 1:\n", "    if True:\n"),),
        (
            "tests/tools/test_loud_records.py::"
            "test_compare_refuses_smoke_with_cpu_and_names_the_runs",
        ),
        "compare would pool a smoke run as another seed of a CPU-budget arm (issue 40)",
    ),
    Mutation(
        "find-runs-silent",
        "harness/runtools/records.py",
        (
            (
                "            unreadable.append(Unreadable(folder, _reason(error, folder)))\n",
                "            continue\n",
            ),
        ),
        ("tests/tools/test_loud_records.py::test_unreadable_run_folders_are_named",),
        "a run with a corrupt manifest would vanish from runs and compare without a word",
    ),
    Mutation(
        "torn-row-silent",
        "harness/runtools/records.py",
        (("            _note(self.problems, problem)\n", "            pass\n"),),
        (
            "tests/tools/test_readers_go_on.py::"
            "test_each_unreadable_file_is_one_warning_line_and_the_output_goes_on",
        ),
        "a truncated metrics.jsonl row would be skipped without a word (final iteration off by 1)",
    ),
    Mutation(
        "set-unchecked-type",
        "harness/budgets.py",
        (
            (
                "            parsed[key] = parse_value(value, kinds[key])\n",
                "            parsed[key] = value\n",
            ),
        ),
        ("tests/harness/test_budgets.py::test_bad_budget_input_is_one_line_and_leaves_nothing",),
        "--set iterations=1.5 would hand the recipe a string where it reads an int",
    ),
    Mutation(
        "stack-lift-drops-newest",
        "envs/mess3/solvers/windows.py",
        (
            (
                ":, np.arange(n_windows) % 3 ** (chain.k - 1)",
                ":, np.arange(n_windows) // 3",
            ),
        ),
        ("tests/envs/test_solver_lift.py",),
        "stack_k would start from (k - 1) optima acting on the wrong k - 1 tokens",
    ),
    Mutation(
        "config-secret-names-singular-only",
        "harness/configrecord.py",
        (
            (
                'return any(word.rstrip("s") in _SECRET_WORDS for word in words)',
                "return any(word in _SECRET_WORDS for word in words)",
            ),
        ),
        ("tests/harness/test_config_record.py::test_config_json_names_what_was_trained",),
        "api_keys, auth_tokens and credentials would reach config.json in clear",
    ),
    Mutation(
        "config-secret-list-values",
        "harness/configrecord.py",
        (
            (
                "result[name] = _redact_strings(config_value(value, depth + 1))",
                "result[name] = config_value(value, depth + 1)",
            ),
        ),
        ("tests/harness/test_config_record.py::test_config_json_names_what_was_trained",),
        "the keys in a list (or mapping) under api_keys would reach config.json in clear",
    ),
    Mutation(
        "liveness-start-time-field",
        "harness/liveness.py",
        (("return int(fields[19])", "return int(fields[17])"),),  # field 20: always 0
        ("tests/harness/test_liveness_start_time.py",),
        "a running record whose pid was reused would read running, not crashed",
    ),
    Mutation(
        "token-guess-fraction-over-ceiling",
        "mess3_token_guess/shared.py",
        (
            (
                'accuracy["greedy"] / accuracy["bayes_optimal"]',
                'accuracy["greedy"] / exact["bayes_optimal_accuracy"]',
            ),
        ),
        ("tests/study/test_token_guess_analysis.py",),
        "the fraction of Bayes-optimal would divide by the population ceiling, not the "
        "Bayes accuracy on the same steps",
        root=EXPERIMENTS,
    ),
    Mutation(
        "window-baseline-fit-on-test",
        "analysis/windows.py",
        (("train=agent.train_episodes,", "train=test,"),),
        ("tests/analysis/test_window_baseline_fit_episodes.py",),
        "the window baseline would be fitted on the steps it is scored on",
    ),
    Mutation(
        "permutation-no-tie-tolerance",
        "analysis/probes/permutation.py",
        (("TIE_TOLERANCE = 1e-9", "TIE_TOLERANCE = 0.0"),),
        (
            "tests/analysis/test_statistics_known_answers.py::"
            "test_a_null_value_within_rounding_of_the_observed_one_reaches_it",
        ),
        "a null value equal to the observed one up to rounding would not count: p too small",
    ),
    Mutation(
        "ridge-solver-keeps-rounding-directions",
        "analysis/probes/affine.py",
        (
            (
                "cutoff = s.max(initial=0.0) * max(xc.shape) * np.finfo(np.float64).eps",
                "cutoff = 0.0",
            ),
        ),
        ("tests/analysis/test_probe_golden.py::test_a_rank_deficient_fit_is_the_minimum_norm_one",),
        "a rank-deficient ridge-0 probe (simplex beliefs, layer norm) would fit rounding noise",
    ),
    Mutation(
        "within-variance-all-steps",
        "analysis/probes/branches.py",
        (
            (
                "sst / steps[:, None], 0.0)",
                "sst / n.sum(axis=1)[:, None], 0.0)",
            ),
        ),
        (
            "tests/analysis/test_statistics_known_answers.py::"
            "test_within_branch_variance_and_counts_by_hand",
        ),
        "the within-branch variance would count the steps of single-step branches",
    ),
    Mutation(
        "window-fits-share-one-batch-order",
        "analysis/windows.py",
        (
            (
                "generators = [torch.Generator().manual_seed(task.batch_seed) for task in tasks]",
                "generators = [torch.Generator().manual_seed(tasks[0].batch_seed) for _ in tasks]",
            ),
        ),
        ("tests/analysis/test_window_batched_fit.py",),
        "window MLPs trained together would all take the first model's minibatch order",
    ),
    Mutation(
        "window-fits-read-the-first-models-targets",
        "analysis/windows.py",
        (
            (
                "offsets = (torch.arange(len(tasks)) * n)[:, None]",
                "offsets = torch.zeros(len(tasks), 1, dtype=torch.long)",
            ),
        ),
        (
            "tests/analysis/test_window_batched_fit.py::"
            "test_models_trained_together_equal_each_fitted_alone",
        ),
        "window MLPs trained together would all be fitted to the first model's targets",
    ),
    Mutation(
        "fit-memo-key-ignores-seeds",
        "analysis/windows.py",
        (
            (
                "seeds = (task.init_seed, task.batch_seed, task.n_extra, extra)",
                "seeds = (task.n_extra, extra)",
            ),
        ),
        (
            "tests/analysis/test_window_batched_fit.py::"
            "test_a_memo_reads_a_fit_made_before_bit_for_bit_and_trains_only_the_rest",
        ),
        "a memo would hand a fit of other initial weights or minibatches to a new fit",
    ),
    Mutation(
        "history-worth-strict-reach",
        "analysis/windows.py",
        (("get(row.window).value >= agent.value", "get(row.window).value > agent.value"),),
        ("tests/analysis/test_statistics_known_answers.py::test_history_worth_by_hand",),
        "a window that equals the agent's R² would not count as reaching it",
    ),
    Mutation(
        "upload-manifest-env-secrets-only",
        "harness/storage/upload.py",
        (
            (
                "write_manifest(upload.results_dir, manifest, secrets=config.secrets())",
                "write_manifest(upload.results_dir, manifest)",
            ),
        ),
        (
            "tests/storage/test_upload_manifest_redaction.py",
            "tests/storage/test_run_upload.py::"
            "test_upload_run_records_the_summary_redacted_of_the_configs_keys",
        ),
        "`rl-harness upload` would write B2 keys read from the env file into the manifest",
    ),
    Mutation(
        "window-guessed-positions",
        "learners/models/spaces.py",
        (
            (
                "feature_dim is None or context_len * feature_dim != size:",
                "feature_dim is None or size % context_len != 0:",
            ),
            (
                "width, dim = context_len, feature_dim",
                "width, dim = context_len, size // context_len",
            ),
        ),
        (
            "tests/learners/test_window_keys.py::"
            "test_a_token_and_action_window_never_reads_token_token_pairs",
        ),
        "a 10-token + 10-action observation would be read as (token, token) positions",
    ),
    Mutation(
        "emission-on-leave-as-enter",
        "envs/hmm/action_tasks.py",
        (
            (
                'return np.einsum("ik,aij->akij", emission, transitions)',
                'return np.einsum("aij,jk->akij", transitions, emission)',
            ),
        ),
        (
            "tests/envs/test_action_tasks.py::test_the_token_comes_from_the_chosen_state",
            "tests/envs/test_action_tasks.py::"
            "test_feedback_study_bayes_optimal_accuracy_matches_the_known_answer",
        ),
        "the original study's timing (emit on leaving) silently becomes this MESS3's (on entering)",
    ),
    Mutation(
        "quantile-bins-ties-upper",
        "analysis/probes/windows.py",
        (("        rank = (below + at_most) / (2.0 * n)\n", "        rank = at_most / n\n"),),
        (
            "tests/analysis/test_controls.py::"
            "test_quantile_bins_split_a_known_sample_into_the_stated_counts",
        ),
        "actions held at the clip bound and all others in one bin: action branches split nothing",
    ),
    Mutation(
        "rollouts-actor-ignored",
        "analysis/rollouts.py",
        (("            action = np.asarray(actor(obs, info))\n", "            pass\n"),),
        (
            "tests/study/test_belief_geometry_controls.py::"
            "test_belief_mdp_rollouts_carry_the_exact_filtered_beliefs",
        ),
        "belief-MDP-driven controls would silently be scored on the agent's own actions",
    ),
    Mutation(
        "preflight-after-ray",
        "harness/runners/direct.py",
        (
            (
                "    preflight(config, context, checkpoint=True)  # bad input fails here, "
                "before Ray starts\n    ensure_ray(context)\n",
                "    ensure_ray(context)\n    preflight(config, context, checkpoint=True)\n",
            ),
        ),
        ("tests/harness/test_preflight.py::test_a_model_config_typo_is_one_line_before_ray",),
        "a model_config typo would fail only after Ray's start (seconds to minutes)",
    ),
    Mutation(
        "sweep-reruns-completed",
        "harness/sweep.py",
        (("        done = completed_run(run)\n", "        done = None\n"),),
        (
            "tests/harness/test_sweep.py::"
            "test_sweep_runs_the_grid_and_a_rerun_does_only_what_is_missing",
        ),
        "rerunning a sweep would repeat every completed run",
    ),
    # -- issue 49: ten bug classes of the newest code, and three properties tested directly ---
    Mutation(
        "set-bool-any-word",
        "harness/budgets.py",
        (("            return word in _TRUE\n", "            return bool(word)\n"),),
        ("tests/harness/test_set_words.py::test_set_bool_reads_each_word",),
        "--set greedy=false (off, 0, no) would hand the recipe True",
    ),
    Mutation(
        "set-float-accepts-inf",
        "harness/budgets.py",
        (("        if not math.isfinite(value):\n", "        if math.isnan(value):\n"),),
        ("tests/harness/test_set_words.py::test_set_float_refuses_a_non_finite_number",),
        "--set lr=inf would reach the recipe as a setting",
    ),
    Mutation(
        "sweep-options-argument-order",
        "harness/sweep.py",
        (("    return sorted(words)\n", "    return words\n"),),
        (
            "tests/harness/test_sweep_resume.py::"
            "test_a_rerun_with_options_in_another_order_is_done_before",
        ),
        "the same sweep with its flags in another order would train every run again",
    ),
    Mutation(
        "sweep-dead-child-reads-running",
        "harness/sweep.py",
        (
            (
                "return str(status) if status and status != RUNNING else FAILED",
                "return str(status) if status else FAILED",
            ),
        ),
        (
            "tests/harness/test_sweep_resume.py::"
            "test_a_child_that_died_with_its_manifest_running_is_failed",
        ),
        "a child that died with its manifest saying running would be reported running",
    ),
    Mutation(
        "tune-preflight-after-ray",
        "harness/runners/tune.py",
        (
            (
                "    if not param_space:  # search entries may complete the base config: Tune "
                "checks those\n        preflight(config, context, checkpoint=False)\n"
                "    ensure_ray(context)\n",
                "    ensure_ray(context)\n    if not param_space:\n"
                "        preflight(config, context, checkpoint=False)\n",
            ),
        ),
        ("tests/harness/test_tune_preflight.py",),
        "a Tune recipe's typo would fail only after Ray's start (seconds to minutes)",
    ),
    Mutation(
        "token-guess-pools-unfinished-runs",
        "mess3_token_guess/synthesis/experiment.py",
        (
            (
                '            if record.get("status") != "completed":\n',
                "            if not record:\n",
            ),
        ),
        (
            "tests/study/test_synthesis_run_selection.py::"
            "test_only_completed_runs_of_the_budget_are_pooled[mess3_token_guess]",
        ),
        "the token-guess synthesis would pool failed and still-running runs with completed ones",
        root=EXPERIMENTS,
    ),
    Mutation(
        "closed-loop-counts-reset-steps",
        "envs/hmm/action_tasks.py",
        (
            (
                "live = ~restarting  # the step after truncation only resets (reward 0)",
                "live = np.ones_like(restarting)",
            ),
        ),
        ("tests/envs/test_closed_loop_restarts.py",),
        "the reset-only step after each truncation would count as a step of the policy",
    ),
    Mutation(
        "redaction-shortest-first",
        "harness/redaction.py",
        (
            (
                "{s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True",
                "{s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len",
            ),
        ),
        ("tests/harness/test_redaction_nested_secrets.py",),
        "a secret containing a shorter one would leak its tail after the shorter one's marker",
    ),
    Mutation(
        "config-secret-camel-case",
        "harness/configrecord.py",
        (
            (
                'words = re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\\1_\\2", key)'
                ".lower())",
                'words = re.split(r"[^a-z0-9]+", key.lower())',
            ),
        ),
        ("tests/harness/test_config_secret_camel_case.py",),
        "authToken and clientSecret values would reach config.json in clear",
    ),
    Mutation(
        "action-bins-on-all-episodes",
        "analysis/controls.py",
        (
            (
                "bins = quantile_bins(actions, n_bins, fit=actions[fit_episodes])",
                "bins = quantile_bins(actions, n_bins, fit=actions)",
            ),
        ),
        ("tests/study/test_belief_geometry_action_bins.py",),
        "the flagship's action bins would be cut with the held-out episodes' actions",
    ),
    Mutation(
        "record-budget-ignores-smoke",
        "harness/runtools/records.py",
        (
            (
                '        if options.get("smoke"):\n            return "smoke"\n'
                '        budget = options.get("budget")\n',
                '        budget = options.get("budget")\n',
            ),
        ),
        ("tests/tools/test_record_budget_before_names.py",),
        "a smoke run recorded before budgets had names would pool as 'unrecorded'",
    ),
    Mutation(
        "random-features-standardized-on-all",
        "analysis/yardstick.py",
        (
            (
                "    flat = x[train].reshape(-1, x.shape[2])\n",
                "    flat = x.reshape(-1, x.shape[2])\n",
            ),
        ),
        (
            "tests/analysis/test_random_features_properties.py::"
            "test_fit_episodes_features_ignore_the_held_out_inputs",
        ),
        "the random-feature baseline's standardization would see the held-out episodes",
    ),
    Mutation(
        "random-features-weight-scale",
        "analysis/yardstick.py",
        (
            (
                "rng.normal(0.0, 1.0 / np.sqrt(x.shape[2]), size=(x.shape[2], width))",
                "rng.normal(0.0, 1.0 / x.shape[2], size=(x.shape[2], width))",
            ),
        ),
        (
            "tests/analysis/test_random_features_properties.py::"
            "test_pre_activations_have_unit_variance_on_the_fit_steps",
        ),
        "the random features' weights at the wrong scale (pre-activations not of unit variance)",
    ),
    Mutation(
        "sweep-values-whole",
        "harness/sweep.py",
        (("        values = split_top_level(text)\n", "        values = [text]\n"),),
        (
            "tests/harness/test_sweep_values.py::"
            "test_values_give_arms_each_a_full_run_and_a_rerun_does_only_what_is_missing",
        ),
        "`--set lr=1e-4,3e-4` would reach every run whole instead of giving two arms",
    ),
    Mutation(
        "machine-os-not-compared",
        "harness/runtools/machine.py",
        (('    "hardware.os",  # kernel build and glibc (libm) version\n', ""),),
        (
            "tests/tools/test_machine_differences.py::"
            "test_diff_names_the_machine_fields_with_both_values",
            "tests/analysis/test_analyze_stages.py::"
            "test_a_run_from_another_machine_is_noted_not_refused",
        ),
        "a rebuild on another kernel build would differ at float rounding with nothing said",
    ),
    Mutation(
        "machine-unknown-compared",
        "harness/runtools/machine.py",
        (("        elif found and value is not None:", "        elif found:"),),
        (
            "tests/tools/test_machine_differences.py::"
            "test_this_machine_reads_as_a_manifest_records_it",
        ),
        "a fact one machine could not read (null) would be named as a difference",
    ),
    Mutation(
        "untimed-pipeline-not-installed",
        "learners/connectors/batched_acting.py",
        (
            (
                "    return [UntimedPipeline(connectors=pieces)] if untimed else pieces\n",
                "    return pieces\n",
            ),
        ),
        (
            "tests/study/test_batched_sampling.py::"
            "test_untimed_pipelines_sample_the_episodes_the_timed_pieces_sample[flagship]",
        ),
        "the acting pieces back in RLlib's pipeline, each timed every vector step: the "
        "sampling cut silently lost",
    ),
    Mutation(
        "replay-chunks-restart-cache",
        "analysis/replay.py",
        (
            (
                "                residuals, state = module.encode_sequence_residuals(batch)",
                "                residuals, _ = module.encode_sequence_residuals(batch)",
            ),
        ),
        (
            "tests/analysis/test_replay_steps_per_call.py::"
            "test_the_agents_own_greedy_play_replayed_64_steps_per_call_equals_its_stepping",
        ),
        "a replay read 64 steps per call would start each chunk from an empty cache, not the "
        "one stepping carried: the layer and over-training probes would read another model",
    ),
    Mutation(
        "replay-feeds-executed-actions",
        "analysis/replay.py",
        (("    if rollouts.module_actions is not None:\n", "    if False:\n"),),
        (
            "tests/analysis/test_prev_action_rollouts.py::"
            "test_replay_feeds_the_modules_own_actions_when_a_transform_maps_them",
        ),
        "a module reading its previous action would be replayed on the env's unsquashed "
        "actions, not the samples it read while acting",
    ),
]


class _Stop(BaseException):
    """SIGTERM, raised in the main thread so the restore in `finally` runs."""


def _on_sigterm(signum, _frame):
    raise _Stop(signum)


def _pytest(tests: tuple[str, ...], timeout: float) -> tuple[int, float, str]:
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return -1, time.perf_counter() - started, "timed out"
    tail = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, time.perf_counter() - started, tail[-1] if tail else ""


def _stale(mutation: Mutation) -> str | None:
    path = mutation.path
    if not path.is_file():
        return f"{mutation.file} does not exist"
    text = path.read_text()
    for original, _ in mutation.edits:
        if text.count(original) != 1:
            return f"{mutation.file}: {original!r} occurs {text.count(original)} times, not once"
    return None


def _restore(
    mutation: Mutation, path: Path, original_bytes: bytes, stat: os.stat_result, planted: str
) -> None:
    """Put the original back, byte for byte and with its mtime. If the file changed while the
    mutant ran (someone edited it in the same checkout), undo only the mutant's edits in the
    new text, so their work survives, and say so."""
    current = path.read_text()
    if current == planted:
        path.write_bytes(original_bytes)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        return
    problems = []
    for original, mutant in mutation.edits:
        if mutant and current.count(mutant) == 1:
            current = current.replace(mutant, original)
        else:
            problems.append(f"{mutant!r} no longer occurs once; restore {original!r} by hand")
    path.write_text(current)
    print(
        f"mutation_check: {mutation.file} changed while {mutation.name} ran; undid the mutant's "
        "edits in the changed file" + "".join(f"\n  {p}" for p in problems),
        file=sys.stderr,
    )


def run_one(mutation: Mutation, timeout: float) -> tuple[str, float, str]:
    path = mutation.path
    original_bytes = path.read_bytes()
    stat = path.stat()
    text = original_bytes.decode()
    for original, mutant in mutation.edits:
        text = text.replace(original, mutant)
    try:
        path.write_text(text)
        # A different mtime invalidates the cached bytecode of the original (and vice versa).
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**10))
        code, seconds, tail = _pytest(mutation.tests, timeout)
    finally:
        _restore(mutation, path, original_bytes, stat, text)
    # 1: tests failed; 2: collection/import error caused by the mutant. Both kill it.
    verdict = {0: "SURVIVED", 1: "killed", 2: "killed"}.get(code, "error")
    return verdict, seconds, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only these mutations (default: all)")
    parser.add_argument("--list", action="store_true", help="print the mutations and exit")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per pytest run")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip running the tests unmutated first"
    )
    args = parser.parse_args(argv)
    known = {m.name: m for m in MUTATIONS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown mutation(s) {unknown}; known: {', '.join(known)}")
    chosen = [known[n] for n in args.names] if args.names else MUTATIONS

    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.path.relative_to(ROOT)} ({m.why})")
            for original, mutant in m.edits:
                print(f"    - {original.strip()}\n    + {mutant.strip()}")
            print(f"    killed by: {' '.join(m.tests)}")
        return 0

    stale = [(m.name, problem) for m in chosen if (problem := _stale(m))]
    for name, problem in stale:
        print(f"mutation_check: stale entry {name}: {problem}", file=sys.stderr)
    if stale:
        return 2

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if not args.no_baseline:
            tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
            code, seconds, tail = _pytest(tests, args.timeout * 2)
            print(f"baseline ({len(tests)} test targets, unmutated): {tail} [{seconds:.0f} s]")
            if code != 0:
                print("mutation_check: the tests fail without any mutation", file=sys.stderr)
                return 2
        results = []
        for m in chosen:
            verdict, seconds, tail = run_one(m, args.timeout)
            results.append(verdict)
            print(f"{verdict:<8} {m.name:<36} {seconds:6.1f} s  {tail}", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    killed = results.count("killed")
    print(f"{killed}/{len(results)} mutants killed")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
