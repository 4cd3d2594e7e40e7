"""A binary heap that sifts exactly like Go's container/heap.

Kept on purpose: the reference caps a queue's depth by dropping whatever sits at the cut
position of its heap array, so matching which jobs survive needs the same sift order.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class GoHeap(Generic[T]):
    def __init__(self, less: Callable[[T, T], bool], max_size: int | None = None) -> None:
        self.items: list[T] = []
        self.less = less
        self.max_size = max_size

    def __len__(self) -> int:
        return len(self.items)

    def push(self, item: T) -> None:
        self.items.append(item)
        self._up(len(self.items) - 1)
        if self.max_size is not None and len(self.items) > self.max_size:
            self.remove(self.max_size)

    def pop(self) -> T:
        n = len(self.items) - 1
        self._swap(0, n)
        self._down(0, n)
        return self.items.pop()

    def peek(self) -> T:
        return self.items[0]

    def remove(self, i: int) -> T:
        n = len(self.items) - 1
        if n != i:
            self._swap(i, n)
            if not self._down(i, n):
                self._up(i)
        return self.items.pop()

    def fix(self, i: int) -> None:
        if not self._down(i, len(self.items)):
            self._up(i)

    def _swap(self, i: int, j: int) -> None:
        self.items[i], self.items[j] = self.items[j], self.items[i]

    def _up(self, j: int) -> None:
        while True:
            i = (j - 1) // 2
            if i == j or j <= 0 or not self.less(self.items[j], self.items[i]):
                break
            self._swap(i, j)
            j = i

    def _down(self, i0: int, n: int) -> bool:
        i = i0
        while True:
            j1 = 2 * i + 1
            if j1 >= n or j1 < 0:
                break
            j = j1
            j2 = j1 + 1
            if j2 < n and self.less(self.items[j2], self.items[j1]):
                j = j2
            if not self.less(self.items[j], self.items[i]):
                break
            self._swap(i, j)
            i = j
        return i > i0


class SortedByKey(Generic[T]):
    """Items kept sorted by a key fixed when pushed; pops the least (or the greatest when
    `reverse`). Pops in the same order as the heap when keys are distinct, but in C-speed
    comparisons; used where no depth cap makes the heap's sift order matter."""

    def __init__(self, key: Callable[[T], Any], reverse: bool = False) -> None:
        # named as GoHeap's list, so an order tells either kind empty by `items` alone
        self.items: list[tuple[Any, int, T]] = []
        self.key = key
        self.reverse = reverse
        self._seq = 0

    def __len__(self) -> int:
        return len(self.items)

    def push(self, item: T) -> None:
        self._seq += 1
        # equal keys: first pushed, first out (either direction)
        seq = -self._seq if self.reverse else self._seq
        bisect.insort(self.items, (self.key(item), seq, item))

    def pop(self) -> T:
        return self.items.pop(-1 if self.reverse else 0)[2]

    def peek(self) -> T:
        return self.items[-1 if self.reverse else 0][2]
