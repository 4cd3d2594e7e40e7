"""The flags several commands share: durations as plain seconds or as the reference writes them,
refused with a message that names what was given; both processes take the same daemon flags."""

from __future__ import annotations

import argparse

import pytest

from kaipolicy.cli.flags import positive, seconds
from kaipolicy.cli.main import build_parser


@pytest.mark.parametrize(("text", "want"), [
    ("1", 1.0), ("0.2", 0.2), ("1s", 1.0), ("200ms", 0.2), ("1m30s", 90.0), ("0", 0.0), ("2h", 7200.0)])
def test_a_duration_is_seconds_or_a_go_duration(text: str, want: float) -> None:
    assert seconds(text) == pytest.approx(want)


@pytest.mark.parametrize(("text", "says"), [("1x", "not a duration"), ("-1", "negative"), ("-1s", "negative"),
                                            ("", "not a duration"), ("s", "not a duration")])
def test_a_bad_duration_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=says):
        seconds(text)


@pytest.mark.parametrize(("kind", "text"), [(seconds, "0s"), (int, "0"), (int, "-3"), (int, "two")])
def test_a_value_that_must_be_positive_is_refused_at_zero_or_below(kind: type, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        positive(kind)(text)


@pytest.mark.parametrize("command", ["run", "binder"])
def test_both_processes_take_the_same_daemon_flags(command: str) -> None:
    args = build_parser().parse_args([command, "--metrics-address", "127.0.0.1:0", "--log-format", "text",
                                      "--no-leader-elect", "--lease-namespace", "ops", "--lease-duration", "3s",
                                      "--renew-deadline", "2", "--retry-period", "500ms"])
    assert (args.metrics_address, args.log_format, args.leader_elect, args.lease_namespace, args.lease_duration,
            args.renew_deadline, args.retry_period) == ("127.0.0.1:0", "text", False, "ops", 3.0, 2.0, 0.5)


def test_a_bad_flag_value_exits_with_argparses_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["run", "--schedule-period", "soon"])
    assert exit_.value.code == 2
    assert "--schedule-period: 'soon' is not a duration" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "full"), [([], False), (["--full-snapshots"], True)])
def test_run_builds_snapshots_from_the_changes_unless_told_to_build_them_whole(
        flags: list[str], full: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from kaipolicy.server import app
    taken = []
    monkeypatch.setattr(app, "run", lambda settings: taken.append(settings) or 0)
    args = build_parser().parse_args(["run", "--lease-namespace", "ops", *flags])
    assert args.run(args) == 0
    assert [s.full_snapshots for s in taken] == [full]
