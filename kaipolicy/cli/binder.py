"""`kaipolicy binder`: the binder process. Carries out the scheduler's BindRequests (GPU-sharing
reservations, pods/binding, status, retries with backoff) until SIGTERM; leader-elected, with
`/metrics`, `/healthz` and `/readyz`. Logs are JSON lines on stderr."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from kaipolicy.errors import InputError

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def register(sub: Any) -> None:
    p = sub.add_parser("binder", help="run the binder: carry out the scheduler's BindRequests")
    p.add_argument("--kubeconfig", metavar="FILE", help="default: in-cluster credentials, then ~/.kube/config")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current one)")
    p.add_argument("--scheduler-name", default="kai-scheduler", help="pods' schedulerName (default %(default)s)")
    p.add_argument("--workers", type=_positive(int), default=10, help="pods bound at once (default %(default)s)")
    p.add_argument("--metrics-address", default=":8080", metavar="HOST:PORT",
                   help="serves /metrics, /healthz, /readyz (default %(default)s; '' for none)")
    p.add_argument("--retry-base-delay", type=_positive(float), default=1.0, metavar="SECONDS",
                   help="wait before the first retry of a failed binding, doubled after each (default %(default)s)")
    p.add_argument("--retry-max-delay", type=_positive(float), default=60.0, metavar="SECONDS",
                   help="longest wait between attempts (default %(default)s)")
    r = p.add_argument_group("GPU-sharing reservations")
    r.add_argument("--reservation-namespace", default="kai-resource-reservation")
    r.add_argument("--reservation-image", default="ghcr.io/nvidia/kai-scheduler/resourcereservation:v0.20.1",
                   help="image of the reservation pods (KAI Scheduler's: it reports its GPU through NVML)")
    r.add_argument("--reservation-service-account", default="kai-resource-reservation")
    r.add_argument("--reservation-app-label", default="kai-resource-reservation")
    r.add_argument("--reservation-runtime-class", default="", help="runtimeClassName of the reservation pods")
    r.add_argument("--reservation-timeout", type=_positive(float), default=40.0, metavar="SECONDS",
                   help="how long a new reservation pod has to report its GPU (default %(default)s)")
    r.add_argument("--reservation-resync", type=_positive(float), default=60.0, metavar="SECONDS",
                   help="period of the sweep for unused reservations (default %(default)s)")
    le = p.add_argument_group("leader election")
    le.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                    help="bind only while holding the Lease (default on)")
    le.add_argument("--lease-name", default="kaipolicy-binder")
    le.add_argument("--lease-namespace", help="default: the pod's own namespace, else 'default'")
    le.add_argument("--lease-duration", type=_positive(float), default=15.0, metavar="SECONDS")
    le.add_argument("--renew-deadline", type=_positive(float), default=10.0, metavar="SECONDS")
    le.add_argument("--retry-period", type=_positive(float), default=2.0, metavar="SECONDS")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kaipolicy.binder.endpoints import Endpoints
    from kaipolicy.binder.process import run_binder
    from kaipolicy.binder.reconciler import Reconciler
    from kaipolicy.cache.kubeapi import KubeApi

    _log_json()
    settings = settings_of(args)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def serve(reconciler: Reconciler) -> Any:
        if not args.metrics_address:
            return lambda: None
        endpoints = Endpoints(args.metrics_address, reconciler.alive, reconciler.synced)
        endpoints.start()
        logging.getLogger("kaipolicy.binder").info("serving /metrics on port %d", endpoints.port)
        return endpoints.stop

    api = KubeApi(args.kubeconfig, args.context, pool_size=settings.workers + 8)
    try:
        return run_binder(api, settings, stop, serve)
    finally:
        api.close()


def settings_of(args: argparse.Namespace) -> Any:
    from kaipolicy.binder.settings import BinderSettings, ReservationSettings
    from kaipolicy.cache.lease import LeaseTimings

    timings = LeaseTimings(args.lease_duration, args.renew_deadline, args.retry_period)
    if not timings.retry_period < timings.renew_deadline < timings.duration:
        raise InputError("leader election needs --retry-period < --renew-deadline < --lease-duration")
    reservations = ReservationSettings(args.reservation_namespace, args.reservation_image,
                                       args.reservation_service_account, args.reservation_app_label,
                                       args.reservation_runtime_class, args.reservation_timeout)
    return BinderSettings(args.scheduler_name, args.workers, args.retry_base_delay, args.retry_max_delay,
                          args.reservation_resync, reservations, args.leader_elect,
                          args.lease_namespace or _own_namespace(), args.lease_name, timings)


def _own_namespace() -> str:
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as fh:
            return fh.read().strip() or "default"
    except OSError:
        return "default"


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value
    return parse


class _JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
                "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def _log_json() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("KAIPOLICY_LOG_LEVEL", "INFO").upper())
