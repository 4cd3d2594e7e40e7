"""`kaipolicy run` put together: endpoints first (so /healthz answers while the informers list),
the cluster source, the shard (its partition names the Lease), leader election, the loop; and a
clean end on SIGTERM or SIGINT: the gang being written is finished, nothing new is started, queued
Events and status writes get two seconds, the Lease is released.
"""

from __future__ import annotations

import logging
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from kaipolicy import metrics
from kaipolicy.cache import kubeapi
from kaipolicy.cache.k8s_source import K8sSource
from kaipolicy.cache.kubeapi import KubeApi
from kaipolicy.cache.outbox import Outbox
from kaipolicy.daemon import logs
from kaipolicy.daemon.endpoints import Endpoints
from kaipolicy.daemon.leader import LeaderElector, default_identity, lease_name
from kaipolicy.daemon.signals import stopping_on_signals
from kaipolicy.errors import InputError, ObjectError
from kaipolicy.server.commit import Committer
from kaipolicy.server.loop import Loop
from kaipolicy.server.reload import Reloader, Report
from kaipolicy.server.settings import Settings
from kaipolicy.workflow.bundles import default_policies, load

log = logging.getLogger("kaipolicy.server")


class Readiness:
    """Why the scheduler is not ready (None once it is): set as start-up goes on."""

    def __init__(self) -> None:
        self.problem: str | None = "listing the cluster's objects"
        self.reloader: Reloader | None = None
        self.elector: LeaderElector | None = None

    def __call__(self) -> str | None:
        if self.problem is not None:
            return self.problem
        if self.reloader is not None and self.reloader.current is None:
            return self.reloader.problem
        if self.elector is not None and self.elector.last_error and not self.elector.leading():
            return f"leader election fails: {self.elector.last_error}"
        return None


def run(settings: Settings) -> int:
    logs.configure(settings.log_format)
    stopping = threading.Event()
    readiness = Readiness()
    with ExitStack() as stack, stopping_on_signals(stopping, "finishing the write in progress, then stopping"):
        default = load(list(settings.policies) or None)
        bundled = ", ".join(settings.policies) if settings.policies else f"bundled rules ({default_policies()})"
        if settings.metrics_address:
            endpoints = Endpoints(settings.metrics_address, readiness)
            endpoints.start()
            stack.callback(endpoints.stop)
        api = KubeApi(settings.kubeconfig, settings.context)
        stack.callback(api.close)
        source = K8sSource(api, settings.scheduler_name, settings.shard, delta=not settings.full_snapshots)
        source.start(settings.sync_timeout)
        stack.callback(source.stop)
        partition = _partition(source, settings, readiness, stopping)
        if partition is None:
            return 0
        outbox = Outbox(api, settings.event_window, component=settings.scheduler_name)
        stack.callback(outbox.stop)
        reloader = Reloader(default, bundled, _reporter(source, outbox, settings))
        readiness.reloader, readiness.problem = reloader, None
        identity = default_identity()
        elector = None
        if settings.leader_elect:
            elector = LeaderElector(api, settings.namespace, lease_name(settings.scheduler_name, partition), identity,
                                    settings.lease, gauge=metrics.LEADER)
            elector.start()
            readiness.elector = elector
            stack.callback(elector.stop)     # runs first: the Lease is released before the rest stops
        loop = Loop(source, reloader, Committer(api, source, outbox, settings.bind_backoff_limit, partition),
                    settings.schedule_period, settings.catch_up_timeout, elector,
                    _audit_file(stack, settings.audit), f"cluster {api.host}, scheduler {identity}", stopping=stopping)
        log.info("scheduling pods of schedulerName %s%s as %s", settings.scheduler_name,
                 f" in shard {settings.shard} (partition {partition or 'none'})" if settings.shard else "", identity,
                 extra={"identity": identity, "shard": settings.shard, "partition": partition})
        loop.run()
        log.info("stopping after cycle %d", loop.cycle)
    return 0


def _partition(source: K8sSource, settings: Settings, readiness: Readiness, stopping: threading.Event) -> str | None:
    """The shard's partition label value ('' without a shard); waits while the named shard is
    missing or malformed (not ready, saying why); None when stopped while waiting."""
    while not stopping.is_set():
        try:
            view = source.shard()
        except ObjectError as e:
            if readiness.problem != str(e):
                log.error("cannot schedule yet: %s", e)
            readiness.problem = str(e)
            stopping.wait(settings.schedule_period)
            continue
        return view.partition if view is not None else ""
    return None


def _reporter(source: K8sSource, outbox: Outbox, settings: Settings) -> Report:
    def report(kind: str, namespace: str, name: str, message: str) -> None:
        if kind == "SchedulingShard":
            informer = source.informers.get("SchedulingShard")
            obj = informer.get(settings.shard) if informer is not None and settings.shard else None
            if obj is not None:
                outbox.event(kubeapi.SCHEDULING_SHARD, obj, "RuleBundleRefused", message, "Warning")
            return
        informer = source.bundle_informers.get((namespace, name))
        obj = informer.get(f"{namespace}/{name}") if informer is not None else None
        if obj is not None:
            outbox.event(kubeapi.CONFIG_MAP, obj, "RuleBundleRefused", message, "Warning")
    return report


def _audit_file(stack: ExitStack, path: str | None) -> IO[str] | None:
    if not path:
        return None
    try:
        return stack.enter_context(Path(path).open("a", encoding="utf-8"))
    except OSError as e:
        raise InputError(f"--audit {path}: cannot open it for appending: {e.strerror or e}") from e
