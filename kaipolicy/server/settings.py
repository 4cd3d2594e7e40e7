"""What `kaipolicy run` is told: every flag as one checked value (defaults are the reference
scheduler's where it has the same setting)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaipolicy.daemon.leader import LeaseTimings
from kaipolicy.errors import ConfigError


@dataclass(frozen=True)
class Settings:
    kubeconfig: str | None = None
    context: str | None = None
    scheduler_name: str = "kai-scheduler"
    shard: str | None = None
    schedule_period: float = 1.0
    metrics_address: str = ":8080"
    audit: str | None = None
    policies: tuple[str, ...] = ()          # rule files or folders used when no shard names a bundle
    leader_elect: bool = True
    namespace: str = "kai-scheduler"        # where the leader-election Lease lives
    lease: LeaseTimings = field(default_factory=lambda: LeaseTimings(retry_period=5.0))   # the reference's
    bind_backoff_limit: int = 3
    event_window: float = 300.0
    sync_timeout: float = 60.0              # for the informers' first lists
    catch_up_timeout: float = 30.0          # for the informers to show this scheduler's own writes
    log_format: str = "json"
    full_snapshots: bool = False            # every cycle's snapshot rebuilt whole, not from the changes

    def __post_init__(self) -> None:
        checks = [
            (self.schedule_period > 0, "--schedule-period must be above 0 seconds"),
            (self.bind_backoff_limit >= 0, "--bind-backoff-limit cannot be negative"),
            (self.event_window >= 0, "--event-window cannot be negative"),
            (self.sync_timeout > 0 and self.catch_up_timeout > 0, "timeouts must be above 0 seconds"),
            (self.log_format in ("json", "text"), "--log-format is json or text"),
            (bool(self.scheduler_name), "--scheduler-name cannot be empty"),
        ]
        problems = [message for ok, message in checks if not ok]
        if problems:
            raise ConfigError("; ".join(problems))
