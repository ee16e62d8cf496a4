"""The simulator's listening socket, bound before anything is announced, so a busy port is
one BindError line naming the flag to change, never an OSError traceback. TCP explicitly:
asyncio sets TCP_NODELAY only on accepted sockets whose protocol says TCP (without it a
keep-alive answer written in two pieces waits ~40 ms for a delayed ACK)."""

from __future__ import annotations

import errno
import socket

from .errors import BindError


def bind(host: str, port: int, *, setting: str = "--port") -> socket.socket:
    """A TCP socket bound to (host, port) and listening (a client that read the start line
    waits in the backlog instead of being refused; uvicorn listens again, harmlessly)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if exc.errno == errno.EADDRINUSE:
            raise BindError(f"port {port} is already in use on {host} ({where}): stop the program that holds it, "
                            f"or choose another port with {setting}", setting=setting, code="port_in_use") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise BindError(f"not allowed to listen on {where} (ports below 1024 need privileges): choose a port "
                            f"from 1024 up with {setting}", setting=setting, code="listen_refused") from None
        raise BindError(f"cannot listen on {where} ({exc.strerror or exc}): check the address given with {setting}",
                        setting=setting, code="listen_failed") from None
    return sock
