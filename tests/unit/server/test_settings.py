"""`kaipolicy run`'s flags: the reference's defaults, durations written as the reference writes them,
and every impossible value refused at once."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.cli.main import build_parser
from kaipolicy.daemon.leader import LeaseTimings
from kaipolicy.errors import ConfigError
from kaipolicy.server.settings import Settings


def test_the_defaults_are_the_reference_schedulers() -> None:
    args = build_parser().parse_args(["run"])
    assert (args.scheduler_name, args.schedule_period, args.metrics_address, args.leader_elect) == (
        "kai-scheduler", 1.0, ":8080", True)
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (15.0, 10.0, 5.0)
    assert Settings().lease == LeaseTimings(15.0, 10.0, 5.0) and Settings().namespace == "kai-scheduler"
    assert build_parser().parse_args(["run", "--no-leader-elect"]).leader_elect is False


@pytest.mark.parametrize("flag", ["--namespace", "--lease-namespace"])
def test_the_lease_namespace_is_named_as_the_reference_does_or_as_the_binder_does(flag: str) -> None:
    assert build_parser().parse_args(["run", flag, "ops"]).lease_namespace == "ops"


def test_periods_are_durations_as_the_reference_writes_them() -> None:
    args = build_parser().parse_args(["run", "--schedule-period", "200ms", "--lease-duration", "2s",
                                      "--renew-deadline", "1.5", "--retry-period", "250ms", "--event-window", "5m"])
    assert (args.schedule_period, args.lease_duration, args.renew_deadline, args.retry_period, args.event_window) == (
        0.2, 2.0, 1.5, 0.25, 300.0)


@pytest.mark.parametrize(("given", "says"), [
    ({"schedule_period": 0}, "--schedule-period must be above 0"),
    ({"bind_backoff_limit": -1}, "--bind-backoff-limit cannot be negative"),
    ({"event_window": -1}, "--event-window cannot be negative"),
    ({"scheduler_name": ""}, "--scheduler-name cannot be empty"),
])
def test_impossible_settings_are_refused_naming_the_flag(given: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("-", "\\-").replace("<", "\\<")):
        Settings(**given)
