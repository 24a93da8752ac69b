"""Plan a launch (offers, seeds, cost) and carry it out, leaving nothing behind on failure."""

from __future__ import annotations

import re
import secrets as _random
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rl_harness.harness.gitinfo import git_identity

from .bootstrap import ONSTART, ONSTART_LIMIT, BootstrapParams, pack_env, render_bootstrap
from .client import VastAPIError, VastClient
from .credentials import url_has_credentials
from .offers import Offer, OfferFilters, find_offers, pick_offers
from .state import InstanceRecord, StateFile

DEFAULT_IMAGE = "vastai/base-image:@vastai-automatic-tag"  # vast's documented default


class LaunchError(RuntimeError):
    pass


# -- inputs -----------------------------------------------------------------------------------


def parse_seeds(text: str) -> list[int]:
    """ "0-3" -> [0, 1, 2, 3]; "1,5,7"; "0-2,10". Seeds must be distinct and non-negative."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"bad seed list {text!r}: use e.g. 0-3 or 1,5,7") from None
    if not seeds:
        raise ValueError(f"bad seed list {text!r}: no seeds")
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and non-negative, got {text!r}")
    return seeds


def box_argv(command: str, seed: int | None) -> tuple[str, ...]:
    """The run command for one box: `{seed}` is replaced, else `--seed S` is appended."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("--run is empty")
    if seed is None:
        return tuple(argv)
    if any("{seed}" in a for a in argv):
        return tuple(a.replace("{seed}", str(seed)) for a in argv)
    if any(a == "--seed" or a.startswith("--seed=") for a in argv):
        raise ValueError("--run already sets --seed; drop it or write --seed {seed} with --seeds")
    return (*argv, "--seed", str(seed))


@dataclass(frozen=True)
class RepoSpec:
    root: str
    url: str
    commit: str
    dir_name: str


def _commit_is_pushed(root: str, commit: str) -> bool:
    out = subprocess.run(
        ["git", "-C", root, "branch", "-r", "--contains", commit],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return out.returncode == 0 and bool(out.stdout.strip())


def resolve_repo(
    path: Path, *, what: str, url: str | None = None, commit: str | None = None
) -> tuple[RepoSpec | None, list[str]]:
    """The repo a box clones, and why it cannot be used (dirty, unpushed, no remote).

    With both `url` and `commit` given no local checkout is needed (nothing to check).
    """
    if url and url_has_credentials(url):
        return None, [
            f"{what}: the clone URL carries credentials, which would travel to the box in "
            "clear; give a plain URL and forward a token with --forward-git"
        ]
    if url and commit:
        if not re.fullmatch(r"[0-9a-f]{40}", commit):
            return None, [f"{what}: --*-commit must be a full 40-hex commit id, got {commit!r}"]
        name = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1].removesuffix(".git")
        return RepoSpec(root=url, url=url, commit=commit, dir_name=name or what), []
    identity = git_identity(path)
    if identity is None or identity.commit is None:
        return None, [
            f"{what}: {path} is not inside a git repository with a commit "
            "(give its clone URL and a full commit id instead)"
        ]
    problems: list[str] = []
    chosen = commit or identity.commit
    if commit is None and identity.diff_sha256 is not None:  # untracked files alone are fine
        problems.append(
            f"{what}: {identity.root} has uncommitted changes; the box would not see them "
            "(commit and push first)"
        )
    remote = url or identity.remote_url
    if remote and url_has_credentials(remote):
        problems.append(
            f"{what}: the origin URL of {identity.root} carries credentials, which would "
            "travel to the box in clear; pass a plain --*-url and use --forward-git"
        )
    if not remote:
        problems.append(f"{what}: {identity.root} has no origin remote; pass the clone URL")
    elif not _commit_is_pushed(identity.root, chosen):
        problems.append(
            f"{what}: commit {chosen[:12]} is on no remote branch; push it first "
            "(the box clones from the remote)"
        )
    spec = RepoSpec(
        root=identity.root, url=remote or "", commit=chosen, dir_name=Path(identity.root).name
    )
    return spec, problems


# The library a box installs defaults to this checkout's (src/rl_harness/ inside its repo).
LIBRARY_PACKAGE_DIR = Path(__file__).parents[2]


def resolve_repos(
    experiment_repo: Path,
    library_repo: Path | None = None,
    *,
    experiment_url: str | None = None,
    experiment_commit: str | None = None,
    library_url: str | None = None,
    library_commit: str | None = None,
) -> tuple[RepoSpec | None, RepoSpec | None, list[str]]:
    """The experiment repo and the library a box clones (`resolve_repo` each; the library
    defaults to the checkout this code runs from), and every reason either cannot be used."""
    experiment, problems = resolve_repo(
        experiment_repo, what="experiment repo", url=experiment_url, commit=experiment_commit
    )
    library, library_problems = resolve_repo(
        library_repo or LIBRARY_PACKAGE_DIR,
        what="library",
        url=library_url,
        commit=library_commit,
    )
    return experiment, library, problems + library_problems


@dataclass(frozen=True)
class LaunchRequest:
    command: str
    count: int
    seeds: tuple[int, ...] | None
    filters: OfferFilters
    max_hours: float
    max_total_dollars: float
    experiment: RepoSpec
    library: RepoSpec
    results_branch: str = "results"
    image: str = DEFAULT_IMAGE
    label_prefix: str = "rlh"
    forwarded_env: dict[str, str] = field(default_factory=dict)  # values never printed
    upload_b2: bool = False

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"-n must be >= 1, got {self.count}")
        if self.seeds is not None and len(self.seeds) != self.count:
            raise ValueError(f"-n {self.count} does not match {len(self.seeds)} seeds")
        if self.max_hours <= 0:
            raise ValueError(f"--max-hours must be positive, got {self.max_hours}")
        if self.max_total_dollars <= 0:
            raise ValueError(f"--max-total-dollars must be positive, got {self.max_total_dollars}")


# -- plan -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BoxPlan:
    index: int
    label: str
    offer: Offer
    seed: int | None
    argv: tuple[str, ...]


@dataclass
class LaunchPlan:
    launch_id: str
    request: LaunchRequest
    boxes: list[BoxPlan]
    spares: list[Offer]  # next-best offers, used when a chosen one is taken meanwhile
    refusals: list[str]
    vast_url: str

    @property
    def dph_total(self) -> float:
        return sum(b.offer.dph for b in self.boxes)

    @property
    def worst_case_dollars(self) -> float:
        # Every box is destroyed by its own watchdog at --max-hours after it boots.
        return self.dph_total * self.request.max_hours


def grace_seconds(max_hours: float) -> int:
    """Time between stopping the run and destroying the box (to push results)."""
    return int(min(600.0, 0.1 * max_hours * 3600.0))


def new_launch_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + _random.token_hex(2)


def plan_launch(
    client: VastClient,
    request: LaunchRequest,
    quarantined: frozenset[int],
    *,
    repo_problems: list[str] | None = None,
) -> LaunchPlan:
    """Search offers, choose one per box (distinct machines), check the cost guard."""
    ranked = find_offers(client, request.filters, quarantined)
    chosen = pick_offers(ranked, request.count)
    launch_id = new_launch_id()
    refusals = list(repo_problems or [])
    if len(chosen) < request.count:
        refusals.append(
            f"only {len(chosen)} matching offers on distinct machines; {request.count} needed "
            "(relax the filters)"
        )
    boxes = []
    for index, offer in enumerate(chosen):
        seed = request.seeds[index] if request.seeds is not None else None
        boxes.append(
            BoxPlan(
                index=index,
                label=f"{request.label_prefix}-{launch_id}-{index}",
                offer=offer,
                seed=seed,
                argv=box_argv(request.command, seed),
            )
        )
    used = {o.id for o in chosen}
    spares = [o for o in ranked if o.id not in used]
    plan = LaunchPlan(launch_id, request, boxes, spares, refusals, client.base_url)
    if plan.worst_case_dollars > request.max_total_dollars:
        refusals.append(
            f"worst case ${plan.worst_case_dollars:.2f} ({len(boxes)} boxes x "
            f"${plan.dph_total:.3f}/h total x {request.max_hours:g} h) exceeds "
            f"--max-total-dollars {request.max_total_dollars:g}"
        )
    return plan


def bootstrap_params(plan: LaunchPlan, box: BoxPlan, **overrides: object) -> BootstrapParams:
    request = plan.request
    same_repo = request.experiment.root == request.library.root
    grace = grace_seconds(request.max_hours)
    values: dict[str, Any] = dict(
        label=box.label,
        vast_url=plan.vast_url,
        library_url=request.library.url,
        library_commit=request.library.commit,
        library_dir=request.library.dir_name,
        experiment_url=request.experiment.url,
        experiment_commit=request.experiment.commit,
        experiment_dir=request.experiment.dir_name,
        same_repo=same_repo,
        argv=box.argv,
        seed=box.seed,
        results_branch=request.results_branch,
        deadline_s=max(1, int(request.max_hours * 3600) - grace),
        grace_s=grace,
        upload_b2=request.upload_b2,
        secret_names=tuple(sorted(request.forwarded_env)),
    )
    values.update(overrides)
    return BootstrapParams(**values)


def create_body(plan: LaunchPlan, box: BoxPlan, offer: Offer) -> dict[str, Any]:
    """The PUT /asks/{id}/ body. The main API key is never part of it."""
    request = plan.request
    script = render_bootstrap(bootstrap_params(plan, box))
    env = {"RLH_LABEL": box.label, **pack_env(script), **request.forwarded_env}
    assert len(ONSTART) <= ONSTART_LIMIT  # the stricter of vast's documented limits
    body: dict[str, Any] = {
        "client_id": "me",
        "image": request.image,
        "disk": request.filters.disk_gb,
        "label": box.label,
        "runtype": "ssh",  # ssh + tmux access; onstart runs after vast's own entrypoint
        "onstart": ONSTART,
        "env": env,
        "cancel_unavail": True,  # fail now rather than leave a pending (billed) instance
    }
    if request.filters.interruptible:
        body["price"] = offer.dph
    return body


# -- execute ----------------------------------------------------------------------------------


def execute_launch(
    client: VastClient,
    plan: LaunchPlan,
    state: StateFile,
    on_created: Callable[[InstanceRecord], None] | None = None,
) -> list[InstanceRecord]:
    """Create every box, recording each at once (and reporting it to `on_created`); on any
    failure destroy those created."""
    if plan.refusals:
        raise LaunchError("launch refused:\n  " + "\n  ".join(plan.refusals))
    request = plan.request
    spares = list(plan.spares)
    machines = {b.offer.machine_id for b in plan.boxes}
    budget_dph = request.max_total_dollars / request.max_hours
    dph_so_far = 0.0
    created: list[InstanceRecord] = []
    try:
        for box in plan.boxes:
            offer = box.offer
            while True:
                try:
                    instance_id = client.create_instance(offer.id, create_body(plan, box, offer))
                    break
                except VastAPIError as err:
                    if not err.offer_gone:
                        raise
                    # What is left: the budget less the boxes rented and those still planned.
                    committed = dph_so_far + sum(b.offer.dph for b in plan.boxes[box.index + 1 :])
                    offer = _next_spare(spares, machines, budget_dph - committed, box)
                    machines.add(offer.machine_id)
            dph_so_far += offer.dph
            now = time.time()
            record = InstanceRecord(
                instance_id=instance_id,
                launch_id=plan.launch_id,
                label=box.label,
                offer_id=offer.id,
                machine_id=offer.machine_id,
                gpu_name=offer.gpu_name,
                num_gpus=offer.num_gpus,
                dph=offer.dph,
                seed=box.seed,
                command=shlex.join(box.argv),
                created_at=now,
                deadline_at=now + request.max_hours * 3600.0,
                max_hours=request.max_hours,
                experiment_commit=request.experiment.commit,
                library_commit=request.library.commit,
                results_branch=request.results_branch,
            )
            state.add(record)
            created.append(record)
            if on_created is not None:
                on_created(record)
    except BaseException as err:
        leftovers = _roll_back(client, state, created)
        message = f"launch failed at box {len(created)} of {len(plan.boxes)}: {err}"
        if created:
            message += f"; destroyed the {len(created) - len(leftovers)} already created"
        if leftovers:
            message += (
                f"; COULD NOT destroy {leftovers} (run `rl-harness vast destroy "
                + " ".join(map(str, leftovers))
                + "`)"
            )
        raise LaunchError(message) from err
    return created


def _next_spare(spares: list[Offer], machines: set[int], dph_left: float, box: BoxPlan) -> Offer:
    while spares:
        offer = spares.pop(0)
        if offer.machine_id not in machines and offer.dph <= dph_left:
            return offer
    raise LaunchError(f"{box.label}: the offer was taken and no spare offer fits the budget")


def _roll_back(client: VastClient, state: StateFile, created: list[InstanceRecord]) -> list[int]:
    leftovers: list[int] = []
    for record in created:
        try:
            client.destroy_instance(record.instance_id)
            state.mark_ended(record.instance_id, "destroyed", note="rolled back: launch failed")
        except Exception:
            leftovers.append(record.instance_id)
    return leftovers
