"""`kaipolicy run`'s flags: the reference's defaults, and every impossible value refused at once."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.cli.main import build_parser
from kaipolicy.errors import ConfigError
from kaipolicy.server.leader import Timing
from kaipolicy.server.settings import Settings


def test_the_defaults_are_the_reference_schedulers() -> None:
    args = build_parser().parse_args(["run"])
    assert (args.scheduler_name, args.schedule_period, args.metrics_address, args.leader_elect, args.namespace) == (
        "kai-scheduler", 1.0, ":8080", True, "kai-scheduler")
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (15.0, 10.0, 5.0)
    assert build_parser().parse_args(["run", "--no-leader-elect"]).leader_elect is False


@pytest.mark.parametrize(("given", "says"), [
    ({"schedule_period": 0}, "--schedule-period must be above 0"),
    ({"lease": Timing(2.5, 1, 0.5)}, "--lease-duration must be a whole number of seconds"),
    ({"lease": Timing(15, 15, 5)}, "--retry-period < --renew-deadline < --lease-duration"),
    ({"lease": Timing(15, 10, 0)}, "--retry-period < --renew-deadline"),
    ({"bind_backoff_limit": -1}, "--bind-backoff-limit cannot be negative"),
    ({"event_window": -1}, "--event-window cannot be negative"),
    ({"scheduler_name": ""}, "--scheduler-name cannot be empty"),
])
def test_impossible_settings_are_refused_naming_the_flag(given: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says.replace("-", "\\-").replace("<", "\\<")):
        Settings(**given)
