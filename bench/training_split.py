"""Where a training iteration's time goes, for the flagship and the token-guess study: the
previous acting/learner path and this library's, side by side in one process.

Ray-free and cpu-local like the harness's CPU plan: RLlib's own `SingleAgentEnvRunner` (the
driver's env runner) and the config's Learner (`config.build_learner`, what a local learner
group holds), the study's config at its CPU budget (32 envs, 32,768-step batches, minibatch
4,096, 6 epochs), iterations of sample -> update -> weights back to the runner. Each timed
piece is wrapped (wall and process CPU seconds, all threads), per iteration:

  sampling   env_runner.sample: module forward (forward_exploration), env.step (the vector
             env), the env-to-module and module-to-env connector pipelines, and the rest
             (RLlib's per-env episode bookkeeping, callbacks, metrics)
  learner    Learner.update: the learner connector (of which the GAE value pass,
             compute_values without embeddings), then per minibatch forward_train, the loss,
             backward (compute_gradients) and the optimizer step (apply_gradients); rest

Paths: "previous" = acting through RLlib's per-item connector pieces and (flagship) RLlib's
GAE piece with autograd on and the stateful transformer's passes without autograd as they
were (a fresh K/V buffer per step with the cache copied in, `ARENA_STEPS = 0`; the
concatenating rotation over (positions, 1, head_dim) tables: `previous_encoder_arithmetic`)
(the library at af63730 in those respects); "current" = this library's defaults (batched
acting connectors, each side's pieces as one `UntimedPipeline`; GAE's value pass without
autograd; the acting K/V arena and the rotation without a concatenation over per-head
tables). `--previous timed-pieces`: "previous" = this library with the acting pieces
separate in RLlib's pipelines, which time each piece on every vector step (the library
before `UntimedPipeline`; everything else as current). The two
paths alternate iteration by iteration (after one warm-up iteration each), so drift on a
shared machine hits both; the learner and runner of each path start from the same weights
and seed.

    .venv/bin/python bench/training_split.py --study flagship --iterations 3     # ~3 min quiet
    .venv/bin/python bench/training_split.py --study token_guess --iterations 3  # ~2 min quiet
    .venv/bin/python bench/training_split.py --study flagship --previous timed-pieces

Torch threads: the process default (both cores) unless --torch-threads; the token-guess
study's runs use one (OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

PIECES = (
    "sampling",
    "  module forward",
    "  env step",
    "  env-to-module",
    "  module-to-env",
    "  rest (episodes, callbacks, metrics)",
    "learner",
    "  learner connector",
    "    of which GAE value pass",
    "  forward_train",
    "  loss",
    "  backward",
    "  optimizer step",
    "  rest",
)


class Clock:
    """Wall and CPU seconds per named piece, for the current iteration."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    def wrap(self, owner: Any, attribute: str, name: str, when: Any = None) -> None:
        inner = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if when is not None and not when(*args, **kwargs):
                return inner(*args, **kwargs)
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                self.wall[name] += time.perf_counter() - wall
                self.cpu[name] += time.process_time() - cpu

        setattr(owner, attribute, timed)


def study_config(study: str, previous: str | None, batch: int):
    if study == "flagship":
        from experiments.mess3_belief_geometry.reward_only import experiment as recipe
    else:
        from experiments.mess3_token_guess.ppo import experiment as recipe
    plan = recipe.CPU
    if batch:  # a quick check of the bench itself, not the study's figure
        plan = dataclasses.replace(plan, train_batch=batch, minibatch=batch // 8)
    config = recipe.build_config(plan)
    config.debugging(seed=0)
    if not previous:
        return config, plan
    if previous == "timed-pieces":  # the same pieces, each timed by RLlib's pipeline
        config.env_runners(
            env_to_module_connector=functools.partial(
                config._env_to_module_connector, untimed=False
            ),
            module_to_env_connector=functools.partial(
                config._module_to_env_connector, untimed=False
            ),
        )
        return config, plan
    if study == "flagship":
        from flagship_throughput import previous_kv_acting  # bench/ is on sys.path

        previous_kv_acting(config)
    else:
        config.env_runners(
            env_to_module_connector=None,
            module_to_env_connector=None,
            add_default_connectors_to_env_to_module_pipeline=True,
            add_default_connectors_to_module_to_env_pipeline=True,
        )
    return config, plan


@contextlib.contextmanager
def previous_encoder_arithmetic() -> Iterator[None]:
    """The stateful transformer's rotation as before issue 53's acting arena: the
    concatenating formula (what autograd still runs) over (positions, 1, head_dim) tables
    (they are now materialized per head). Same numbers; only the cost differs."""
    import torch

    from rl_harness.learners.components import stateful_transformer as st

    def rotate(x: Any, cos: Any, signed_sin: Any) -> Any:
        half = x.shape[-1] // 2
        return x * cos + torch.cat((x[..., half:], x[..., :half]), dim=-1) * signed_sin

    tables_for = st.StatefulTransformerEncoder._tables_for
    narrow: dict[Any, Any] = {}

    def previous_tables(self: Any, steps: int, device: Any) -> Any:
        key = (id(self), steps, device)
        if key not in narrow:
            cos, sin, window = tables_for(self, steps, device)
            narrow[key] = (cos[:, :1].contiguous(), sin[:, :1].contiguous(), window)
        return narrow[key]

    saved = st.rotate
    st.rotate = rotate
    st.StatefulTransformerEncoder._tables_for = previous_tables  # type: ignore[method-assign]
    try:
        yield
    finally:
        st.rotate = saved
        st.StatefulTransformerEncoder._tables_for = tables_for  # type: ignore[method-assign]


class Path:
    """One path's env runner and learner, its pieces wrapped."""

    def __init__(
        self, study: str, previous: str | None, batch: int, sampling_only: bool = False
    ) -> None:
        self.sampling_only = sampling_only
        from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

        config, self.plan = study_config(study, previous, batch)
        self.runner = SingleAgentEnvRunner(config=config)
        self.previous_encoder = previous == "af63730" and study == "flagship"
        if self.previous_encoder:  # a fresh K/V buffer per acting step, as before
            self.runner.module.transformer.ARENA_STEPS = 0
        self.learner = config.build_learner(spaces=self.runner.get_spaces())
        self.clock = Clock()
        runner, learner, clock = self.runner, self.learner, self.clock
        module = learner.module["default_policy"]
        clock.wrap(runner, "sample", "sampling")
        clock.wrap(runner.module, "forward_exploration", "  module forward")
        clock.wrap(runner.env, "step", "  env step")
        clock.wrap(runner, "_env_to_module", "  env-to-module")
        clock.wrap(runner, "_module_to_env", "  module-to-env")
        clock.wrap(learner, "update", "learner")
        clock.wrap(learner, "_learner_connector", "  learner connector")
        clock.wrap(
            module,
            "compute_values",
            "    of which GAE value pass",
            when=lambda batch, embeddings=None: embeddings is None,
        )
        clock.wrap(module, "forward_train", "  forward_train")
        clock.wrap(learner, "compute_losses", "  loss")
        clock.wrap(learner, "compute_gradients", "  backward")
        clock.wrap(learner, "apply_gradients", "  optimizer step")

    def iteration(self) -> dict[str, tuple[float, float]]:
        if self.previous_encoder:
            with previous_encoder_arithmetic():
                return self._iteration()
        return self._iteration()

    def _iteration(self) -> dict[str, tuple[float, float]]:
        self.clock.wall.clear()
        self.clock.cpu.clear()
        episodes, steps = [], 0
        while steps < self.plan.train_batch:
            chunk = self.runner.sample()
            episodes += chunk
            steps += sum(len(e) for e in chunk)
        if not self.sampling_only:
            self.learner.update(
                episodes=episodes,
                timesteps={"num_env_steps_sampled_lifetime": steps},
                num_epochs=self.plan.num_epochs,
                minibatch_size=self.plan.minibatch,
                shuffle_batch_per_epoch=True,
            )
            self.runner.module.set_state(
                self.learner.module["default_policy"].get_state(inference_only=True)
            )
        wall, cpu = dict(self.clock.wall), dict(self.clock.cpu)
        for whole, parts in (
            (
                "sampling",
                ("  module forward", "  env step", "  env-to-module", "  module-to-env"),
            ),
            ("learner", ("  learner connector", "  forward_train", "  loss", "  backward")),
        ):
            rest = "  rest (episodes, callbacks, metrics)" if whole == "sampling" else "  rest"
            extra = ("  optimizer step",) if whole == "learner" else ()
            wall[rest] = wall.get(whole, 0.0) - sum(wall.get(p, 0.0) for p in parts + extra)
            cpu[rest] = cpu.get(whole, 0.0) - sum(cpu.get(p, 0.0) for p in parts + extra)
        return {name: (wall.get(name, 0.0), cpu.get(name, 0.0)) for name in PIECES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=("flagship", "token_guess"), default="flagship")
    parser.add_argument("--iterations", type=int, default=3, help="measured, per path")
    parser.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    parser.add_argument(
        "--batch", type=int, default=0, help="train batch (minibatch an eighth); 0: the study's"
    )
    parser.add_argument(
        "--previous",
        choices=("af63730", "timed-pieces"),
        default="af63730",
        help="the previous path: af63730's acting/GAE/encoder pieces, or this library with "
        "RLlib timing each acting piece (before UntimedPipeline)",
    )
    parser.add_argument(
        "--sampling-only",
        action="store_true",
        help="sample the batch without updating (the weights stay the first ones): more "
        "rounds of the sampling split for the same time",
    )
    args = parser.parse_args()
    import torch

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    paths = {
        name: Path(
            args.study,
            args.previous if name == "previous" else None,
            args.batch,
            sampling_only=args.sampling_only,
        )
        for name in ("previous", "current")
    }
    current = paths["current"]
    current.learner.module["default_policy"].set_state(
        paths["previous"].learner.module["default_policy"].get_state()
    )
    current.runner.module.set_state(paths["previous"].runner.module.get_state())
    for path in paths.values():
        path.iteration()  # warm-up
    figures: dict[str, list[dict[str, tuple[float, float]]]] = {name: [] for name in paths}
    for i in range(args.iterations):
        for name in ("previous", "current") if i % 2 == 0 else ("current", "previous"):
            figures[name].append(paths[name].iteration())
            print(
                f"iteration {i + 1} {name:<9} sampling {figures[name][-1]['sampling'][0]:6.2f} s"
                f"  learner {figures[name][-1]['learner'][0]:6.2f} s",
                flush=True,
            )
    print(
        f"\n{args.study}: seconds per {current.plan.train_batch:,}-step iteration, median of "
        f"{args.iterations}, previous = {args.previous} "
        f"(torch threads {torch.get_num_threads()}, 1-min load {os.getloadavg()[0]:.1f} over "
        f"{os.cpu_count()} cores at the end)"
    )
    print(
        f"{'piece':<40}{'previous wall':>14}{'CPU':>8}{'current wall':>14}{'CPU':>8}"
        f"{'ratio':>7}{'CPU ratio':>10}"
    )
    for piece in PIECES:
        row = []
        for name in paths:
            row += [statistics.median(f[piece][k] for f in figures[name]) for k in (0, 1)]
        if row[0] == row[2] == 0.0:  # the learner's pieces under --sampling-only
            continue
        ratio = f"{row[0] / row[2]:7.2f}" if row[2] > 0 else f"{'':7}"
        cpu_ratio = f"{row[1] / row[3]:10.2f}" if row[3] > 0 else ""
        print(
            f"{piece:<40}{row[0]:>14.2f}{row[1]:>8.2f}{row[2]:>14.2f}{row[3]:>8.2f}{ratio}"
            f"{cpu_ratio}"
        )
    total = [
        statistics.median(f["sampling"][k] + f["learner"][k] for f in figures[n])
        for n in paths
        for k in (0, 1)
    ]
    print(
        f"{'iteration (sampling + learner)':<40}{total[0]:>14.2f}{total[1]:>8.2f}"
        f"{total[2]:>14.2f}{total[3]:>8.2f}{total[0] / total[2]:7.2f}{total[1] / total[3]:10.2f}"
    )
    for name, cpu in zip(paths, (total[1], total[3]), strict=True):
        sampling = statistics.median(f["sampling"][1] for f in figures[name])
        print(f"{name}: sampling {sampling / cpu:.0%} of the iteration's CPU seconds")
    steps = current.plan.train_batch
    print(f"env steps/s (wall): previous {steps / total[0]:.0f}, current {steps / total[2]:.0f}")


if __name__ == "__main__":
    main()
