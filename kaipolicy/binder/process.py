"""A binder process from start to stop: watch, wait to lead, work while leading, and on a stop
request (SIGTERM) let the workers finish the attempt in hand, then give the Lease up. Losing
the Lease stops the workers at once: another replica is about to act."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import ExitStack

from kaipolicy import metrics
from kaipolicy.binder.reconciler import Reconciler
from kaipolicy.binder.settings import BinderSettings
from kaipolicy.cache.informer import Backoff
from kaipolicy.cache.kubeapi import KubeApi
from kaipolicy.daemon.endpoints import Check, Endpoints
from kaipolicy.daemon.leader import LeaderElector
from kaipolicy.daemon.signals import stopping_on_signals

log = logging.getLogger("kaipolicy.binder")

EXIT_LOST_LEASE = 3


def run_binder(api: KubeApi, settings: BinderSettings, stop: threading.Event | None = None, *,
               backoff: Callable[[], Backoff] = Backoff, sync_timeout: float = 60.0,
               started: Callable[[Reconciler], None] | None = None) -> int:
    """Run until `stop` is set, or SIGTERM without one (0), or until the Lease is lost
    (EXIT_LOST_LEASE). `started` is told the reconciler before it starts watching."""
    with ExitStack() as stack:
        if stop is None:
            stop = stack.enter_context(stopping_on_signals(threading.Event(), "finishing the attempts in hand"))
        reconciler = Reconciler(api, settings, threading.Event(), backoff=backoff)
        elector = LeaderElector(api, settings.lease_namespace, settings.lease_name, timings=settings.lease,
                                gauge=metrics.BINDER_LEADER) if settings.leader_election else None
        if settings.metrics_address:
            endpoints = Endpoints(settings.metrics_address, _readiness(reconciler, elector), _health(reconciler))
            endpoints.start()
            stack.callback(endpoints.stop)
        if started is not None:
            started(reconciler)
        try:
            return _serve(reconciler, elector, settings, stop, sync_timeout)
        finally:
            reconciler.stop()          # the attempts in hand end before the Lease goes
            if elector is not None:
                elector.stop()
            metrics.BINDER_LEADER.set(0)
            log.info("binder stopped")


def _serve(reconciler: Reconciler, elector: LeaderElector | None, settings: BinderSettings, stop: threading.Event,
           sync_timeout: float) -> int:
    reconciler.start(sync_timeout)
    log.info("watching BindRequests of scheduler %s", settings.scheduler_name)
    if elector is None:
        metrics.BINDER_LEADER.set(1)
        reconciler.run()
        stop.wait()
        return 0
    elector.start()
    if not elector.wait(stop, leading=True):
        return 0
    reconciler.run()
    if elector.wait(stop, leading=False):
        log.error("stopping: %s is lost, another replica binds now", elector.where)
        return EXIT_LOST_LEASE
    return 0


def _readiness(reconciler: Reconciler, elector: LeaderElector | None) -> Check:
    def ready() -> str | None:
        if not reconciler.synced():
            return "listing BindRequests and pods"
        if elector is not None and elector.last_error and not elector.leading():
            return f"leader election fails: {elector.last_error}"
        return None     # a replica standing by is ready too
    return ready


def _health(reconciler: Reconciler) -> Check:
    return lambda: None if reconciler.alive() else "a binder worker thread has stopped"
