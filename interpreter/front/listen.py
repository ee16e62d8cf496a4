"""Listening sockets for the HTTP servers (MCP over streamable HTTP and the simulator).

A server binds its socket before it says anything, so nothing is announced as serving
on an address that another program holds; a busy or unusable address is one ListenError
line (a ConfigError naming the setting to change), never an OSError traceback.
"""

from __future__ import annotations

import errno
import socket

from ..errors import ListenError


def address_text(host: str, port: int) -> str:
    """host:port as a URL writes it ([::1]:8765 for an IPv6 address)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(host: str, port: int, *, setting: str) -> socket.socket:
    """A TCP socket bound to (host, port) and listening. `setting` is the flag or variable
    that chose the address, named in the error. The protocol is IPPROTO_TCP explicitly:
    asyncio sets TCP_NODELAY only on accepted sockets whose proto says TCP, and without it
    every keep-alive answer written in two pieces waits ~40 ms for a delayed ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # listening now (uvicorn listens again, harmlessly) lets a client that read the start
        # line connect at once: it waits in the backlog instead of being refused
        sock.listen(128)
    except OSError as exc:
        sock.close()
        where = address_text(host, port)
        if exc.errno == errno.EADDRINUSE:
            raise ListenError(f"port {port} is already in use on {host} ({where}): stop the program that holds it, "
                              f"or choose another port with {setting}", setting=setting, code="port_in_use") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise ListenError(f"not allowed to listen on {where} (ports below 1024 need privileges): choose a port "
                              f"from 1024 up with {setting}", setting=setting, code="listen_refused") from None
        raise ListenError(f"cannot listen on {where} ({exc.strerror or exc}): check the address given with {setting}",
                          setting=setting, code="listen_failed") from None
    return sock
