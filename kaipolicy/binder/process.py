"""A binder process from start to stop: watch, wait to lead, work while leading, and on a stop
request (SIGTERM) let the workers finish the attempt in hand, then give the lease up. Losing
the lease stops the workers at once: another replica is about to act."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kaipolicy import metrics
from kaipolicy.binder.reconciler import Reconciler
from kaipolicy.binder.settings import BinderSettings
from kaipolicy.cache.informer import Backoff
from kaipolicy.cache.kubeapi import KubeApi
from kaipolicy.cache.lease import LeaderElector

log = logging.getLogger("kaipolicy.binder")

EXIT_LOST_LEASE = 3


def run_binder(api: KubeApi, settings: BinderSettings, stop: threading.Event,
               serve: Callable[[Reconciler], Callable[[], None]] | None = None,
               backoff: Callable[[], Backoff] = Backoff, sync_timeout: float = 60.0) -> int:
    """Run until `stop` is set (0) or the lease is lost (EXIT_LOST_LEASE). `serve` starts the
    endpoints for the reconciler and returns what stops them."""
    reconciler = Reconciler(api, settings, threading.Event(), backoff=backoff)
    close = serve(reconciler) if serve else (lambda: None)
    elector = LeaderElector(api, settings.lease_namespace, settings.lease_name, timings=settings.lease) \
        if settings.leader_election else None
    code = 0
    try:
        reconciler.start(sync_timeout)
        log.info("watching BindRequests of scheduler %s", settings.scheduler_name)
        if elector is not None and not elector.acquire(stop):
            return 0
        metrics.BINDER_LEADER.set(1)
        reconciler.run()
        if elector is not None:
            code = 0 if elector.hold(stop) else EXIT_LOST_LEASE
        else:
            stop.wait()
    finally:
        reconciler.stop()
        metrics.BINDER_LEADER.set(0)
        if elector is not None and code == 0:
            elector.release()
        close()
    log.info("binder stopped")
    return code
