"""Our instances as vast lists them and the state file records them: the two reconciled, each
box's status and cost, which boxes a destroy takes, and the ssh command of one box.

`rl-harness vast status | destroy | ssh` (rl_harness/cli/vast.py) call these and print.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from .client import VastAPIError, VastClient
from .state import ACTIVE, DESTROYED, GONE, StateFile

OVERDUE_GRACE_S = 15 * 60  # past its deadline by this much, a box failed to destroy itself
# On the box: the run's tmux session, else the bootstrap log while it sets up.
SSH_REMOTE_COMMAND = "tmux -L rlh attach -t rlh || tail -n 100 -f /root/rlh/bootstrap.log"


def is_ours(instance: dict[str, Any], label_prefix: str) -> bool:
    """An instance labelled by our launches (`<prefix>-...`), tracked or not."""
    return str(instance.get("label") or "").startswith(label_prefix + "-")


def reconcile(client: VastClient, state: StateFile) -> dict[int, dict[str, Any]]:
    """vast's instances by id; active records vast no longer lists are marked gone, and
    vast's start time of each listed one is recorded (the box's deadline runs from it)."""
    listed = {int(i["id"]): i for i in client.list_instances()}
    for record in state.active():
        live = listed.get(record.instance_id)
        if live is None:
            state.mark_ended(record.instance_id, GONE, note="no longer listed by vast")
        elif live.get("start_date") and live["start_date"] != record.started_at:
            state.update(record.instance_id, started_at=float(live["start_date"]))
    return listed


@dataclass(frozen=True)
class StatusReport:
    """`vast status`: one item per record (the `--json` form), vast's instances labelled
    ours that no record knows, and what the active boxes cost per hour."""

    tracked: list[dict[str, Any]]
    untracked: list[dict[str, Any]]  # vast's own instance dicts
    burn_dph: float
    active_count: int


def status_report(
    client: VastClient, state: StateFile, *, label_prefix: str, include_ended: bool
) -> StatusReport:
    """Reconcile, then each record's status: vast's view, hours and cost so far, the box's
    deadline (from vast's start time) and whether it is overdue. Records of ended boxes
    only with `include_ended`."""
    listed = reconcile(client, state)
    now = time.time()
    records = state.records(None if include_ended else (lambda r: r.status == ACTIVE))
    known = {r.instance_id for r in state.records()}
    untracked = [i for iid, i in listed.items() if iid not in known and is_ours(i, label_prefix)]
    tracked = []
    for r in records:
        live = listed.get(r.instance_id, {})
        deadline = r.box_deadline(live)
        tracked.append(
            {
                "instance_id": r.instance_id,
                "label": r.label,
                "status": r.status,
                "vast_status": live.get("actual_status"),
                "gpu": f"{r.num_gpus}x {r.gpu_name}",
                "dph": r.dph,
                "hours": round(r.hours_so_far(now), 3),
                "cost_so_far": round(r.dph * r.hours_so_far(now), 4),
                "seed": r.seed,
                "started_at": live.get("start_date") or r.started_at,
                "deadline_in_h": (
                    None if deadline is None else round((deadline - now) / 3600.0, 3)
                ),
                "overdue": r.overdue(live, now, OVERDUE_GRACE_S),
                "note": r.note,
            }
        )
    return StatusReport(
        tracked=tracked,
        untracked=untracked,
        burn_dph=sum(r.dph for r in records if r.status == ACTIVE),
        active_count=sum(r.status == ACTIVE for r in records),
    )


@dataclass(frozen=True)
class DestroyTargets:
    targets: dict[int, str]  # instance id -> its label ("named" for ids given by hand)
    listing_error: VastAPIError | None  # the listing failed: tracked boxes are taken anyway


def destroy_targets(
    client: VastClient,
    state: StateFile,
    named: list[int],
    *,
    every: bool,
    overdue: bool,
    label_prefix: str,
) -> DestroyTargets:
    """The ids named, plus with `every` each active record and each listed instance labelled
    ours, with `overdue` each active record past its deadline plus OVERDUE_GRACE_S."""
    targets: dict[int, str] = {i: "named" for i in named}
    listing_error = None
    if every or overdue:
        try:
            listed = reconcile(client, state)
        except VastAPIError as err:
            # A cost guard must not depend on the listing: tracked boxes are destroyed anyway.
            listed, listing_error = {}, err
        now = time.time()
        for r in state.active():
            if every or r.overdue(listed.get(r.instance_id), now, OVERDUE_GRACE_S):
                targets.setdefault(r.instance_id, r.label)
        for iid, i in listed.items():
            if every and is_ours(i, label_prefix):
                targets.setdefault(iid, str(i.get("label")))
    return DestroyTargets(targets, listing_error)


def destroy_instance(client: VastClient, state: StateFile, instance_id: int) -> bool:
    """Destroy one box and record it (destroyed, or gone when vast no longer had it); returns
    whether it existed. A VastAPIError leaves the record as it was."""
    existed = client.destroy_instance(instance_id)
    state.mark_ended(instance_id, DESTROYED if existed else GONE, note="destroyed by user")
    return existed


class NoSSHAddress(RuntimeError):
    """The instance does not exist, or has no ssh address yet."""


def ssh_argv(client: VastClient, instance_id: int) -> list[str]:
    """The ssh command into a box: its run's tmux session, else its bootstrap log."""
    instance = client.show_instance(instance_id)
    if instance is None:
        raise NoSSHAddress(f"instance {instance_id} not found")
    host, port = instance.get("ssh_host"), instance.get("ssh_port")
    if not host or not port:
        raise NoSSHAddress(
            f"instance {instance_id} has no ssh address yet "
            f"(status {instance.get('actual_status')}); try again shortly"
        )
    return ["ssh", "-p", str(int(port)), f"root@{host}", "-t", SSH_REMOTE_COMMAND]
