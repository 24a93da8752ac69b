"""An operating point where memory pays (issue 52, item 2), chosen with the exact solvers
before any training.

    uv run python -m experiments.mess3_belief_geometry.operating_point [--quick] [--table]

At the flagship's point a 3-token table earns ~96% of the belief-MDP ceiling and a 6-step
window of tokens and actions predicts the decision belief within branches with R² ~0.98:
memory beyond a window can hardly show there. This command searches the task's parameters
(`task.TaskPoint`: emission alpha, the chain's `mixing` (MESS3's x plays this part there:
how slowly the chain mixes), the action bound w_max, the KL weight beta, the delay) for a
point where BOTH

- the best stack-3 table found earns at most 80% of the belief-MDP ceiling
  (`rl_harness.envs.mess3.solvers`: belief_vi at the delay; solve_stack k = 1, 2, 3), and
- a window of the last 6 visible tokens and executed actions predicts the exact decision
  belief with within-branch R² at most 0.8,

and writes every candidate it visited to `operating_point.json` (next to this file).

Definitions (what each number is):

- ceiling: belief_vi's long-run reward per step at the point (grid 30, its defaults);
  stack_k: the best table on the last k visible tokens the solver's search found
  (a search, not a proof; each with its `converged` flag and seconds); fraction_k =
  stack_k / ceiling. The passive value (zero tilt) is 0.10 at every point (stationary
  occupancy of state 2, no KL), so fractions are of the whole ceiling, passive part included.
- window R² (`window_r2`): rollouts whose actions are the belief-MDP policy's greedy actions
  at the env's exact decision belief (`policy: belief_mdp`; a trained agent approaches this
  policy and its actions carry belief), in the flagship's analysis env (newest visible token
  and previous executed action in the observation, 1024-step episodes), `warmup_steps`
  played then `episode_steps` recorded per episode, episode i reset from the stream
  (operating_point, rollouts, <policy>, episode, i) of SEED. The window model is the
  study's window baseline (`rl_harness.analysis.fit_window_baselines` through
  `compare_with_windows`: the same MLP, seeds and held-out split the flagship's controls
  use), input the last k steps of (visible token one-hot, previous executed action),
  warm-up steps as history, fitted on the train episodes (75%) and scored on the held-out
  25%; target the exact decision belief; branches: equal last 2 visible tokens (the
  flagship's `tokens_2`). Both the within-branch and the global pooled R² are recorded,
  for k = 1..6. Where stack-3 was solved, the same is recorded with the stack-3 table's
  actions (`policy: stack_3`), whose actions are a function of the last 3 tokens.

The search (costs capped): a coarse screen of the grid COARSE (belief_vi, stack 1..2, the
window R² at reduced rollout size); stack_2 <= stack_3, so a screened point whose stack-2
fraction already exceeds the target cannot meet it and its stack-3 is not solved (recorded
as None). Then stack-3 for the screened points that can still qualify (and the most
memory-demanding ones), then a refinement around the best (`refine`), and the chosen
point re-scored at the flagship's probe size. `choose` picks the point: among those
meeting both bars the one with the smallest stack-3 fraction; else the most
memory-demanding visited (smallest max(fraction_3, window R²_6)), and says so.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from experiments.mess3_belief_geometry import probing, task
from experiments.mess3_belief_geometry.task import TaskPoint
from rl_harness.analysis import ProbeSettings, branch_ids, compare_with_windows, evaluate_probe
from rl_harness.seeding import stream_seed

RECORD = Path(__file__).with_name("operating_point.json")
SCHEMA_VERSION = 1
SEED = 0
FRACTION_BAR = 0.80  # the best stack-3 earns at most this share of the ceiling
WINDOW_BAR = 0.80  # the 6-step tokens+actions window's within-branch R² at most this
WINDOW_KS = (1, 2, 3, 4, 5, 6)
STACK_KS = (1, 2, 3)
STREAM = ("operating_point", "rollouts")


@dataclass(frozen=True)
class RolloutSize:
    episodes: int
    warmup_steps: int
    episode_steps: int


SCREEN_SIZE = RolloutSize(episodes=64, warmup_steps=256, episode_steps=512)
# The flagship's probe size (spec.CPU: 256 episodes, 256 warm-up, 512 recorded).
FLAGSHIP_SIZE = RolloutSize(episodes=256, warmup_steps=256, episode_steps=512)


@dataclass(frozen=True)
class SolverRun:
    """One solve: its value, whether every capped loop converged, and its seconds (the
    k - 1 solve it starts from was cached, so these are its own)."""

    value: float
    converged: bool
    iterations: int
    residual: float
    seconds: float


@dataclass(frozen=True)
class WindowScores:
    """Held-out pooled R² of the window baseline k = 1..6 on one policy's rollouts."""

    policy: str
    size: RolloutSize
    within_branch: dict[int, float | None]  # tokens_2 branches
    global_r2: dict[int, float | None]
    within_variance_share: float  # within-branch share of the held-out belief variance
    belief_variance: float  # the held-out belief's total variance (coordinates summed)
    return_per_step: float  # the policy's mean reward per recorded step
    seconds: float


@dataclass
class Candidate:
    point: TaskPoint
    stage: str  # "coarse", "refine", "flagship" (today's point)
    belief_mdp: SolverRun | None = None
    stacks: dict[int, SolverRun | None] = field(default_factory=dict)
    windows: list[WindowScores] = field(default_factory=list)

    def fraction(self, k: int) -> float | None:
        run = self.stacks.get(k)
        if run is None or self.belief_mdp is None:
            return None
        return run.value / self.belief_mdp.value

    def window_r2(self, k: int = 6, policy: str = "belief_mdp") -> float | None:
        for scores in self.windows:
            if scores.policy == policy:
                return scores.within_branch.get(k)
        return None

    def meets(self) -> bool:
        fraction, r2 = self.fraction(3), self.window_r2()
        return (
            fraction is not None
            and r2 is not None
            and fraction <= FRACTION_BAR
            and r2 <= WINDOW_BAR
        )

    def demand(self) -> float:
        """How far the point is from showing memory: max(stack fraction, window R²_6), the
        largest stack k solved; smaller is more memory-demanding."""
        k = max((k for k, run in self.stacks.items() if run is not None), default=None)
        fraction = self.fraction(k) if k is not None else None
        r2 = self.window_r2()
        if fraction is None or r2 is None:
            return float("inf")
        return max(fraction, r2)

    def to_dict(self) -> dict[str, Any]:
        return {
            "point": asdict(self.point),
            "stage": self.stage,
            "belief_mdp": None if self.belief_mdp is None else asdict(self.belief_mdp),
            "stacks": {
                str(k): None if run is None else asdict(run) for k, run in self.stacks.items()
            },
            "fractions": {str(k): self.fraction(k) for k in self.stacks},
            "windows": [_window_dict(scores) for scores in self.windows],
            "meets_both": self.meets(),
        }


def _window_dict(scores: WindowScores) -> dict[str, Any]:
    out = asdict(scores)
    out["within_branch"] = {str(k): v for k, v in scores.within_branch.items()}
    out["global_r2"] = {str(k): v for k, v in scores.global_r2.items()}
    return out


def _timed(solve: Callable[[], Any]) -> SolverRun:
    start = time.perf_counter()
    solution = solve()
    return SolverRun(
        value=float(solution.value),
        converged=bool(solution.converged),
        iterations=int(solution.iterations),
        residual=float(solution.residual),
        seconds=round(time.perf_counter() - start, 2),
    )


def solve_point(
    point: TaskPoint, ks: Iterable[int], cache: Path, *, belief: bool = True
) -> tuple[SolverRun | None, dict[int, SolverRun]]:
    """belief_vi (when `belief`) and stack_k for each k in `ks` (ascending; each reuses the
    cached k - 1 solve)."""
    from rl_harness.envs.mess3 import solvers

    problem = point.problem()
    belief_run = None
    if belief:
        belief_run = _timed(lambda: solvers.solve_belief_vi(problem, point.delay, cache=cache))
    stacks = {
        k: _timed(lambda k=k: solvers.solve_stack(problem, point.delay, k, cache=cache))
        for k in sorted(ks)
    }
    return belief_run, stacks


def policy_rollouts(
    point: TaskPoint,
    act: Callable[[np.ndarray, np.ndarray], np.ndarray],
    size: RolloutSize,
    name: str,
    seed: int = SEED,
) -> dict[str, np.ndarray]:
    """Play `act(decision_beliefs (n, 3), last_tokens (n, 3) newest first, -1 = none)` ->
    env actions (n, 2) in the point's analysis env; returns the recorded observations'
    token and action parts (E, T, 3 + 2), the warm-up's (E, W, 5), the decision beliefs
    (E, T, 3) and the mean reward per recorded step."""
    from rl_harness.envs.hmm import HMMVectorEnv

    config = point.env_config(["decision_belief"], random_first_episode_length=False)
    seeds = [stream_seed(seed, *STREAM, name, "episode", str(i)) for i in range(size.episodes)]
    env = HMMVectorEnv(size.episodes, config)
    parts = np.r_[env.layout.tokens, env.layout.actions]
    obs, info = env.reset(seed=seeds)
    tokens = np.full((size.episodes, 3), -1)
    inputs, beliefs, rewards = [], [], []
    total = size.warmup_steps + size.episode_steps
    for t in range(total):
        one_hot = obs[:, env.layout.tokens]
        newest = np.where(one_hot.max(1) > 0, one_hot.argmax(1), -1)
        if t > 0:  # the newest visible token changes every step once one is visible
            tokens = np.concatenate([newest[:, None], tokens[:, :-1]], axis=1)
        inputs.append(obs[:, parts].astype(np.float64))
        beliefs.append(np.asarray(info["decision_belief"], dtype=np.float64))
        obs, reward, terminated, truncated, info = env.step(
            act(beliefs[-1], tokens).astype(np.float32)
        )
        if np.any(terminated | truncated):
            raise ValueError(f"an episode ended before {total} steps")
        rewards.append(reward)
    env.close()
    seq = np.stack(inputs, axis=1)
    w = size.warmup_steps
    return {
        "sequence": seq[:, w:],
        "history": seq[:, :w],
        "targets": np.stack(beliefs, axis=1)[:, w:],
        "return_per_step": float(np.mean(rewards[w:])),
    }


def window_scores(
    rollouts: Mapping[str, Any],
    policy: str,
    size: RolloutSize,
    ks: Sequence[int] = WINDOW_KS,
    seed: int = SEED,
) -> WindowScores:
    """The study's window baselines k = 1..6 on these rollouts (module docstring)."""
    start = time.perf_counter()
    sequence, targets = rollouts["sequence"], rollouts["targets"]
    tokens = sequence[..., :3]
    # The split and bootstrap of the study's probe settings; the probe itself reads the
    # newest token and previous action (the study's "observation" control), unused here.
    reference = evaluate_probe(
        sequence,
        targets,
        ProbeSettings(
            seed=seed,
            ridge=probing.PROBE_RIDGE,
            test_fraction=probing.PROBE_TEST_FRACTION,
            n_bootstrap=10,
            branch_depth=probing.BRANCH_K,
        ),
        target_names=probing.BELIEF_NAMES,
        branch_tokens=tokens,
    )
    table = compare_with_windows(
        reference,
        sequence,
        targets,
        ks=ks,
        seed=seed,
        history=rollouts["history"],
        branchings={probing.TOKEN_BRANCHES: branch_ids(tokens, probing.BRANCH_K)},
    )
    within = {}
    pooled = {}
    for row in table.rows:
        estimate = row.window.within_branch.get(probing.TOKEN_BRANCHES)
        within[row.k] = None if estimate is None else round(float(estimate.value), 4)
        pooled[row.k] = (
            None if row.window.r2_pooled is None else round(float(row.window.r2_pooled.value), 4)
        )
    held_out = targets[reference.test_episodes]
    share = within_variance_share(held_out, tokens[reference.test_episodes])
    return WindowScores(
        policy=policy,
        size=size,
        within_branch=within,
        global_r2=pooled,
        within_variance_share=round(share, 4),
        belief_variance=round(float(held_out.reshape(-1, 3).var(0).sum()), 6),
        return_per_step=round(rollouts["return_per_step"], 6),
        seconds=round(time.perf_counter() - start, 2),
    )


def within_variance_share(targets: np.ndarray, tokens: np.ndarray) -> float:
    """Share of the belief's total variance (coordinates summed) that lies within branches
    of equal last 2 visible tokens (the rest is what the last 2 tokens explain)."""
    labels = branch_ids(tokens, probing.BRANCH_K).reshape(-1)
    y = targets.reshape(-1, targets.shape[-1])
    total = ((y - y.mean(0)) ** 2).sum()
    counts = np.bincount(labels)
    means = np.stack([np.bincount(labels, y[:, i]) for i in range(y.shape[1])], 1)
    means /= counts[:, None]
    within = ((y - means[labels]) ** 2).sum()
    return float(within / total) if total > 0 else float("nan")


def belief_actor(point: TaskPoint, cache: Path) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The belief-MDP policy's greedy action at the exact decision belief."""
    from rl_harness.envs.mess3 import solvers

    policy = solvers.solve_belief_vi(point.problem(), point.delay, cache=cache).policy
    return lambda beliefs, tokens: np.asarray(policy(beliefs))


def stack_actor(
    point: TaskPoint, k: int, cache: Path
) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The best stack-k table's action at the last k visible tokens."""
    from rl_harness.envs.mess3 import solvers

    policy = solvers.solve_stack(point.problem(), point.delay, k, cache=cache).policy
    return lambda beliefs, tokens: np.asarray(policy(tokens[:, :k]))


def score_windows(
    candidate: Candidate,
    cache: Path,
    size: RolloutSize,
    policies: Sequence[str],
    ks: Sequence[int] = WINDOW_KS,
) -> None:
    """Add the window R² on each policy's rollouts ("belief_mdp", "stack_3") at `size`."""
    candidate.windows = [w for w in candidate.windows if w.policy not in policies]
    for name in policies:
        actor = (
            belief_actor(candidate.point, cache)
            if name == "belief_mdp"
            else stack_actor(candidate.point, int(name.split("_")[1]), cache)
        )
        rollouts = policy_rollouts(candidate.point, actor, size, name)
        candidate.windows.append(window_scores(rollouts, name, size, ks))


# The coarse grid: the chain's mixing (1 = the fixed control chain, today's) and the
# emission alpha at the flagship's w_max, beta and delay, then w_max around the best.
COARSE_MIXING = (0.3, 0.1, 1.0)
COARSE_ALPHA = (0.85, 0.75, 0.6)
W_MAX_STEPS = (2.5, 10.0)  # tried at the best coarse points
BETA_STEPS = (1.0, 16.0)  # tried at the best point


def coarse_points() -> list[TaskPoint]:
    return [
        TaskPoint(alpha=alpha, mixing=mixing) for mixing in COARSE_MIXING for alpha in COARSE_ALPHA
    ]


def screen(candidate: Candidate, cache: Path, say: Callable[[str], None]) -> Candidate:
    """belief_vi, stack 1 and 2, and the window R² of the belief-MDP policy's rollouts at
    SCREEN_SIZE."""
    candidate.belief_mdp, candidate.stacks = solve_point(candidate.point, (1, 2), cache)
    candidate.stacks.setdefault(3, None)
    score_windows(candidate, cache, SCREEN_SIZE, ["belief_mdp"])
    say(describe(candidate))
    return candidate


def can_qualify(candidate: Candidate) -> bool:
    """stack_3 >= stack_2: a stack-2 fraction above the bar rules the point out."""
    fraction, r2 = candidate.fraction(2), candidate.window_r2()
    return fraction is not None and fraction <= FRACTION_BAR and (r2 or 1.0) <= WINDOW_BAR


def add_stack_3(candidate: Candidate, cache: Path, say: Callable[[str], None]) -> None:
    _, stacks = solve_point(candidate.point, (1, 2, 3), cache, belief=False)
    candidate.stacks[3] = stacks[3]
    say(describe(candidate))


def describe(candidate: Candidate) -> str:
    point = candidate.point
    fractions = ", ".join(
        f"stack_{k} {f:.3f}" for k in STACK_KS if (f := candidate.fraction(k)) is not None
    )
    r2 = candidate.window_r2()
    ceiling = candidate.belief_mdp.value if candidate.belief_mdp else float("nan")
    return (
        f"alpha {point.alpha:g} mixing {point.mixing:g} w_max {point.w_max:g} beta "
        f"{point.beta:g} delay {point.delay}: ceiling {ceiling:.4f}; {fractions}; window R² "
        f"k=6 within {r2 if r2 is None else f'{r2:.3f}'}"
    )


def choose(candidates: Sequence[Candidate]) -> tuple[Candidate, bool]:
    """(the chosen point, whether it meets both bars). Among the points that meet both, the
    one where memory beyond 3 tokens is worth the most reward per step (ceiling - stack_3:
    the gain a trained agent's memory can earn, so the one PPO's gradient sees best); if
    none meets both, the most memory-demanding visited (`Candidate.demand`)."""
    meeting = [c for c in candidates if c.meets()]
    if meeting:
        return max(meeting, key=memory_gain), True
    return min(candidates, key=Candidate.demand), False


def memory_gain(candidate: Candidate) -> float:
    """ceiling - best stack-3 found (reward per step); -inf where either is missing."""
    run = candidate.stacks.get(3)
    if run is None or candidate.belief_mdp is None:
        return float("-inf")
    return candidate.belief_mdp.value - run.value


def candidate_from_dict(data: Mapping[str, Any]) -> Candidate:
    """A Candidate from its record entry (`Candidate.to_dict`)."""

    def run(value: Mapping[str, Any] | None) -> SolverRun | None:
        return None if value is None else SolverRun(**value)

    def window(value: Mapping[str, Any]) -> WindowScores:
        return WindowScores(
            policy=value["policy"],
            size=RolloutSize(**value["size"]),
            within_branch={int(k): v for k, v in value["within_branch"].items()},
            global_r2={int(k): v for k, v in value["global_r2"].items()},
            within_variance_share=value["within_variance_share"],
            belief_variance=value["belief_variance"],
            return_per_step=value["return_per_step"],
            seconds=value["seconds"],
        )

    return Candidate(
        point=TaskPoint(**data["point"]),
        stage=data["stage"],
        belief_mdp=run(data.get("belief_mdp")),
        stacks={int(k): run(v) for k, v in (data.get("stacks") or {}).items()},
        windows=[window(w) for w in data.get("windows") or []],
    )


def refine_points(best: TaskPoint) -> list[TaskPoint]:
    """Neighbours of the best coarse point: w_max and beta steps, alpha +- 0.05 and the
    mixing halved and doubled (kept inside their ranges)."""
    points = [dataclasses.replace(best, w_max=w) for w in W_MAX_STEPS]
    points += [dataclasses.replace(best, beta=b) for b in BETA_STEPS]
    points += [
        dataclasses.replace(best, alpha=round(best.alpha + step, 4))
        for step in (-0.05, 0.05)
        if 0.4 <= best.alpha + step <= 0.95
    ]
    points += [
        dataclasses.replace(best, mixing=round(best.mixing * factor, 4))
        for factor in (0.5, 2.0)
        if 0.0 < best.mixing * factor <= 1.0
    ]
    return points


def search(
    record_path: Path,
    cache: Path,
    *,
    quick: bool = False,
    max_stack_3: int = 8,
    points: Sequence[TaskPoint] | None = None,
    stage: str = "coarse",
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run (or resume: entries already in `record_path` are kept) the search and write the
    record after every candidate. `quick`: the coarse grid only, no refinement. `points`:
    screen these (as `stage`) instead of the coarse grid and stop after their stack-3 (a
    worker whose record `merge_records` adds to the main one); `points=[]`: visit nothing,
    only choose from the record (solving what the choice needs). The chosen point's windows
    at the flagship's size are kept from the record when it chose the same point."""
    started = time.perf_counter()
    previous = json.loads(record_path.read_text()) if record_path.exists() else {}
    candidates = [candidate_from_dict(c) for c in previous.get("candidates", [])]

    def save(chosen: dict[str, Any] | None = None) -> dict[str, Any]:
        chosen = chosen if chosen is not None else previous.get("chosen")
        record = make_record(candidates, chosen, previous.get("seconds", 0.0) + elapsed())
        record_path.write_text(json.dumps(record, indent=2) + "\n")
        return record

    def elapsed() -> float:
        return round(time.perf_counter() - started, 1)

    def visit(point: TaskPoint, stage: str) -> Candidate:
        known = next((c for c in candidates if c.point == point), None)
        candidate = known or Candidate(point, stage)
        if known is None:
            candidates.append(candidate)
        if candidate.belief_mdp is None or candidate.stacks.get(2) is None:
            screen(candidate, cache, say)
        elif len(candidate.windows) == 0 or any(candidate.window_r2(k) is None for k in WINDOW_KS):
            score_windows(candidate, cache, SCREEN_SIZE, ["belief_mdp"])
            say(describe(candidate))
        save()
        return candidate

    grid = coarse_points() if points is None else list(points)
    say(f"screening {len(grid)} points")
    for point in grid:
        visit(point, "flagship" if point == task.FLAGSHIP else stage)
    solved = 0

    def stack_3_for(pool: Sequence[Candidate]) -> None:
        nonlocal solved
        for candidate in pool:
            if candidate.stacks.get(3) is None and solved < max_stack_3:
                add_stack_3(candidate, cache, say)
                score_windows(candidate, cache, SCREEN_SIZE, ["stack_3"])
                solved += 1
                save()

    # The flagship (the known answer), then every point that can still meet both bars, then
    # the most demanding of the rest when none can.
    flagship = [c for c in candidates if c.point == task.FLAGSHIP]
    qualifying = sorted((c for c in candidates if can_qualify(c)), key=screen_gain, reverse=True)
    stack_3_for(flagship + qualifying)
    if not qualifying:
        stack_3_for(sorted(candidates, key=lambda c: screen_demand(c))[:2])
    if points is not None and len(points) > 0:
        return save()
    # The leaf's point is chosen from the coarse grid (the flagship included): training runs
    # start there before the refinement ends, so a refined neighbour that would win is
    # reported beside it (`refined_better`), never swapped in.
    best, meets = choose([c for c in candidates if c.stage != "refine"])
    say(
        f"chosen ({'meets both bars' if meets else 'meets not both: most demanding'}): "
        f"{describe(best)}"
    )
    if not quick:
        say("refining around it")
        refined = [visit(point, "refine") for point in refine_points(best.point)]
        stack_3_for(sorted((c for c in refined if can_qualify(c)), key=screen_gain, reverse=True))
    old = previous.get("chosen") or {}
    windows = dict(old.get("windows_at_flagship_size") or {})
    if old.get("point") != asdict(best.point):
        windows = {}
    for name in ("belief_mdp", "stack_3"):
        if name in windows:
            continue
        say(f"scoring the chosen point's windows at the flagship's probe size ({name})")
        actor = (
            belief_actor(best.point, cache)
            if name == "belief_mdp"
            else stack_actor(best.point, 3, cache)
        )
        rollouts = policy_rollouts(best.point, actor, FLAGSHIP_SIZE, name)
        windows[name] = _window_dict(window_scores(rollouts, name, FLAGSHIP_SIZE))
    better = [
        c
        for c in candidates
        if c.stage == "refine" and c.meets() and memory_gain(c) > memory_gain(best)
    ]
    chosen = {
        "point": asdict(best.point),
        "task_points_name": "memory",
        "meets_both": meets,
        "rule": CHOICE_RULE,
        "fraction_3": best.fraction(3),
        "ceiling": best.belief_mdp.value if best.belief_mdp else None,
        "memory_gain": memory_gain(best),
        "windows_at_flagship_size": windows,
        "refined_better": [
            {"point": asdict(c.point), "memory_gain": memory_gain(c)} for c in better
        ],
    }
    return save(chosen)


def merge_records(main: Path, others: Sequence[Path]) -> None:
    """Add to `main` the candidates of `others` it lacks (their points), summing seconds."""
    record = json.loads(main.read_text()) if main.exists() else make_record([], None, 0.0)
    known = {json.dumps(c["point"], sort_keys=True) for c in record["candidates"]}
    for path in others:
        other = json.loads(path.read_text())
        for entry in other["candidates"]:
            key = json.dumps(entry["point"], sort_keys=True)
            if key not in known:
                record["candidates"].append(entry)
                known.add(key)
        record["seconds"] = round(record["seconds"] + other["seconds"], 1)
        if record.get("chosen") is None and other.get("chosen") is not None:
            record["chosen"] = other["chosen"]  # reused by `search` if it chooses the same
    main.write_text(json.dumps(record, indent=2) + "\n")


def screen_gain(candidate: Candidate) -> float:
    """ceiling - stack_2: an upper bound on ceiling - stack_3 (stack_3 >= stack_2)."""
    run = candidate.stacks.get(2)
    if run is None or candidate.belief_mdp is None:
        return float("-inf")
    return candidate.belief_mdp.value - run.value


def screen_demand(candidate: Candidate) -> float:
    fraction, r2 = candidate.fraction(2), candidate.window_r2()
    return max(fraction if fraction is not None else 1.0, r2 if r2 is not None else 1.0)


CHOICE_RULE = (
    "among the coarse grid's points (the refinement only adds rows: runs start at the chosen "
    "point before it ends) whose best stack-3 table earns <= 80% of the belief-MDP "
    "ceiling and whose 6-step tokens+actions window (belief-MDP policy's rollouts, "
    "screen size) has within-branch R² <= 0.8, the one with the largest ceiling - stack_3 "
    "(reward per step memory beyond 3 tokens can earn); if none, the smallest "
    "max(fraction of the largest stack solved, window R² k=6)"
)
DEFINITIONS = {
    "ceiling": "belief_vi at the point's delay (grid 30 per simplex edge, its defaults): the "
    "belief-MDP long-run reward per step, the best any agent can do",
    "stacks": "solve_stack k = 1, 2, 3: the best table on the last k visible tokens the "
    "solver's search found (global scans, multi-start ascent, polish; a search, not a "
    "proof); seconds are each solve's own (the k - 1 solve it lifts was cached); None: not "
    "solved (stack_2 above the bar already rules the point out)",
    "fractions": "stack_k / ceiling",
    "windows": "held-out pooled R² of the study's window baseline (an MLP on the last k "
    "visible tokens and previous executed actions, rl_harness.analysis.fit_window_baselines "
    "via compare_with_windows, warm-up as history) predicting the exact decision belief "
    "(env info), fitted on 75% of the episodes (the study probe's split, seed 0) and scored "
    "on the other 25%; within_branch: within branches of equal last 2 visible tokens "
    "(tokens_2); policy: whose actions the rollouts execute (belief_mdp: belief_vi's greedy "
    "action at the exact decision belief; stack_3: the best stack-3 table's); size: "
    "episodes x (warm-up + recorded) steps of the flagship's analysis env",
    "within_variance_share": "share of the held-out belief variance within tokens_2 branches",
    "belief_variance": "the held-out decision belief's variance, coordinates summed (a point "
    "whose belief barely moves leaves a probe little to find: read R² beside it)",
}


def make_record(
    candidates: Sequence[Candidate], chosen: Mapping[str, Any] | None, seconds: float
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "command": "uv run python -m experiments.mess3_belief_geometry.operating_point",
        "bars": {"fraction_3_max": FRACTION_BAR, "window_r2_within_k6_max": WINDOW_BAR},
        "definitions": DEFINITIONS,
        "candidates": [c.to_dict() for c in candidates],
        "chosen": dict(chosen) if chosen is not None else None,
        "seconds": round(seconds, 1),
    }


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(record: Mapping[str, Any]) -> str:
    """The study README's table of every visited candidate, from the record."""
    lines = [
        "| stage | alpha | mixing | w_max | beta | delay | ceiling | stack-1 | stack-2 | "
        "stack-3 | frac 1 / 2 / 3 | window R² within k=1..6 (belief-MDP policy) | "
        "stack-3 policy k=6 | converged | solver s |",
        "|" + " --- |" * 15,
    ]
    for c in record["candidates"]:
        p, stacks = c["point"], c["stacks"]
        values = [stacks.get(str(k)) for k in STACK_KS]
        fractions = " / ".join(_number(c["fractions"].get(str(k))) for k in STACK_KS)
        windows = {w["policy"]: w for w in c["windows"]}
        belief = windows.get("belief_mdp")
        within = (
            " ".join(_number(belief["within_branch"].get(str(k)), 2) for k in WINDOW_KS)
            if belief
            else "-"
        )
        stack_window = windows.get("stack_3")
        runs = [c["belief_mdp"], *values]
        converged = " ".join("-" if r is None else ("y" if r["converged"] else "NO") for r in runs)
        seconds = sum(r["seconds"] for r in runs if r is not None)
        lines.append(
            f"| {c['stage']} | {p['alpha']:g} | {p['mixing']:g} | {p['w_max']:g} | "
            f"{p['beta']:g} | {p['delay']} | {_number((c['belief_mdp'] or {}).get('value'), 4)} | "
            + " | ".join(_number(None if v is None else v["value"], 4) for v in values)
            + f" | {fractions} | {within} | "
            f"{_number(stack_window['within_branch'].get('6'), 2) if stack_window else '-'} | "
            f"{converged} | {seconds:.0f} |"
        )
    chosen = record.get("chosen")
    if chosen:
        p = chosen["point"]
        lines += [
            "",
            f"Chosen ({
                'meets both bars'
                if chosen['meets_both']
                else 'NOT both bars: the most memory-demanding visited'
            }): alpha {p['alpha']:g}, mixing {p['mixing']:g}, "
            f"w_max {p['w_max']:g}, beta {p['beta']:g}, delay {p['delay']}; ceiling "
            f"{_number(chosen['ceiling'], 4)}, stack-3 fraction {_number(chosen['fraction_3'])}.",
        ]
        for name, w in chosen["windows_at_flagship_size"].items():
            size = w["size"]
            lines.append(
                f"At the flagship's probe size ({size['episodes']} episodes x "
                f"({size['warmup_steps']} + {size['episode_steps']}) steps), {name} policy: "
                "window R² within k=1..6 "
                + " ".join(_number(w["within_branch"].get(str(k))) for k in WINDOW_KS)
                + "; global "
                + " ".join(_number(w["global_r2"].get(str(k))) for k in WINDOW_KS)
                + f"; within-branch variance share {w['within_variance_share']:.3f}."
            )
        better = chosen.get("refined_better") or []
        lines.append(
            "No refined neighbour that meets both bars earns more from memory."
            if not better
            else "Refined neighbours that meet both bars and earn more from memory (reported, "
            "not swapped in: runs started at the chosen point): "
            + "; ".join(
                f"alpha {b['point']['alpha']:g} mixing {b['point']['mixing']:g} w_max "
                f"{b['point']['w_max']:g} beta {b['point']['beta']:g} (ceiling - stack-3 "
                f"{b['memory_gain']:.4f})"
                for b in better
            )
            + "."
        )
    return "\n".join(lines)


README_START = "<!-- operating_point table: start -->"
README_END = "<!-- operating_point table: end -->"


def readme_with_table(readme: str, record: Mapping[str, Any]) -> str:
    """`readme` with the text between the README markers replaced by `table(record)`."""
    head, rest = readme.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    return f"{head}{README_START}\n{table(record)}\n{README_END}{tail}"


def point_from_text(text: str) -> TaskPoint:
    """ "ALPHA,MIXING,W_MAX,BETA,DELAY" -> TaskPoint (validated by building its problem)."""
    parts = text.split(",")
    if len(parts) != 5:
        raise ValueError(f"a point is ALPHA,MIXING,W_MAX,BETA,DELAY, got {text!r}")
    alpha, mixing, w_max, beta = (float(part) for part in parts[:4])
    point = TaskPoint(alpha=alpha, mixing=mixing, w_max=w_max, beta=beta, delay=int(parts[4]))
    point.problem()
    return point


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.mess3_belief_geometry.operating_point",
        description="Search the occupancy-control task's parameters for a point where memory "
        "pays (exact solvers, no training); write operating_point.json.",
    )
    parser.add_argument("--record", type=Path, default=RECORD, help="JSON record (resumed)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: a fresh temp dir")
    parser.add_argument("--quick", action="store_true", help="the coarse grid only")
    parser.add_argument("--max-stack-3", type=int, default=8, help="cap on stack-3 solves")
    parser.add_argument(
        "--readme", type=Path, default=None, help="only rewrite this README's table from the record"
    )
    parser.add_argument(
        "--points",
        nargs="+",
        default=None,
        help="screen these ALPHA,MIXING,W_MAX,BETA,DELAY points (a worker), not the grid",
    )
    parser.add_argument(
        "--stage", choices=("coarse", "refine"), default="coarse", help="of --points"
    )
    parser.add_argument(
        "--finish", action="store_true", help="visit no point: choose from the record"
    )
    parser.add_argument("--merge", nargs="+", type=Path, default=None, help="workers' records")
    args = parser.parse_args(argv)
    if args.merge is not None:
        merge_records(args.record, args.merge)
        return 0
    points = [] if args.finish else None
    if args.points is not None:
        try:
            points = [point_from_text(text) for text in args.points]
        except ValueError as error:
            parser.exit(2, f"{parser.prog}: error: {error}\n")
    if args.readme is not None:
        if not args.record.exists():
            parser.exit(2, f"{parser.prog}: error: no record at {args.record}\n")
        record = json.loads(args.record.read_text())
        args.readme.write_text(readme_with_table(args.readme.read_text(), record))
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache_dir or Path(scratch)
        record = search(
            args.record,
            cache,
            quick=args.quick,
            max_stack_3=args.max_stack_3,
            points=points,
            stage=args.stage,
        )
    print(table(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
