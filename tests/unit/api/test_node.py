"""Node accounting: whole GPUs, shared GPU groups, releasing and pipelined tasks."""

from __future__ import annotations

from kaipolicy.api.node import Node
from kaipolicy.api.resources import Request, Resources
from kaipolicy.api.task import Status, Task


def make_node(gpus: int = 4) -> Node:
    return Node("n", Resources(64000, 256e9, float(gpus), 110.0), labels={"nvidia.com/gpu.count": str(gpus)})


def task(name: str, gpus: float, status: Status, groups: list[str] | None = None) -> Task:
    return Task(uid=name, name=name, namespace="ns", job="j", request=Request.build(1000, 1e9, gpus=gpus),
                status=status, node="n", gpu_groups=list(groups or []))


def test_a_whole_gpu_task_takes_its_gpus_out_of_idle_and_gives_them_back() -> None:
    n = make_node()
    t = task("a", 2, Status.RUNNING)
    n.add_task(t)
    assert (n.idle.gpus, n.used.gpus, n.idle.pods) == (2, 2, 109)
    n.remove_task(t)
    assert (n.idle.gpus, n.used.gpus, n.idle.pods) == (4, 0, 110)


def test_the_first_fraction_on_a_gpu_takes_a_whole_device_and_the_second_shares_it() -> None:
    n = make_node()
    a, b = task("a", 0.5, Status.RUNNING, ["g1"]), task("b", 0.5, Status.RUNNING, ["g1"])
    n.add_task(a)
    assert n.idle.gpus == 3
    n.add_task(b)
    assert n.idle.gpus == 3
    assert n.shared_allocated["g1"] == 100
    n.remove_task(a)
    assert n.idle.gpus == 3
    n.remove_task(b)
    assert n.idle.gpus == 4


def test_a_shared_gpu_whose_tasks_all_release_counts_as_one_releasing_gpu() -> None:
    n = make_node(1)
    n.add_task(task("a", 0.5, Status.RELEASING, ["g1"]))
    assert (n.idle.gpus, n.releasing.gpus) == (0, 1)
    assert n.idle_gpus_total() == 0.5


def test_a_group_with_room_fits_a_fraction_and_a_full_one_does_not() -> None:
    n = make_node(1)
    n.add_task(task("a", 0.5, Status.RUNNING, ["g1"]))
    assert n.fits_on_group(Request.build(0, 0, gpus=0.5), "g1")
    assert not n.fits_on_group(Request.build(0, 0, gpus=0.75), "g1")


def test_a_task_fits_on_releasing_resources_only_when_idle_is_not_enough() -> None:
    n = make_node(2)
    n.add_task(task("r", 2, Status.RELEASING))
    want = task("w", 2, Status.PENDING)
    assert not n.fits_idle(want)
    assert n.fits_idle_or_releasing(want)


def test_a_pipelined_task_consumes_releasing_resources() -> None:
    n = make_node(2)
    n.add_task(task("r", 2, Status.RELEASING))
    n.add_task(task("p", 2, Status.PIPELINED))
    assert n.releasing.gpus == 0
    assert not n.fits_idle_or_releasing(task("x", 1, Status.PENDING))


def test_gpu_memory_requests_become_a_portion_rounded_up_to_hundredths() -> None:
    n = Node("n", Resources(1000, 1e9, 1, 110), gpu_memory=3000)
    assert n.portion_of_memory(1000) == 0.34



def test_a_portion_of_memory_is_rounded_up_from_the_float_quotient_as_the_reference_rounds_it() -> None:
    # 17,600 / 32,000 x 100 is 55.000000000000007 in floats, so the reference's ceiling gives 0.56
    # (gpu_sharing_node_info.go's getGpuMemoryFractionalOnNode); rounding the quotient first gave 0.55
    n = Node("n", Resources(1000, 1e9, 1, 110), gpu_memory=32000)
    assert n.portion_of_memory(17600) == 0.56
    assert n.portion_of_memory(16000) == 0.5
    # so a device holding a 0.55 pod offers 0.44, not 0.45, to the shared sums
    n.add_task(Task(uid="a", name="a", namespace="ns", job="j", request=Request.build(1000, 1e9, gpus=0.55),
                    status=Status.RUNNING, node="n", gpu_groups=["g1"]))
    assert n.shared_allocated["g1"] == 17600
    assert round(n.idle_gpus_total(), 9) == 0.44

def test_a_node_holds_what_its_pods_add_up_to_through_any_run_of_placements_status_changes_and_removals() -> None:
    # whole-GPU, CPU-only and MIG pods, allocated, pipelined and releasing, in a random order:
    # after every step, each amount is what the pods on the node add up to by their status (whole
    # numbers, so every sum is exact whatever its order)
    import random
    rng = random.Random(7)
    n = Node("n", Resources(1_000_000, 4e15, 64.0, 1000.0, {"1g.10gb": 40.0}), labels={"nvidia.com/gpu.count": "64"})
    statuses = [Status.RUNNING, Status.ALLOCATED, Status.PIPELINED, Status.RELEASING]
    live: dict[str, Task] = {}
    for step in range(400):
        move = rng.random()
        if move < 0.45 or not live:
            name = f"p{step}"
            mig = {"1g.10gb": rng.randint(1, 2)} if rng.random() < 0.2 else None
            req = Request.build(rng.randint(1, 9) * 250, rng.randint(1, 9) * 2**30, gpus=rng.choice([0, 1, 2, 4]), mig=mig)
            t = Task(uid=name, name=name, namespace="ns", job="j", request=req, status=rng.choice(statuses), node="n")
            n.add_task(t)
            live[name] = t
        elif move < 0.8:
            t = live[rng.choice(sorted(live))]
            t.status = rng.choice(statuses)
            n.update_task(t)
        else:
            n.remove_task(live.pop(rng.choice(sorted(live))))
        # every pod is used; a releasing one is still off idle and is releasing too; a pipelined
        # one is not off idle but takes from what is releasing
        used, releasing, idle = Resources(), Resources(), n.allocatable.clone()
        for t in live.values():
            amounts = (t.request.cpu, t.request.memory, float(t.request.gpus), 1.0, dict(t.request.mig).items())
            used.add_amounts(*amounts, 1.0)
            if t.status == Status.PIPELINED:
                releasing.add_amounts(*amounts, -1.0)
            else:
                idle.add_amounts(*amounts, -1.0)
                if t.status == Status.RELEASING:
                    releasing.add_amounts(*amounts, 1.0)
        for got, want in ((n.used, used), (n.releasing, releasing), (n.idle, idle)):
            assert (got.cpu, got.memory, got.gpus, got.pods) == (want.cpu, want.memory, want.gpus, want.pods), step
            assert {k: v for k, v in got.mig.items() if v} == {k: v for k, v in want.mig.items() if v}, step


def test_gpu_totals_count_whole_devices_and_the_free_parts_of_shared_ones_through_a_shared_pods_life() -> None:
    n = make_node()
    assert (n.idle_gpus_total(), n.releasing_gpus_total(), n.shared_gpus_in_use(), n.has_shared_groups) == (4, 0, 0, False)
    n.add_task(task("w", 2, Status.RUNNING))
    assert (n.idle_gpus_total(), n.shared_gpus_in_use()) == (2, 0)
    half = task("h", 0.5, Status.RUNNING, ["g1"])
    n.add_task(half)
    assert (n.idle_gpus_total(), n.shared_gpus_in_use(), n.has_shared_groups) == (1.5, 1, True)
    half.status = Status.RELEASING
    n.update_task(half)
    assert (n.releasing_gpus_total(), n.shared_gpus_in_use()) == (1.0, 1)
    n.remove_task(half)
    # the group's entries stay, at zero: no device is shared any more
    assert (n.idle_gpus_total(), n.releasing_gpus_total(), n.shared_gpus_in_use(), n.has_shared_groups) == (2, 0, 0, False)
