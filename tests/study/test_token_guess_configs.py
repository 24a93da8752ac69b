"""Fast checks of the token-guess study (experiments.mess3_token_guess): each training leaf
builds the config the issue specifies for every budget, each is the study's spec but for
what it states (ppo and supervised: their loss), the exact ceilings, the checkpoint
schedule (step 0 and log-spaced) and the checkpoints the analysis probes, the passive probe
episodes and the synthesis tables."""

from __future__ import annotations

import dataclasses
import importlib
import json
from dataclasses import asdict

import numpy as np
import pytest
import torch
from experiments.mess3_token_guess import shared, spec
from experiments.mess3_token_guess.synthesis import experiment as synthesis
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner

from rl_harness import make_context
from rl_harness.analysis import RunArtifacts, collect_rollouts, info_target
from rl_harness.envs.hmm import ENV_ID, HMMEnvConfig, HMMVectorEnv
from rl_harness.envs.mess3 import bayes_optimal_next_token_reward
from rl_harness.learners.models import TransformerActorCritic
from rl_harness.losses import InfoTargetsToBatch, SupervisedNextTokenLossMixin
from tests.study.spec_check import changed_keys

STUDY = "experiments.mess3_token_guess"
TRAINING_LEAVES = {
    "ppo": f"{STUDY}.ppo.experiment",
    "supervised": f"{STUDY}.supervised.experiment",
    "ppo_default_init": f"{STUDY}.ppo_default_init.experiment",
}
# The original study's initialisation (issue 37), and the library default the ablation states.
ORIGINAL_INIT = {"init": "normal", "init_std": 0.02, "pi_output_scale": 1.0, "vf_output_scale": 1.0}
DEFAULT_INIT = {"init": "torch_default", "pi_output_scale": 0.01, "vf_output_scale": 1.0}
LEAF_INIT = {"ppo": ORIGINAL_INIT, "supervised": ORIGINAL_INIT, "ppo_default_init": DEFAULT_INIT}
PAPER_MODEL = {
    "context_len": 10,
    "feature_dim": 3,
    "newest_first": True,
    "d_model": 64,
    "num_layers": 4,
    "num_heads": 1,
    "d_head": 8,
    "ff_dim": 256,
    "mlp_activation": "relu",
    "positions": "learned",
    "final_norm": True,
    "train_forward": "prefix_shared",  # the learner's forward; same function (issue 38)
}


def recipe(leaf: str):
    return importlib.import_module(TRAINING_LEAVES[leaf])


def budgets(module):
    return {"SMOKE": module.SMOKE, "CPU": module.CPU, "FULL": module.FULL}


def _built_module(config):
    env = HMMVectorEnv(1, config.env_config)
    spec = config.rl_module_spec
    spec.observation_space, spec.action_space = (
        env.single_observation_space,
        env.single_action_space,
    )
    env.close()
    return spec.build(), env


@pytest.mark.parametrize("plan_name", ["SMOKE", "CPU", "FULL"])
@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_leaf_builds_the_issues_config(leaf, plan_name):
    module = recipe(leaf)
    plan = budgets(module)[plan_name]
    config = module.build_config(plan)
    config.validate()
    assert config.env == ENV_ID
    env_config = HMMEnvConfig.from_mapping(config.env_config)  # the env's own validation
    assert env_config.model == "rl_harness.envs.mess3:mess3_model"
    assert env_config.model_kwargs == {"x": 0.05, "alpha": 0.85}
    assert env_config.task == "rl_harness.envs.mess3.tasks:NextTokenTask"
    # Token-only observations: the last 10 tokens, nothing else.
    assert (env_config.token_window, env_config.action_window) == (10, 0)
    assert not (env_config.include_belief or env_config.include_state)
    assert not env_config.include_decision_belief and env_config.observation_delay == 0
    assert config.train_batch_size_per_learner == plan.train_batch
    assert config.minibatch_size == plan.minibatch and config.num_epochs == plan.num_epochs
    assert (config.lr, config.gamma, config.lambda_, config.entropy_coeff) == (1e-4, 0.0, 0.0, 0.0)
    built, env = _built_module(config)
    assert isinstance(built, TransformerActorCritic) and not built.is_stateful()
    assert config.rl_module_spec.model_config == PAPER_MODEL | LEAF_INIT[leaf]
    assert env.single_observation_space.shape == (30,)  # 10 one-hot tokens
    # The original init builds the input projection without its 64 biases.
    original = LEAF_INIT[leaf] is ORIGINAL_INIT
    assert sum(p.numel() for p in built.parameters()) == 143_204 - 64 * original
    assert issubclass(config.learner_class, PPOTorchLearner)
    supervised = leaf == "supervised"
    assert issubclass(config.learner_class, SupervisedNextTokenLossMixin) is supervised
    pipeline = config.build_learner_connector(env.single_observation_space, env.single_action_space)
    ours = [c for c in pipeline.connectors if isinstance(c, InfoTargetsToBatch)]
    if supervised:
        assert [c.targets for c in ours] == [{"next_token": ("token", 1)}]
        assert "token" in env_config.info
    else:
        assert ours == [] and env_config.info == ()
        assert (config.clip_param, config.vf_loss_coeff) == (0.2, 0.5)
    assert module.build_config(plan) is not config


@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_budgets_are_what_the_recipe_states(leaf, tmp_path):
    module = recipe(leaf)
    smoke, cpu, full = module.SMOKE, module.CPU, module.FULL
    assert smoke.iterations * smoke.train_batch <= 2048
    for plan in (cpu, full):
        assert (plan.train_batch, plan.minibatch, plan.num_epochs) == (32_768, 4096, 6)
    assert full.iterations * full.train_batch >= 2_500_000
    assert (full.iterations - 1) * full.train_batch < 2_500_000  # the least that reaches it
    assert cpu.iterations < full.iterations
    for plan in (smoke, cpu, full):
        assert plan.warmup_steps >= shared.TOKEN_WINDOW  # probes read full windows
        assert plan.warmup_steps + plan.probe_steps <= shared.EPISODE_LENGTH
        assert plan.probe_episodes >= 4

    def context(**options):
        return make_context(tmp_path, experiment_module=TRAINING_LEAVES[leaf], **options)

    # Chosen by name, never by the hardware: a GPU profile still runs the default CPU budget.
    assert module.BUDGETS == {"smoke": smoke, "cpu": cpu, "full": full}
    assert context(smoke=True).settings == smoke
    assert context().settings == cpu and context().budget == module.DEFAULT_BUDGET == "cpu"
    assert context(hardware_profile="single-gpu").settings == cpu
    assert context(budget="full", hardware_profile="single-gpu").settings == full


def _science(config) -> dict:
    """What both leaves must share: the env (but its info), the model, sampling, the budget's
    training part and the optimizer."""
    env = {k: v for k, v in config.env_config.items() if k != "info"}
    keys = ("num_envs_per_env_runner", "train_batch_size_per_learner", "minibatch_size")
    keys += ("num_epochs", "lr", "gamma", "lambda_", "entropy_coeff", "seed")
    return {k: getattr(config, k) for k in keys} | {
        "env": env,
        "model": config.rl_module_spec.model_config,
        "module": config.rl_module_spec.module_class,
    }


# What each leaf states beyond the spec (spec.py): the config.to_dict() keys it changes.
STATED = {
    "ppo": {"clip_param", "vf_loss_coeff"},  # PPO's loss settings (use_kl_loss: RLlib's)
    "ppo_default_init": {"clip_param", "vf_loss_coeff", "_rl_module_spec"},
    "supervised": {"env_config", "_learner_class", "_learner_connector"},
}


@pytest.mark.parametrize("plan_name", ["SMOKE", "CPU", "FULL"])
@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_each_leaf_is_the_spec_but_for_what_it_states(leaf, plan_name):
    module = recipe(leaf)
    assert module.BUDGETS is spec.BUDGETS and module.DEFAULT_BUDGET == spec.DEFAULT_BUDGET
    plan = budgets(spec)[plan_name]
    base = spec.ppo_config(plan)
    own = module.build_config(plan)
    changed = changed_keys(base, own)
    assert changed == STATED[leaf]
    if leaf == "supervised":
        assert own.env_config == base.env_config | {"info": ["token"]}
    assert synthesis.TRAINING_LEAVES == ("ppo", "supervised", "ppo_default_init")


@pytest.mark.parametrize("plan_name", ["SMOKE", "CPU", "FULL"])
def test_init_ablation_differs_from_ppo_only_in_the_initialisation(plan_name):
    ppo, ablation = recipe("ppo"), recipe("ppo_default_init")
    a = ppo.build_config(budgets(ppo)[plan_name])
    b = ablation.build_config(budgets(ablation)[plan_name])
    keys = ("clip_param", "vf_loss_coeff", "learner_class")
    assert {k: getattr(a, k) for k in keys} == {k: getattr(b, k) for k in keys}
    science_a, science_b = _science(a), _science(b)
    model_a, model_b = science_a.pop("model"), science_b.pop("model")
    assert science_a == science_b and a.env_config == b.env_config
    assert {k: v for k, v in model_a.items() if k not in ORIGINAL_INIT} == {
        k: v for k, v in model_b.items() if k not in ORIGINAL_INIT
    }
    assert (model_a | DEFAULT_INIT) == model_b | {"init_std": 0.02}
    assert asdict(budgets(ppo)[plan_name]) == asdict(budgets(ablation)[plan_name])


@pytest.mark.parametrize("leaf", sorted(TRAINING_LEAVES))
def test_each_leaf_states_its_init_and_config_json_records_it(leaf):
    """Every training leaf states all its initialisation keys in MODEL_CONFIG, and the record
    the harness writes as config.json holds them resolved under module.init."""
    from rl_harness.harness.configrecord import config_record

    module = recipe(leaf)
    config = module.build_config(module.SMOKE)
    stated = {k: v for k, v in config.rl_module_spec.model_config.items() if k in ORIGINAL_INIT}
    assert stated == LEAF_INIT[leaf]
    record = json.loads(json.dumps(config_record(config)))
    assert record["module"]["init"] == {"init_std": None} | LEAF_INIT[leaf]


def test_ceilings_are_exact_and_agree_with_filtering():
    values = shared.ceilings()
    # The newest-token ceiling by hand: sum_k max_j P(x1 = k, x2 = j) from the stationary
    # start (MESS3's is uniform), P(k, j) = pi T(k) T(j) 1.
    hmm = shared.model()
    pi, tokens = hmm.stationary_distribution(), hmm.token_matrices
    pairs = np.einsum("i,kij,mjl->km", pi, tokens, tokens)
    assert values["newest_token_accuracy"] == pytest.approx(pairs.max(axis=1).sum(), abs=1e-12)
    assert values["bayes_optimal_accuracy"] == pytest.approx(0.689577, abs=1e-6)
    # Ten tokens already give what unbounded memory gives, to 1e-6; the long-run filtering
    # estimate (a Monte Carlo average over exact beliefs) agrees within its noise.
    assert values["bayes_optimal_accuracy_12_tokens"] == pytest.approx(
        values["bayes_optimal_accuracy"], abs=1e-6
    )
    assert bayes_optimal_next_token_reward(hmm) == pytest.approx(
        values["bayes_optimal_accuracy"], abs=2e-3
    )
    assert values["newest_token_accuracy"] < values["bayes_optimal_accuracy"]
    assert values["window_entropy_bits"] == pytest.approx(1.1447, abs=5e-4)  # ~1.15 bits
    assert values["token_entropy_bits"] == pytest.approx(np.log2(3))


def _saved_iterations(schedule, plan) -> list[int]:
    """The iterations a direct run saves under `schedule`: step 0 when `at_start`, those
    the schedule's `reasons` name after each iteration, and the last (the runners' final
    checkpoint)."""
    saved = [0] if schedule.at_start else []
    for iteration in range(1, plan.iterations + 1):
        if schedule.reasons(
            iteration,
            iteration * plan.train_batch,
            previous_iteration=iteration - 1,
            previous_env_steps=(iteration - 1) * plan.train_batch,
        ):
            saved.append(iteration)
    return saved if saved[-1] == plan.iterations else [*saved, plan.iterations]


def test_checkpoint_schedule_saves_step_0_and_log_spaced_iterations():
    schedule = shared.checkpoint_schedule()
    assert schedule.at_start  # the run's own initial weights: the step-0 probe
    assert schedule.every == 0  # no checkpoint per iteration: only what the analysis probes
    for leaf in TRAINING_LEAVES:
        module = recipe(leaf)
        assert _saved_iterations(schedule, module.SMOKE) == [0, 1]
        assert _saved_iterations(schedule, module.CPU) == [0, 1, 2, 4, 8, 16, 24]
        assert _saved_iterations(schedule, module.FULL) == [0, 1, 2, 4, 8, 16, 32, 64, 77]


def _checkpoint(artifacts, iteration) -> str:
    folder = artifacts / "checkpoints" / f"iter_{iteration:06d}"
    folder.mkdir(parents=True)
    (folder / "rllib_checkpoint.json").write_text("{}")
    return f"checkpoints/iter_{iteration:06d}"


def test_probe_points_are_the_runs_own_checkpoints_from_step_0(tmp_path):
    results, artifacts = tmp_path / "results" / "r", tmp_path / "artifacts" / "r"
    results.mkdir(parents=True)
    (results / "summary.json").write_text(json.dumps({"run_id": "r"}))
    rows = [
        {"iteration": 0, "env_steps": 0, "path": _checkpoint(artifacts, 0), "reasons": ["start"]},
        {"iteration": 1, "env_steps": 100, "path": _checkpoint(artifacts, 1), "reasons": ["log"]},
        # recorded, then deleted: not probed
        {"iteration": 2, "env_steps": 200, "path": "checkpoints/iter_000002", "reasons": ["log"]},
        {
            "iteration": 3,
            "env_steps": None,
            "path": _checkpoint(artifacts, 3),
            "reasons": ["final"],
        },
    ]
    # written newest first: the probe still goes oldest first
    (results / "checkpoints.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[::-1]))
    metrics = [
        {"training_iteration": i, "num_env_steps_sampled_lifetime": 100 * i} for i in (1, 2, 3)
    ]
    (results / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in metrics))
    points = shared.probe_points(RunArtifacts.open(results))
    assert [(p.iteration, p.env_steps, p.reasons) for p in points] == [
        (0, 0, ("start",)),
        (1, 100, ("log",)),
        (3, 300, ("final",)),  # env steps from metrics.jsonl where the row lacks them
    ]
    assert [p.path for p in points] == [
        (artifacts / "checkpoints" / f"iter_{i:06d}").resolve() for i in (0, 1, 3)
    ]
    for row in rows:
        if row["iteration"] != 2:
            path = artifacts / row["path"]
            (path / "rllib_checkpoint.json").unlink()
    with pytest.raises(RuntimeError, match="no local checkpoint"):
        shared.probe_points(RunArtifacts.open(results))


def test_summary_step_0_fields_come_only_from_step_0():
    def point(iteration, value):
        return {
            "iteration": iteration,
            "env_steps": iteration * 10,
            "greedy_accuracy": value,
            "r2": value,
            "r2_within_branch": value,
            "fraction_of_bayes_optimal": value,
        }

    record = {
        "env_steps": 40,
        "ceilings": {"bayes_optimal_accuracy": 0.69, "newest_token_accuracy": 0.67},
        "training_wall_time_s": 1.0,
        "analysis_wall_time_s": 2.0,
        "checkpoints": [point(0, 0.1), point(4, 0.6)],
    }
    summary = shared.summary(4, record)
    assert (summary.value("step0_probe_r2"), summary.value("probe_r2")) == (0.1, 0.6)
    # A resumed run has no step-0 checkpoint: its first probe is not called step 0.
    resumed = shared.summary(4, record | {"checkpoints": [point(2, 0.4), point(4, 0.6)]})
    assert resumed.value("step0_probe_r2") is None
    assert resumed.value("step0_greedy_accuracy") is None


def test_expected_accuracy_is_the_chosen_tokens_probability():
    hmm = shared.model()
    beliefs = np.array([[[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]]])
    # P(next token | state 0) = (alpha, b, b) after the move: state 0 stays with 1 - 2x.
    next_tokens = beliefs @ hmm.token_matrices.sum(axis=2).T
    result = shared.expected_accuracy(hmm, beliefs, np.array([[0, 0]]))
    assert result["greedy"] == pytest.approx((next_tokens[0, 0, 0] + next_tokens[0, 1, 0]) / 2)
    assert result["bayes_optimal"] == pytest.approx(next_tokens.max(-1).mean())
    assert result["greedy"] < result["bayes_optimal"]  # token 0 is wrong for the 2nd belief


def _module(spec, seed):
    """The leaf's architecture with fresh weights seeded from `seed`."""
    env = shared._probe_env(1)
    spec = dataclasses.replace(
        spec,
        observation_space=env.single_observation_space,
        action_space=env.single_action_space,
    )
    env.close()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.build()


def test_probe_episodes_are_the_same_for_every_module():
    # Passive process + seeded episodes: two different modules see the same tokens and
    # beliefs (what lets the analysis compare checkpoints on one set of episodes).
    spec = recipe("ppo").module_spec()
    rollouts = [
        collect_rollouts(
            _module(spec, seed),
            shared._probe_env,
            n_episodes=4,
            episode_steps=20,
            warmup_steps=12,
            seed=3,
            target=info_target("belief"),
            num_envs=4,
            representation=shared.residual_reader,
        )
        for seed in (1, 2)
    ]
    assert np.array_equal(rollouts[0].observations, rollouts[1].observations)
    assert np.array_equal(rollouts[0].targets, rollouts[1].targets)
    assert not np.array_equal(rollouts[0].representations, rollouts[1].representations)
    names = shared.residual_names(_module(spec, 1))
    assert names == ["embed", "block_1", "block_2", "block_3", "block_4", "final_norm"]
    assert rollouts[0].representations.shape == (4, 20, 6 * 64)
    # The windows are full after the warm-up: every one of the 10 positions holds a token.
    assert np.all(rollouts[0].observations.reshape(4, 20, 10, 3).sum(-1) == 1)


def _write_run(root, leaf, name, points, smoke=False, budget=None, gpus=0):
    folder = root / leaf / "results" / name
    folder.mkdir(parents=True)
    manifest = {
        "status": "completed",
        "options": {"smoke": smoke, **({"budget": budget} if budget else {})},
        "hardware": {"plan": {"num_gpus_per_learner": gpus}},
    }
    (folder / "run_manifest.json").write_text(json.dumps(manifest))
    (folder / "probe_metrics.json").write_text(json.dumps({"checkpoints": points}))
    return folder


def test_synthesis_tables_over_training(tmp_path):
    def point(steps, accuracy, r2, within):
        return {
            "env_steps": steps,
            "greedy_accuracy": accuracy,
            "r2": r2,
            "r2_within_branch": within,
        }

    _write_run(tmp_path, "ppo", "a", [point(0, 0.3, 0.8, None), point(100, 0.6, 0.9, 0.5)])
    _write_run(tmp_path, "ppo", "b", [point(0, 0.3, 0.8, None), point(100, 0.7, 0.95, 0.7)])
    _write_run(tmp_path, "supervised", "c", [point(0, 0.3, 0.8, None)])
    _write_run(tmp_path, "supervised", "d", [point(0, 0.2, 0.1, 0.1)], smoke=True)
    # Other budgets are never pooled: a run recorded by name, and one recorded before budgets
    # had names on a GPU plan (its recipe then chose FULL).
    _write_run(tmp_path, "ppo", "e", [point(0, 0.9, 0.9, 0.9)], budget="full")
    _write_run(tmp_path, "ppo", "f", [point(0, 0.9, 0.9, 0.9)], gpus=1)
    _write_run(tmp_path, "ppo", "g", [point(0, 0.6, 0.9, 0.5)], budget="cpu")
    folders, others = synthesis.run_folders(tmp_path, "cpu")
    assert {leaf: [p.name for p in paths] for leaf, paths in folders.items()} == {
        "ppo": ["a", "b", "g"],
        "supervised": ["c"],
    }
    assert others == {"smoke": ["d"], "full": ["e", "f"]}
    assert "left out: full: e, f; smoke: d" in synthesis.budget_markdown("cpu", others)
    folders = {"ppo": folders["ppo"][:2], "supervised": folders["supervised"]}
    table = synthesis.over_training(folders)
    last = table["ppo"][1]
    assert (last["env_steps"], last["n_runs"]) == (100, 2)
    assert last["greedy_accuracy"] == pytest.approx({"mean": 0.65, "min": 0.6, "max": 0.7})
    assert last["r2_within_branch"] == pytest.approx({"mean": 0.6, "min": 0.5, "max": 0.7})
    assert table["ppo"][0]["r2_within_branch"] is None  # undefined in every run
    markdown = synthesis.over_training_markdown(table)
    assert "| ppo | 100 | 2 | 0.650 (0.600-0.700) | 0.925 (0.900-0.950) |" in markdown
    assert "| supervised | 0 | 1 | 0.300 | 0.800 | undefined |" in markdown
    path = synthesis.plot_over_training(tmp_path / "over.png", table)
    assert path.stat().st_size > 10_000


def _with_library(folder, commit, sources):
    path = folder / "run_manifest.json"
    manifest = json.loads(path.read_text())
    manifest["library"] = {"commit": commit, "sources": sources}
    path.write_text(json.dumps(manifest))


def test_synthesis_accepts_two_commits_only_when_training_code_is_the_same(tmp_path):
    base = {"learners/x.py": "1", "harness/storage/upload.py": "a", "envs/y.py": "2"}
    a = _write_run(tmp_path, "ppo", "a", [])
    b = _write_run(tmp_path, "supervised", "b", [])
    _with_library(a, "c1", base)
    _with_library(b, "c2", {**base, "harness/storage/upload.py": "b"})
    same = synthesis.library_source_differences([a, b])
    assert same["differing_files"] == ["harness/storage/upload.py"]
    assert same["same_code_for_training"] is True
    assert "harness/storage/upload.py" in synthesis.library_markdown(same)
    _with_library(b, "c2", {**base, "learners/x.py": "changed"})
    other = synthesis.library_source_differences([a, b])
    assert other["differing_files"] == ["learners/x.py"]
    assert other["same_code_for_training"] is False
    _with_library(b, "c2", {**base, "losses/x.py": "3"})  # a file only one run loaded
    assert synthesis.library_source_differences([a, b])["differing_files"] == []
    _with_library(b, "c1", base)
    assert synthesis.library_markdown(synthesis.library_source_differences([a, b])) == ""


def test_synthesis_pairs_within_branch_r2_by_seed():
    def record(step0, end):
        return {
            "checkpoints": [
                {"env_steps": 0, "r2_within_branch": step0},
                {"env_steps": 100, "r2_within_branch": end},
            ]
        }

    original, default = "normal 0.02, pi x1, vf x1", "torch_default, pi x0.01, vf x1"
    ppo, supervised = synthesis.Arm("ppo", original), synthesis.Arm("supervised", original)
    ablation = synthesis.Arm("ppo_default_init", default)
    records = {
        ppo: {0: record(0.5, 0.8), 1: record(0.4, 0.6), 2: record(0.5, 0.7)},
        supervised: {0: record(0.5, 0.9), 1: record(0.4, 0.95), 2: record(0.5, 1.0)},
        ablation: {0: record(0.5, 0.6), 1: record(0.4, 0.5)},
        # another init of supervised: no supervised - ppo pair across initialisations
        synthesis.Arm("supervised", default): {0: record(0.5, 0.9)},
    }
    controls = {0: {"r2_within_branch": 0.3}, 1: {"r2_within_branch": 0.2}, 2: {}}
    rows = {r["difference"]: r for r in synthesis.paired_differences(records, controls)}
    gain = rows[f"ppo [{original}] end - its step 0"]
    assert gain["per_seed"] == pytest.approx({"0": 0.3, "1": 0.2, "2": 0.2})
    # mean 0.2333, sd 0.0577, t(0.975, 2) = 4.303: half width 0.1434
    assert gain["mean"] == pytest.approx(0.23333, abs=1e-4)
    assert gain["high"] - gain["mean"] == pytest.approx(0.1434, abs=1e-3)
    window = rows[f"ppo [{original}] end - raw window"]
    assert window["per_seed"]["2"] is None and window["n"] == 2
    between = [name for name in rows if "end - ppo" in name or "end - supervised" in name]
    assert sorted(between) == [
        f"ppo [{original}] end - ppo_default_init [{default}] end",
        f"supervised [{original}] end - ppo [{original}] end",
    ]
    assert rows[between[1]]["per_seed"] == pytest.approx({"0": 0.1, "1": 0.35, "2": 0.3})
    assert rows[between[0]]["per_seed"] == pytest.approx({"0": 0.2, "1": 0.1})  # seeds of both
    markdown = synthesis.controls_markdown(
        {0: {"r2": 0.9, "r2_within_branch": 0.3}}, list(rows.values())
    )
    assert (
        f"| ppo [{original}] end - its step 0 | s0 0.300, s1 0.200, s2 0.200 "
        "| +0.233 [+0.090, +0.377] |" in markdown
    )


def _with_config(folder, model_config, init=None):
    module = {"class": "x", "model_config": model_config} | ({"init": init} if init else {})
    (folder / "config.json").write_text(json.dumps({"module": module}))


def test_synthesis_arms_split_leaves_by_recorded_init_and_code(tmp_path):
    """Runs of one leaf with different initialisations, or of earlier training code, are
    separate arms; a run from before the init keys is labelled by the library default."""
    old = _write_run(tmp_path, "ppo", "20261205T000000Z-a", [])
    new = _write_run(tmp_path, "ppo", "20261206T000000Z-b", [])
    ablation = _write_run(tmp_path, "ppo_default_init", "20261206T000000Z-c", [])
    _with_config(old, PAPER_MODEL)  # no module.init: recorded before the keys existed
    _with_config(new, PAPER_MODEL | ORIGINAL_INIT, init={"init_std": 0.02} | ORIGINAL_INIT)
    _with_config(ablation, PAPER_MODEL | DEFAULT_INIT, init={"init_std": None} | DEFAULT_INIT)
    _with_library(old, "c0", {"learners/models/base.py": "old", "envs/y.py": "1"})
    for folder in (new, ablation):
        _with_library(folder, "c1", {"learners/models/base.py": "new", "envs/y.py": "1"})
    folders, _ = synthesis.run_folders(tmp_path, "cpu")
    current, earlier = synthesis.split_by_code([p for ps in folders.values() for p in ps])
    assert earlier == [old] and sorted(current) == sorted([new, ablation])
    arms = synthesis.arm_folders(folders, earlier)
    assert {arm.name: [p.name for p in paths] for arm, paths in arms.items()} == {
        "ppo [torch_default, pi x0.01, vf x1] (earlier code)": [old.name],
        "ppo [normal 0.02, pi x1, vf x1]": [new.name],
        "ppo_default_init [torch_default, pi x0.01, vf x1]": [ablation.name],
    }
    # Earlier code is never paired; the init ablation is.
    assert [(a.leaf, b.leaf) for a, b in synthesis.contrasts(list(arms))] == [
        ("ppo", "ppo_default_init")
    ]


@pytest.mark.parametrize("plan_name", ["SMOKE", "CPU", "FULL"])
def test_kl_ablation_is_ppo_but_for_the_kl_term(plan_name):
    """`ppo_no_kl` (issue 52 item 5) is `ppo` with only `use_kl_loss=False` stated: the
    original study's PPO. Same budgets, model, init and every other config key."""
    ppo, ablation = recipe("ppo"), importlib.import_module(f"{STUDY}.ppo_no_kl.experiment")
    assert ablation.BUDGETS is spec.BUDGETS and ablation.DEFAULT_BUDGET == spec.DEFAULT_BUDGET
    a = ppo.build_config(budgets(ppo)[plan_name])
    b = ablation.build_config(budgets(ablation)[plan_name])
    assert changed_keys(a, b) == {"use_kl_loss"}
    b.validate()
    assert (a.use_kl_loss, b.use_kl_loss) == (True, False)
    assert b.rl_module_spec.model_config == PAPER_MODEL | ORIGINAL_INIT
    assert ablation.build_config(budgets(ablation)[plan_name]) is not b
