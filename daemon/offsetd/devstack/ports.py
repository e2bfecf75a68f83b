"""Loopback ports for the stack: free ones by default, or a caller-chosen block checked first."""

from __future__ import annotations

import socket
from contextlib import ExitStack

from offsetd.devstack.errors import DevStackError

__all__ = ["HOST", "check_bindable", "free_ports"]

HOST = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    """Ask the kernel for `count` distinct free ports (held open together so none repeats)."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((HOST, 0))
            ports.append(sock.getsockname()[1])
        return ports


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
