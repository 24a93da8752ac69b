"""`rl-harness vast ...`: offers, up, status, logs, ssh, destroy, quarantine.

The parser and the printing; the work (offers, launches, reconciling the state file with
vast's listing, choosing what to destroy) is in `rl_harness.devops.vast`. Everything printed
(stdout and stderr) passes through one redactor holding the API key, the forwarded values
and every secret-named environment value.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from rl_harness.cli.args import EXIT_FAILED, EXIT_USAGE, OneLineParser, UsageError
from rl_harness.devops.vast.bootstrap import render_bootstrap
from rl_harness.devops.vast.client import VastAPIError, VastClient, resolve_base_url
from rl_harness.devops.vast.credentials import MissingAPIKey, Redactor, forwarded_env, load_api_key
from rl_harness.devops.vast.instances import (
    NoSSHAddress,
    destroy_instance,
    destroy_targets,
    ssh_argv,
    status_report,
)
from rl_harness.devops.vast.launch import (
    DEFAULT_IMAGE,
    LaunchError,
    LaunchPlan,
    LaunchRequest,
    bootstrap_params,
    execute_launch,
    parse_seeds,
    plan_launch,
    resolve_repos,
)
from rl_harness.devops.vast.offers import (
    OfferFilters,
    add_to_quarantine,
    find_offers,
    read_quarantine,
)
from rl_harness.devops.vast.state import StateFile, default_state_dir
from rl_harness.harness.console import text_table

PROG = "rl-harness vast"


class _Out:
    """Redacted printing; the redactor grows as secrets become known."""

    def __init__(self, redactor: Redactor):
        self.redact = redactor

    def __call__(self, text: str = "") -> None:
        print(self.redact(text), flush=True)

    def err(self, text: str) -> None:
        print(self.redact(text), file=sys.stderr, flush=True)


# -- parser -----------------------------------------------------------------------------------


def _common() -> OneLineParser:
    # A OneLineParser only because typeshed wants parents of the subparsers' own class.
    common = OneLineParser(add_help=False)
    common.add_argument("--url", help="vast API base URL (default $VAST_URL or the console)")
    common.add_argument("--state-dir", type=Path, help=f"default {default_state_dir()}")
    common.add_argument(
        "--label-prefix", default="rlh", help="label prefix of our instances (default rlh)"
    )
    return common


def _offer_options() -> OneLineParser:
    p = OneLineParser(add_help=False)
    g = p.add_argument_group("offer filters")
    g.add_argument("--gpu-name", help='exact vast GPU name, e.g. "RTX 4090"')
    g.add_argument("--num-gpus", type=int, default=1)
    g.add_argument("--min-gpu-ram", type=float, metavar="GB", help="per card")
    g.add_argument("--max-dph", type=float, metavar="USD", help="max $/hour per box")
    g.add_argument("--min-reliability", type=float, default=0.95)
    g.add_argument("--min-cuda", type=float, help="e.g. 12.4")
    g.add_argument("--disk", type=float, default=40.0, metavar="GB")
    g.add_argument(
        "--interruptible", action="store_true", help="bid for interruptible (default on-demand)"
    )
    g.add_argument("--quarantine-file", type=Path, help="default <state-dir>/quarantine.txt")
    g.add_argument(
        "--exclude-machine",
        type=int,
        action="append",
        default=[],
        metavar="ID",
        help="skip this machine id (repeatable), on top of the quarantine file",
    )
    return p


def build_parser() -> argparse.ArgumentParser:
    common, offer_opts = _common(), _offer_options()
    parser = OneLineParser(
        prog=PROG, description="Cheap parallel GPU runs on vast.ai, with guards."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("offers", parents=[common, offer_opts], help="search and rank offers")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("up", parents=[common, offer_opts], help="rent N boxes and run")
    p.add_argument("-n", "--count", type=int, help="number of boxes (default: one per seed)")
    p.add_argument("--run", required=True, help='e.g. "rl-harness experiments.x.experiment"')
    p.add_argument("--seeds", help="one seed per box: 0-3 or 1,5,7 ({seed} or --seed S)")
    p.add_argument("--max-hours", type=float, default=6.0, help="box self-destructs by then")
    p.add_argument("--max-total-dollars", type=float, default=25.0, help="refuse above this")
    p.add_argument("--image", default=DEFAULT_IMAGE)
    p.add_argument("--results-branch", default="results")
    p.add_argument("--experiment-repo", type=Path, default=Path("."))
    p.add_argument("--experiment-url", help="clone URL (default: its origin remote)")
    p.add_argument("--experiment-commit", help="with --experiment-url: skip local checks")
    p.add_argument("--library-repo", type=Path, help="default: this rl_harness checkout")
    p.add_argument("--library-url", help="clone URL (default: its origin remote)")
    p.add_argument("--library-commit", help="with --library-url: skip local checks")
    p.add_argument("--forward-b2", action="store_true", help="give boxes the local B2_* vars")
    p.add_argument("--forward-git", action="store_true", help="give boxes a git push token")
    p.add_argument("--dry-run", action="store_true", help="print the plan; rent nothing")
    p.add_argument("--show-script", action="store_true", help="print box 0's bootstrap")

    p = sub.add_parser("status", parents=[common], help="our instances, reconciled with vast")
    p.add_argument("--all", action="store_true", help="include ended instances")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("logs", parents=[common], help="an instance's container log")
    p.add_argument("instance_id", type=int)
    p.add_argument("--tail", type=int, default=200)

    p = sub.add_parser("ssh", parents=[common], help="ssh into an instance (tmux session rlh)")
    p.add_argument("instance_id", type=int)
    p.add_argument("--attach-key", type=Path, metavar="PUBKEY", help="attach this key first")
    p.add_argument("--print", action="store_true", help="print the ssh command only")

    p = sub.add_parser("destroy", parents=[common], help="destroy instances (never only stop)")
    p.add_argument("instance_ids", type=int, nargs="*")
    p.add_argument("--all", action="store_true", help="every instance of ours (state + label)")
    p.add_argument("--overdue", action="store_true", help="ours past their deadline")

    p = sub.add_parser("quarantine", parents=[common], help="machines never to rent again")
    p.add_argument("action", choices=["add", "list"])
    p.add_argument("machine_id", type=int, nargs="?")
    p.add_argument("--reason", default="")
    p.add_argument("--quarantine-file", type=Path)
    return parser


# -- helpers ----------------------------------------------------------------------------------


def _state(args: argparse.Namespace) -> StateFile:
    return StateFile(args.state_dir)


def _quarantine_path(args: argparse.Namespace) -> Path:
    if getattr(args, "quarantine_file", None):
        return Path(args.quarantine_file)
    return _state(args).dir / "quarantine.txt"


def _quarantined(args: argparse.Namespace) -> frozenset[int]:
    return read_quarantine(_quarantine_path(args)) | frozenset(args.exclude_machine)


def _filters(args: argparse.Namespace) -> OfferFilters:
    return OfferFilters(
        gpu_name=args.gpu_name,
        num_gpus=args.num_gpus,
        min_gpu_ram_gb=args.min_gpu_ram,
        max_dph=args.max_dph,
        min_reliability=args.min_reliability,
        min_cuda=args.min_cuda,
        disk_gb=args.disk,
        interruptible=args.interruptible,
    )


def _client(args: argparse.Namespace, out: _Out, *, need_key: bool = True) -> VastClient:
    try:
        key: str | None = load_api_key()
    except MissingAPIKey:
        if need_key:
            raise
        key = None
    return VastClient(key, resolve_base_url(args.url), notify=out.err)


# -- commands ---------------------------------------------------------------------------------


def cmd_offers(args: argparse.Namespace, out: _Out) -> int:
    filters = _filters(args)
    quarantined = _quarantined(args)
    client = _client(args, out, need_key=False)
    ranked = find_offers(client, filters, quarantined)[: args.top]
    if args.json:
        out(json.dumps([o.to_dict() for o in ranked], indent=2))
        return 0
    if not ranked:
        out(f"no offers match (quarantined machines excluded: {len(quarantined)})")
        return 0
    rows = [
        [
            o.id,
            o.machine_id,
            f"{o.num_gpus}x {o.gpu_name}",
            f"{o.gpu_ram_gb:.0f}",
            f"{o.dph:.3f}",
            f"{o.reliability:.3f}",
            f"{o.dlperf:.1f}",
            f"{o.score:.1f}",
        ]
        for o in ranked
    ]
    header = ["offer", "machine", "gpus", "GB", "$/h", "reliab", "dlperf", "score"]
    out(text_table(header, rows))
    out(f"score = reliability * dlperf / ($/h); quarantined machines excluded: {len(quarantined)}")
    return 0


def _print_plan(plan: LaunchPlan, out: _Out) -> None:
    request = plan.request
    out(f"launch {plan.launch_id}: {len(plan.boxes)} of {request.count} boxes planned")
    out(f"experiment {request.experiment.url} @ {request.experiment.commit[:12]}")
    out(f"library    {request.library.url} @ {request.library.commit[:12]}")
    out(f"results -> branch {request.results_branch!r}")
    if plan.boxes:
        rows = [
            [
                b.label,
                b.offer.id,
                b.offer.machine_id,
                f"{b.offer.num_gpus}x {b.offer.gpu_name}",
                f"{b.offer.dph:.3f}",
                f"{b.offer.reliability:.3f}",
                f"{b.offer.score:.1f}",
                "-" if b.seed is None else b.seed,
                shlex.join(b.argv),
            ]
            for b in plan.boxes
        ]
        out(
            text_table(
                ["label", "offer", "machine", "gpus", "$/h", "reliab", "score", "seed", "command"],
                rows,
            )
        )
    out(
        f"cost: ${plan.dph_total:.3f}/h for all boxes; at most ${plan.worst_case_dollars:.2f} "
        f"for --max-hours {request.max_hours:g} (limit ${request.max_total_dollars:g})"
    )
    if request.forwarded_env:
        out("forwarding to boxes: " + ", ".join(sorted(request.forwarded_env)))
    for reason in plan.refusals:
        out(f"REFUSED: {reason}")


def cmd_up(args: argparse.Namespace, out: _Out) -> int:
    seeds = parse_seeds(args.seeds) if args.seeds else None
    count = args.count if args.count is not None else (len(seeds) if seeds else 1)
    forwarded = forwarded_env(os.environ, forward_b2=args.forward_b2, forward_git=args.forward_git)
    out.redact.add(*forwarded.values())
    experiment, library, problems = resolve_repos(
        args.experiment_repo,
        args.library_repo,
        experiment_url=args.experiment_url,
        experiment_commit=args.experiment_commit,
        library_url=args.library_url,
        library_commit=args.library_commit,
    )
    if experiment is None or library is None:
        for reason in problems:
            out.err(f"REFUSED: {reason}")
        return 1
    request = LaunchRequest(
        command=args.run,
        count=count,
        seeds=tuple(seeds) if seeds else None,
        filters=_filters(args),
        max_hours=args.max_hours,
        max_total_dollars=args.max_total_dollars,
        experiment=experiment,
        library=library,
        results_branch=args.results_branch,
        image=args.image,
        label_prefix=args.label_prefix,
        forwarded_env=forwarded,
        upload_b2=args.forward_b2,
    )
    client = _client(args, out, need_key=not args.dry_run)
    plan = plan_launch(client, request, _quarantined(args), repo_problems=problems)
    _print_plan(plan, out)
    if args.show_script and plan.boxes:
        out("--- bootstrap script of box 0 ---")
        out(render_bootstrap(bootstrap_params(plan, plan.boxes[0])))
    if args.dry_run:
        out("dry run: nothing rented")
        return 1 if plan.refusals else 0
    if plan.refusals:
        return 1
    records = execute_launch(
        client,
        plan,
        _state(args),
        on_created=lambda record: out(
            f"rented instance {record.instance_id} ({record.label}, {record.gpu_name}, "
            f"${record.dph:.3f}/h, seed {record.seed})"
        ),
    )
    out(f"{len(records)} boxes up; follow with `rl-harness vast status`")
    return 0


def cmd_status(args: argparse.Namespace, out: _Out) -> int:
    report = status_report(
        _client(args, out), _state(args), label_prefix=args.label_prefix, include_ended=args.all
    )
    rows, as_json = [], []
    for item in report.tracked:
        as_json.append(item)
        rows.append(
            [
                item["instance_id"],
                item["label"],
                item["status"] + (" OVERDUE" if item["overdue"] else ""),
                item["vast_status"] or "-",
                item["gpu"],
                f"{item['dph']:.3f}",
                f"{item['hours']:.2f}",
                f"{item['cost_so_far']:.2f}",
                "-" if item["seed"] is None else item["seed"],
            ]
        )
    for i in report.untracked:
        as_json.append(
            {
                "instance_id": int(i["id"]),
                "label": i.get("label"),
                "status": "untracked",
                "vast_status": i.get("actual_status"),
            }
        )
        rows.append(
            [
                i["id"],
                i.get("label"),
                "UNTRACKED",
                i.get("actual_status") or "-",
                f"{i.get('num_gpus', '?')}x {i.get('gpu_name', '?')}",
                f"{float(i.get('dph_total') or 0):.3f}",
                "-",
                "-",
                "-",
            ]
        )
    if args.json:
        out(json.dumps(as_json, indent=2))
        return 0
    if not rows:
        out("no active instances")
        return 0
    header = ["id", "label", "status", "vast", "gpus", "$/h", "hours", "$ so far", "seed"]
    out(text_table(header, rows))
    out(f"burning ${report.burn_dph:.3f}/h across {report.active_count} boxes")
    return 0


def cmd_logs(args: argparse.Namespace, out: _Out) -> int:
    out(_client(args, out).request_logs(args.instance_id, tail=args.tail).rstrip("\n"))
    return 0


def cmd_ssh(args: argparse.Namespace, out: _Out) -> int:
    client = _client(args, out)
    if args.attach_key:
        client.attach_ssh_key(args.instance_id, args.attach_key.expanduser().read_text())
        out(f"attached {args.attach_key} to instance {args.instance_id}")
    try:
        argv = ssh_argv(client, args.instance_id)
    except NoSSHAddress as err:
        out.err(str(err))
        return 1
    if args.print:
        out(shlex.join(argv))
        return 0
    os.execvp("ssh", argv)
    return 0  # not reached


def cmd_destroy(args: argparse.Namespace, out: _Out) -> int:
    state = _state(args)
    client = _client(args, out)
    chosen = destroy_targets(
        client,
        state,
        args.instance_ids,
        every=args.all,
        overdue=args.overdue,
        label_prefix=args.label_prefix,
    )
    if chosen.listing_error is not None:
        out.err(
            f"could not list vast instances ({chosen.listing_error}); acting on the state file only"
        )
    if not chosen.targets:
        out.err("nothing to destroy: name instance ids, or --all / --overdue")
        if chosen.listing_error is not None:
            return 1
        return 0 if (args.all or args.overdue) else 2
    failed = []
    for instance_id in sorted(chosen.targets):
        try:
            existed = destroy_instance(client, state, instance_id)
        except VastAPIError as err:
            failed.append(instance_id)
            out.err(f"could not destroy {instance_id}: {err}")
            continue
        out(f"destroyed {instance_id}" if existed else f"{instance_id} was already gone")
    return 1 if failed or chosen.listing_error is not None else 0


def cmd_quarantine(args: argparse.Namespace, out: _Out) -> int:
    path = _quarantine_path(args)
    if args.action == "add":
        if args.machine_id is None:
            out.err(f"{PROG} quarantine: error: quarantine add needs a machine id")
            return EXIT_USAGE
        add_to_quarantine(path, args.machine_id, args.reason)
        out(f"machine {args.machine_id} quarantined ({path})")
        return 0
    for machine_id in sorted(read_quarantine(path)):
        out(str(machine_id))
    return 0


COMMANDS = {
    "offers": cmd_offers,
    "up": cmd_up,
    "status": cmd_status,
    "logs": cmd_logs,
    "ssh": cmd_ssh,
    "destroy": cmd_destroy,
    "quarantine": cmd_quarantine,
}


def main(argv: list[str]) -> int:
    """`rl-harness vast ...`: bad input is one redacted `rl-harness vast: error:` line (exit
    code 2); a failed command one `rl-harness vast COMMAND: error:` line (exit code 1)."""
    redactor = Redactor()
    try:
        redactor.add(load_api_key())
    except MissingAPIKey:
        pass
    out = _Out(redactor)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as error:
        out.err(f"{PROG}: error: {error}")
        return EXIT_USAGE
    try:
        return COMMANDS[args.command](args, out)
    except (VastAPIError, LaunchError, MissingAPIKey, ValueError, OSError) as err:
        out.err(f"{PROG} {args.command}: error: {err}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        out.err("interrupted")
        return 130
