"""Listening and polling sockets without asyncio's per-connection transports.

Why: at 10,000 connections each asyncio transport cost about 1.8 KiB of broker memory (the
transport and its attributes, a socket object, a selector key, a reader handle, a weak
reference in the loop's transport table), most of the memory budget of a group member. Here
a connection is a file descriptor and the broker's own small object:

* `Poller`: one epoll set holds every client socket; the asyncio loop watches only the
  epoll set's own descriptor and calls `Poller.ready` when some socket in it is ready. Per
  connection that costs one entry in the epoll set (kernel memory) and one in a dict.
  Where epoll does not exist, `LoopPoller` asks the loop to watch each socket instead (the
  loop's per-socket costs come back, the behaviour does not change).
* `Listener`: the listening sockets, accepted from the loop's reader callback. When the
  process runs out of descriptors (EMFILE) it stops accepting for `ACCEPT_RETRY_S` and says
  so once a minute, however often that happens (`RateLimitedLog`).

Level-triggered: a socket that stays readable is reported again on the next round, so a
connection that stops reading in the middle of its buffered requests (its turn ended,
coterie.broker.server) loses nothing.
"""

from __future__ import annotations

import asyncio
import errno
import select
import socket
from collections.abc import Callable
from typing import Protocol

from coterie.broker.connections import RateLimitedLog

__all__ = ["Listener", "LoopPoller", "Pollable", "Poller", "make_poller"]

ACCEPT_RETRY_S = 1.0
# Connections accepted in one reader callback before other work gets a turn.
ACCEPT_BATCH = 64
LISTEN_BACKLOG = 1024
_OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class Pollable(Protocol):
    """What a poller calls back: the socket can be read, can be written, or failed."""

    def readable(self) -> None: ...

    def writable(self) -> None: ...

    def failed(self) -> None: ...


class Poller:
    """Every client socket in one epoll set (module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._epoll = select.epoll()
        self._watched: dict[int, Pollable] = {}
        loop.add_reader(self._epoll.fileno(), self.ready)

    def add(self, fd: int, conn: Pollable) -> None:
        self._epoll.register(fd, select.EPOLLIN)
        self._watched[fd] = conn

    def watch(self, fd: int, read: bool, write: bool) -> None:
        """Watch `fd` for reading and/or writing (errors are always reported)."""
        self._epoll.modify(fd, (select.EPOLLIN if read else 0)
                           | (select.EPOLLOUT if write else 0))

    def remove(self, fd: int) -> None:
        if self._watched.pop(fd, None) is not None:
            self._epoll.unregister(fd)

    def ready(self) -> None:
        watched = self._watched
        for fd, events in self._epoll.poll(0):
            conn = watched.get(fd)
            if conn is None:
                continue
            if events & (select.EPOLLERR | select.EPOLLHUP):
                # The peer reset the connection or both directions are shut: nothing can be
                # answered any more (a client's half close arrives as a read of 0 bytes).
                conn.failed()
                continue
            if events & select.EPOLLOUT:
                conn.writable()
            if events & select.EPOLLIN and fd in watched:
                conn.readable()

    def close(self) -> None:
        self._loop.remove_reader(self._epoll.fileno())
        self._watched.clear()
        self._epoll.close()


class LoopPoller:
    """The same interface where epoll does not exist: the loop watches each socket."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._watched: dict[int, tuple[Pollable, bool, bool]] = {}

    def add(self, fd: int, conn: Pollable) -> None:
        self._watched[fd] = (conn, False, False)
        self.watch(fd, True, False)

    def watch(self, fd: int, read: bool, write: bool) -> None:
        conn, reading, writing = self._watched[fd]
        if read != reading:
            if read:
                self._loop.add_reader(fd, conn.readable)
            else:
                self._loop.remove_reader(fd)
        if write != writing:
            if write:
                self._loop.add_writer(fd, conn.writable)
            else:
                self._loop.remove_writer(fd)
        self._watched[fd] = (conn, read, write)

    def remove(self, fd: int) -> None:
        if fd in self._watched:
            self.watch(fd, False, False)
            del self._watched[fd]

    def close(self) -> None:
        for fd in list(self._watched):
            self.remove(fd)


def make_poller(loop: asyncio.AbstractEventLoop) -> Poller | LoopPoller:
    return Poller(loop) if hasattr(select, "epoll") else LoopPoller(loop)


class Listener:
    """The broker's listening sockets: one per address `host` resolves to, all on the same
    port. `on_accept(sock, address)` gets each accepted socket, non-blocking, with Nagle's
    algorithm off (small answers must not wait for the previous one's acknowledgement)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str | None, port: int,
                 on_accept: Callable[[socket.socket, tuple], None],
                 complaints: RateLimitedLog, accepting: bool = True) -> None:
        self._loop = loop
        self._on_accept = on_accept
        self._complaints = complaints
        self.sockets: list[socket.socket] = []
        self._paused = False
        try:
            for family, kind, proto, _, address in socket.getaddrinfo(
                    host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE):
                sock = socket.socket(family, kind, proto)
                self.sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if port == 0 and len(self.sockets) > 1:  # every address on the same port
                    address = (address[0], self.port, *address[2:])
                sock.bind(address)
                sock.listen(LISTEN_BACKLOG)
                sock.setblocking(False)
        except OSError:
            self.close()
            raise
        # Not accepting yet (`accept_from_now`): connections wait in the backlog until the
        # broker is ready to serve them (a cluster broker copying what it leads).
        self._paused = not accepting
        if accepting:
            self._watch()

    def accept_from_now(self) -> None:
        """Start accepting (for a Listener made with accepting=False)."""
        self._resume()

    @property
    def port(self) -> int:
        return self.sockets[0].getsockname()[1]

    def _watch(self) -> None:
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, address = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in _OUT_OF_DESCRIPTORS:
                    self._complaints.warning(
                        "cannot accept connections: %s (open-file limit reached; retrying "
                        "every %.0f s)", e, ACCEPT_RETRY_S)
                    self._pause()
                    return
                continue  # the client gave up before we accepted (ECONNABORTED and kin)
            try:
                sock.setblocking(False)
                if sock.family in (socket.AF_INET, socket.AF_INET6):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                sock.close()
                continue
            self._on_accept(sock, address)

    def _pause(self) -> None:
        if self._paused:
            return
        self._paused = True
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
        self._loop.call_later(ACCEPT_RETRY_S, self._resume)

    def _resume(self) -> None:
        if self._paused and self.sockets:
            self._paused = False
            self._watch()

    def close(self) -> None:
        for sock in self.sockets:
            if sock.fileno() >= 0:
                self._loop.remove_reader(sock.fileno())
                sock.close()
        self.sockets = []
