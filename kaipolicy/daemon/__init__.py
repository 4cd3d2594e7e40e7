"""What the two long-running processes (`kaipolicy run`, `kaipolicy binder`) share: leader election
on a Lease, the /metrics /healthz /readyz endpoints, JSON logs and a clean stop on SIGTERM."""
