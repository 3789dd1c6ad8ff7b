"""map_big_blocks fixes glibc's mmap threshold, and touches nothing elsewhere."""

from __future__ import annotations

import ctypes
import platform

import pytest

from graphtools import _malloc


class _Libc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, option: int, value: int) -> int:
        self.calls.append((option, value))
        return 1


@pytest.mark.parametrize(("libc", "called"), [("glibc", True), ("musl", False), ("", False)])
def test_the_threshold_is_set_on_glibc_only(
    monkeypatch: pytest.MonkeyPatch, libc: str, called: bool
) -> None:
    fake = _Libc()
    monkeypatch.setattr(platform, "libc_ver", lambda: (libc, "1"))
    monkeypatch.setattr(ctypes, "CDLL", lambda name: fake)
    _malloc.map_big_blocks()
    assert fake.calls == ([(-3, 1 << 20)] if called else [])


def test_a_libc_without_mallopt_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())
    _malloc.map_big_blocks()  # no AttributeError
