"""`kaipolicy binder`: the binder process. Carries out the scheduler's BindRequests (GPU-sharing
reservations, pods/binding, status, retries with backoff) until SIGTERM; leader-elected, with
`/metrics`, `/healthz` and `/readyz`. Logs are JSON lines on stderr."""

from __future__ import annotations

import argparse
from typing import Any

from kaipolicy.cli.flags import cluster_arguments, daemon_arguments, positive, seconds


def register(sub: Any) -> None:
    p = sub.add_parser("binder", help="run the binder: carry out the scheduler's BindRequests")
    cluster_arguments(p)
    p.add_argument("--workers", type=positive(int), default=10, help="pods bound at once (default %(default)s)")
    p.add_argument("--retry-base-delay", type=positive(seconds), default=1.0, metavar="DURATION",
                   help="wait before the first retry of a failed binding, doubled after each (default %(default)s)")
    p.add_argument("--retry-max-delay", type=positive(seconds), default=60.0, metavar="DURATION",
                   help="longest wait between attempts (default %(default)s)")
    r = p.add_argument_group("GPU-sharing reservations")
    r.add_argument("--reservation-namespace", default="kai-resource-reservation")
    r.add_argument("--reservation-image", default="ghcr.io/nvidia/kai-scheduler/resourcereservation:v0.20.1",
                   help="image of the reservation pods (KAI Scheduler's: it reports its GPU through NVML)")
    r.add_argument("--reservation-service-account", default="kai-resource-reservation")
    r.add_argument("--reservation-app-label", default="kai-resource-reservation")
    r.add_argument("--reservation-runtime-class", default="", help="runtimeClassName of the reservation pods")
    r.add_argument("--reservation-timeout", type=positive(seconds), default=40.0, metavar="DURATION",
                   help="how long a new reservation pod has to report its GPU (default %(default)s)")
    r.add_argument("--reservation-resync", type=positive(seconds), default=60.0, metavar="DURATION",
                   help="period of the sweep for unused reservations (default %(default)s)")
    daemon_arguments(p, retry_period=2.0)     # controller-runtime's retry period, as KAI's binder has it
    p.add_argument("--lease-name", default="kaipolicy-binder", help="the Lease (default %(default)s)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kaipolicy.binder.process import run_binder
    from kaipolicy.cache.kubeapi import KubeApi
    from kaipolicy.daemon import logs

    logs.configure(args.log_format)
    settings = settings_of(args)
    api = KubeApi(args.kubeconfig, args.context, pool_size=settings.workers + 8)
    try:
        return run_binder(api, settings)
    finally:
        api.close()


def settings_of(args: argparse.Namespace) -> Any:
    from kaipolicy.binder.settings import BinderSettings, ReservationSettings
    from kaipolicy.daemon.leader import LeaseTimings, own_namespace

    timings = LeaseTimings(args.lease_duration, args.renew_deadline, args.retry_period)
    reservations = ReservationSettings(args.reservation_namespace, args.reservation_image,
                                       args.reservation_service_account, args.reservation_app_label,
                                       args.reservation_runtime_class, args.reservation_timeout)
    return BinderSettings(args.scheduler_name, int(args.workers), args.retry_base_delay, args.retry_max_delay,
                          args.reservation_resync, reservations, args.leader_elect,
                          args.lease_namespace or own_namespace(), args.lease_name, timings, args.metrics_address)
