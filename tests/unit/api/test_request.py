"""A request hashes once, when it is made, and is made again when unpickled or copied: its kept
hash holds string hashes, which differ from process to process."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys

from kaipolicy.api.resources import Request

REQUESTS = [Request.build(1000.0, 2e9, 0.5), Request.build(1000.0, 2e9, 2), Request.build(10.0, 1.0, 0, 4096),
            Request.build(1.0, 1.0, mig={"nvidia.com/mig-1g.5gb": 2}), Request.build(1.0, 1.0)]


def test_equal_requests_hash_alike_and_copies_are_equal() -> None:
    for req in REQUESTS:
        again = Request(req.cpu, req.memory, req.count, req.portion, req.gpu_memory, req.mig, req.kind)
        assert again == req and hash(again) == hash(req) and {req: 1}[again] == 1
        for made in (copy.copy(req), copy.deepcopy(req), pickle.loads(pickle.dumps(req))):
            assert made == req and hash(made) == hash(req) and made.gpus == req.gpus


def test_a_request_unpickled_in_another_process_finds_its_equal() -> None:
    code = ("import pickle, sys\n"
            "from kaipolicy.api.resources import Request\n"
            "loaded = pickle.loads(sys.stdin.buffer.read())\n"
            "made = [Request(r.cpu, r.memory, r.count, r.portion, r.gpu_memory, r.mig, r.kind) for r in loaded]\n"
            "print(all({m: 1}.get(r) == 1 for m, r in zip(made, loaded)))\n")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(REQUESTS), capture_output=True, env=env,
                         check=True)
    assert out.stdout.decode().strip() == "True"


def test_equal_requests_built_apart_are_one_object_unless_their_numbers_print_otherwise() -> None:
    a = Request.build(cpu=1000.0, memory=2.0**30, gpus=0.5)
    b = Request.build(cpu=1000.0, memory=2.0**30, gpus=0.5)
    assert a is b
    assert Request.build(cpu=1000.0, memory=2.0**30, gpus=1) is Request.build(cpu=1000.0, memory=2.0**30, gpus=1)
    assert Request.build(cpu=1000.0, memory=2.0**30, gpus=1) is not a
    # equal, but an int where the other has a float: kept apart, as each prints its own
    c = Request.build(cpu=1000, memory=2**30, gpus=0.5)
    assert c == a and c is not a and repr(c) != repr(a)
    assert Request.build(cpu=1000, memory=2**30, gpus=0.5) is c


def test_a_request_with_a_negative_zero_is_not_taken_for_the_one_with_zero() -> None:
    plus = Request.build(cpu=0.0, memory=1.0)
    minus = Request.build(cpu=-0.0, memory=1.0)
    assert plus == minus and minus is not plus and str(minus.cpu) == "-0.0"
