"""`kaipolicy snapshot [--kubeconfig F] [--shard NAME] [-o FILE]`: the live cluster state the
scheduler sees, written as a scenario file that `kaipolicy simulate` runs unchanged.

Only what scheduling reads is written: no annotations, environment or secrets. Objects that cannot
be used are left out and listed on stderr, as the scheduler would leave them out.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import yaml

from kaipolicy.errors import InputError


def cluster_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of every command that talks to a cluster."""
    p.add_argument("--kubeconfig", metavar="FILE", help="default: in-cluster credentials, then ~/.kube/config")
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current one)")
    p.add_argument("--scheduler-name", default="kai-scheduler", metavar="NAME",
                   help="pods' schedulerName to schedule (default %(default)s)")


def register(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="write the live cluster state as a scenario file")
    cluster_arguments(p)
    p.add_argument("--shard", metavar="NAME", help="SchedulingShard whose partition and configuration to take "
                   "(default: none: the objects without a node-pool label, default configuration)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the first list of each kind")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kaipolicy.cache.k8s_source import K8sSource
    from kaipolicy.cache.kubeapi import KubeApi
    from kaipolicy.cache.scenario_source import scenario_from_doc

    api = KubeApi(args.kubeconfig, args.context)
    source = K8sSource(api, args.scheduler_name, args.shard)
    try:
        source.start(args.timeout)
        out = source.scenario()
    finally:
        source.stop()
        api.close()
    taken = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    doc = {"name": f"snapshot of {api.host}" + (f", shard {args.shard}" if args.shard else ""),
           "source": f"kaipolicy snapshot at {taken}"} | out.doc
    scenario_from_doc(doc, args.output or "<snapshot>")   # what simulate will load must load
    text = yaml.safe_dump(doc, sort_keys=False, width=110, allow_unicode=True)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as e:
            raise InputError(f"cannot write {args.output}: {e.strerror or e}") from e
    else:
        sys.stdout.write(text)
    for problem in out.problems:
        print(f"left out: {problem}", file=sys.stderr)
    jobs, nodes = len(doc["jobs"]), len(doc["nodes"])
    print(f"{jobs} job(s), {nodes} node(s), {len(doc['queues'])} queue(s); {len(out.problems)} object(s) left out",
          file=sys.stderr)
    return 0
