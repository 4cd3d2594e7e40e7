"""`kaipolicy run`: the scheduler process on a cluster (flags below; details in docs/operations.md)."""

from __future__ import annotations

import argparse
from typing import Any

from kaipolicy.cli.snapshot import cluster_arguments
from kaipolicy.server.leader import Timing


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="schedule a cluster's pods: write BindRequests for them (the scheduler process)")
    cluster_arguments(p)
    p.add_argument("--shard", metavar="NAME", help="the SchedulingShard to serve: its partition, configuration and "
                   "rule bundle (default: none: the objects without a node-pool label, the bundled rules)")
    p.add_argument("--schedule-period", type=float, default=1.0, metavar="SECONDS",
                   help="pause between cycles (default %(default)s)")
    p.add_argument("--metrics-address", default=":8080", metavar="HOST:PORT",
                   help="where /metrics, /healthz and /readyz are served (default %(default)s; port 0: any free port)")
    p.add_argument("--audit", metavar="FILE", help="append every cycle's audit records (JSON lines) here")
    p.add_argument("--policies", action="append", metavar="DIR",
                   help="rule files or folders to run when the shard names no rule ConfigMaps "
                        "(default: the bundled rules)")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help="schedule only while holding the leader Lease (default: on)")
    p.add_argument("--namespace", default="kai-scheduler", help="namespace of the leader-election Lease "
                   "(default %(default)s)")
    p.add_argument("--lease-duration", type=float, default=Timing.lease, metavar="SECONDS",
                   help="default %(default)s")
    p.add_argument("--renew-deadline", type=float, default=Timing.renew_deadline, metavar="SECONDS",
                   help="default %(default)s")
    p.add_argument("--retry-period", type=float, default=Timing.retry, metavar="SECONDS", help="default %(default)s")
    p.add_argument("--bind-backoff-limit", type=int, default=3, metavar="N",
                   help="binding attempts the binder makes before the pod is placed afresh (default %(default)s)")
    p.add_argument("--event-window", type=float, default=300.0, metavar="SECONDS",
                   help="an Event with the same reason and message on the same object is not sent again within "
                        "this time (default %(default)s)")
    p.add_argument("--sync-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="how long the informers' first lists may take (default %(default)s)")
    p.add_argument("--log-format", choices=("json", "text"), default="json", help="default %(default)s")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kaipolicy.server.app import run as serve
    from kaipolicy.server.settings import Settings

    settings = Settings(
        kubeconfig=args.kubeconfig, context=args.context, scheduler_name=args.scheduler_name, shard=args.shard,
        schedule_period=args.schedule_period, metrics_address=args.metrics_address, audit=args.audit,
        policies=tuple(args.policies or ()), leader_elect=args.leader_elect, namespace=args.namespace,
        lease=Timing(args.lease_duration, args.renew_deadline, args.retry_period),
        bind_backoff_limit=args.bind_backoff_limit, event_window=args.event_window, sync_timeout=args.sync_timeout,
        log_format=args.log_format)
    return serve(settings)
