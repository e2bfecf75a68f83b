"""Loopback ports for the stack: free ones by default, a port block when one is set, or a
caller-chosen block checked first.

A port block (`OFFSETD_PORT_BLOCK=<first>-<last>:<claims folder>`) is how parallel test lanes
keep out of each other's way: each lane (a pytest-xdist worker) owns a range of ports below the
kernel's ephemeral range (so no outgoing connection is ever given one of them), and every
process of that lane — the test process, the stacks it starts, `offsetd dev up` run as a
command — takes its ports from the lane's block. A port is claimed by creating a file named after
it in the claims folder (atomic across processes, never handed out twice in a run) and checked
bindable before it is used.
"""

from __future__ import annotations

import os
import socket
from contextlib import ExitStack
from pathlib import Path

from offsetd.devstack.errors import DevStackError

__all__ = ["HOST", "PORT_BLOCK_ENV", "check_bindable", "free_ports", "port_block"]

HOST = "127.0.0.1"
PORT_BLOCK_ENV = "OFFSETD_PORT_BLOCK"


def port_block() -> tuple[int, int, Path] | None:
    """The block set for this process (first, last, claims folder), if any."""
    value = os.environ.get(PORT_BLOCK_ENV, "").strip()
    if not value:
        return None
    span, sep, claims = value.partition(":")
    first, dash, last = span.partition("-")
    try:
        low, high = int(first), int(last)
    except ValueError:
        low = high = -1
    if not sep or not dash or not claims or not 0 < low <= high < 65536:
        raise DevStackError(
            f"{PORT_BLOCK_ENV} must be '<first>-<last>:<claims folder>', not {value!r}"
        )
    return low, high, Path(claims)


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: from this process's port block when one is set, else asked
    of the kernel (held open together so none repeats)."""
    block = port_block()
    if block is not None:
        return _claim(count, *block)
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((HOST, 0))
            ports.append(sock.getsockname()[1])
        return ports


def _claim(count: int, low: int, high: int, claims: Path) -> list[int]:
    claims.mkdir(parents=True, exist_ok=True)
    ports: list[int] = []
    for port in range(low, high + 1):
        if len(ports) == count:
            break
        try:
            os.close(os.open(claims / str(port), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        if _bindable(port):
            ports.append(port)
    if len(ports) < count:
        raise DevStackError(
            f"the port block {low}-{high} has fewer than {count} free ports left "
            f"(claims in {claims}): widen it"
        )
    return ports


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def check_bindable(ports: list[int]) -> None:
    """Fail before anything starts if a requested port is taken, naming every taken one.

    All are named at once: other programs on a shared machine may hold more than one port of
    the block, and a user fixing them one failed start at a time would be sent round in circles.
    """
    taken: list[tuple[int, str]] = []
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((HOST, port))
            except OSError as exc:
                taken.append((port, exc.strerror or type(exc).__name__))
    if not taken:
        return
    if len(taken) == 1:
        port, reason = taken[0]
        what = f"port {port} on {HOST} cannot be bound ({reason}); stop what holds it"
    else:
        named = ", ".join(f"{port} ({reason})" for port, reason in taken)
        what = f"ports on {HOST} cannot be bound: {named}; stop what holds them"
    raise DevStackError(f"{what} or choose another --base-port")
