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

from kaipolicy.cli.flags import cluster_arguments, positive, seconds
from kaipolicy.errors import InputError


def register(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="write the live cluster state as a scenario file")
    cluster_arguments(p)
    p.add_argument("--shard", metavar="NAME", help="SchedulingShard whose partition and configuration to take "
                   "(default: none: the objects without a node-pool label, default configuration)")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--timeout", type=positive(seconds), default=60.0, metavar="DURATION",
                   help="how long to wait for the first list of each kind (default %(default)s)")
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
