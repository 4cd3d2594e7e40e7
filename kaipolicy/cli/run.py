"""`kaipolicy run`: the scheduler process on a cluster (flags below; details in docs/operations.md)."""

from __future__ import annotations

import argparse
from typing import Any

from kaipolicy.cli.flags import cluster_arguments, daemon_arguments, positive, seconds


def register(sub: Any) -> None:
    p = sub.add_parser("run", help="schedule a cluster's pods: write BindRequests for them (the scheduler process)")
    cluster_arguments(p)
    p.add_argument("--shard", metavar="NAME", help="the SchedulingShard to serve: its partition, configuration and "
                   "rule bundle (default: none: the objects without a node-pool label, the bundled rules)")
    p.add_argument("--schedule-period", type=positive(seconds), default=1.0, metavar="DURATION",
                   help="pause between cycles: seconds, or e.g. 500ms, 1s (default %(default)s)")
    p.add_argument("--audit", metavar="FILE", help="append every cycle's audit records (JSON lines) here")
    p.add_argument("--policies", action="append", metavar="DIR",
                   help="rule files or folders to run when the shard names no rule ConfigMaps "
                        "(default: the bundled rules)")
    p.add_argument("--bind-backoff-limit", type=int, default=3, metavar="N",
                   help="binding attempts the binder makes before the pod is placed afresh (default %(default)s)")
    p.add_argument("--event-window", type=seconds, default=300.0, metavar="DURATION",
                   help="an Event with the same reason and message on the same object is not sent again within "
                        "this time (default %(default)s)")
    p.add_argument("--sync-timeout", type=positive(seconds), default=60.0, metavar="DURATION",
                   help="how long the informers' first lists may take (default %(default)s)")
    p.add_argument("--full-snapshots", action="store_true",
                   help="rebuild every cycle's snapshot whole (the reference path) instead of from the objects "
                        "changed since the last cycle")
    daemon_arguments(p, retry_period=5.0)    # the reference scheduler's retry period
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kaipolicy.daemon.leader import LeaseTimings, own_namespace
    from kaipolicy.server.app import run as serve
    from kaipolicy.server.settings import Settings

    settings = Settings(
        kubeconfig=args.kubeconfig, context=args.context, scheduler_name=args.scheduler_name, shard=args.shard,
        schedule_period=args.schedule_period, metrics_address=args.metrics_address, audit=args.audit,
        policies=tuple(args.policies or ()), leader_elect=args.leader_elect,
        namespace=args.lease_namespace or own_namespace(),
        lease=LeaseTimings(args.lease_duration, args.renew_deadline, args.retry_period),
        bind_backoff_limit=args.bind_backoff_limit, event_window=args.event_window, sync_timeout=args.sync_timeout,
        log_format=args.log_format, full_snapshots=args.full_snapshots)
    return serve(settings)
