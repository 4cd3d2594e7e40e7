"""Flags that several commands share, and their value types: the cluster (`--kubeconfig`,
`--context`, `--scheduler-name`), what both processes take (`--metrics-address`, `--log-format`,
leader election), the time limit of the commands that run a scenario, and durations written
as the reference writes them ("1s", "500ms") or as plain seconds ("0.5")."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from kaipolicy.cache.convert import go_duration


def seconds(text: str) -> float:
    """A duration: plain seconds ("1.5") or a Go duration ("1s", "200ms", "1m30s"); never negative,
    never infinite or NaN."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = go_duration(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a duration (seconds, or e.g. 500ms, 1s, 2m)") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite duration")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


#: seconds one scenario may run (--time-limit): a file from a pull request cannot hold CI up, and a
#: command on one file ends within 30 s, start-up and loading the rules included
DEFAULT_TIME_LIMIT = 25.0


def time_limit_argument(p: argparse.ArgumentParser) -> None:
    """`--time-limit` of the commands that run a scenario (simulate, explain)."""
    p.add_argument("--time-limit", type=seconds, default=DEFAULT_TIME_LIMIT, metavar="SECONDS",
                   help=f"stop a scenario that runs longer, with an error (default {DEFAULT_TIME_LIMIT:g}; "
                        "0: no limit)")


def positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    """`kind` (int, float, seconds) that must be above zero."""
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    parse.__name__ = getattr(kind, "__name__", "value")    # argparse names the type in its errors
    return parse


def cluster_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of every command that talks to a cluster."""
    p.add_argument("--kubeconfig", metavar="FILE", help="default: in-cluster credentials, then ~/.kube/config")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current one)")
    p.add_argument("--scheduler-name", default="kai-scheduler", metavar="NAME",
                   help="pods' schedulerName (default %(default)s)")


def daemon_arguments(p: argparse.ArgumentParser, retry_period: float) -> None:
    """What `kaipolicy run` and `kaipolicy binder` both take: endpoints, logs, leader election
    (`retry_period`: the reference component's own default)."""
    p.add_argument("--metrics-address", default=":8080", metavar="HOST:PORT",
                   help="where /metrics, /healthz and /readyz are served (default %(default)s; port 0: any free "
                        "port, logged; '': none)")
    p.add_argument("--log-format", choices=("json", "text"), default="json", help="default %(default)s")
    le = p.add_argument_group("leader election")
    le.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                    help="act only while holding the leader Lease (default: on)")
    le.add_argument("--lease-namespace", "--namespace", dest="lease_namespace", metavar="NAMESPACE",
                    help="namespace of the Lease (default: the pod's own namespace, else kai-scheduler)")
    le.add_argument("--lease-duration", type=positive(seconds), default=15.0, metavar="SECONDS",
                    help="default %(default)s")
    le.add_argument("--renew-deadline", type=positive(seconds), default=10.0, metavar="SECONDS",
                    help="default %(default)s")
    le.add_argument("--retry-period", type=positive(seconds), default=retry_period, metavar="SECONDS",
                    help="default %(default)s")
