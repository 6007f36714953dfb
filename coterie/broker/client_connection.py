"""One client connection of the broker (coterie.broker.server has the whole picture): a
non-blocking socket's descriptor in the broker's poller, its frames answered in order.

Fairness: one connection's frames are answered for at most `TURN_S` before the others get
a turn; a connection whose unread answers exceed `UNSENT_LIMIT` is not read any more until
its client reads (it costs bounded memory), nor is one whose requests pile up while an
answer is awaited. A TLS connection (coterie.broker.tls_connection) is this one with TLS
between the socket and the frames.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from types import CoroutineType
from typing import Any

from coterie.broker.connections import Connection
from coterie.broker.context import Parked
from coterie.wire.codec import FileRange, RawResponse
from coterie.wire.framing import FrameBuffer, FrameTooLarge

__all__ = ["READ_CHUNK", "ClientConnection", "CloseConnection"]

log = logging.getLogger("coterie.broker")

READ_CHUNK = 256 * 1024
# The most request-handling time one connection gets before others have a turn.
TURN_S = 0.005
# Answer bytes a connection may leave unread before we stop reading its requests.
UNSENT_LIMIT = 1024 * 1024
# Request bytes a connection may have waiting while one of its answers is awaited.
READ_LIMIT = 2 * READ_CHUNK

# The broker (coterie.broker.server.Broker): what a connection calls back.
Broker = Any


class CloseConnection(Exception):
    """Raised inside request handling when the connection must be dropped."""


class ClientConnection(Connection):
    """One client connection (module docstring): a non-blocking socket's descriptor in the
    broker's poller (coterie.broker.sockets). States: answering frames as they come; `busy`
    while an answer is awaited by `task` or the rest of a turn is deferred; `write_paused`
    while the client leaves more than UNSENT_LIMIT of answers unread (`out` holds what the
    socket did not take yet); `closed` once it is dropped or, after the client's end of
    stream, while its last answers are sent."""

    __slots__ = (
        "broker",
        "busy",
        "closed",
        "eof",
        "fd",
        "frames",
        "listener",
        "out",
        "parked",
        "port",
        "principal",
        "reading",
        "sasl",
        "sent",
        "task",
        "write_paused",
        "writing",
    )

    def __init__(self, broker: Broker, fd: int, ip: str, port: int,
                 listener: str = "PLAINTEXT") -> None:
        Connection.__init__(self, ip)
        self.broker = broker
        self.fd = fd
        self.port = port
        self.listener = listener  # the name of the listener it came in on
        self.principal = "User:ANONYMOUS"  # who it is (a TLS client's certificate says)
        # On a SASL listener, its authentication (coterie.broker.sasl): until that is
        # done, only ApiVersions and the SASL requests are served.
        self.sasl: Any = None
        self.frames = FrameBuffer(broker.config.socket_request_max_bytes,
                                  broker.request_memory)
        self.out: bytearray | None = None
        self.sent: asyncio.Future | None = None  # resolved when `out` is empty again
        self.busy = False
        self.write_paused = False
        self.closed = False
        self.eof = False
        self.reading = True  # as the poller watches it
        self.writing = False
        self.task: asyncio.Task | None = None
        self.parked: Parked | None = None  # a request waiting for its answer's future

    @property
    def peer(self) -> str:
        return f"{self.ip}:{self.port}"

    # -- the poller's callbacks ----------------------------------------------------------
    def readable(self) -> None:
        if self.closed:
            return
        # Until a large frame has its memory, at most SMALL_FRAME bytes are read at once: a
        # connection whose large frame waits for the pool then holds no more than that.
        broker = self.broker
        into = broker.read_into if self.frames.gathering_large else broker.read_small
        try:
            count = os.readv(self.fd, into)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._give_up(e)
            return
        if not count:
            # The client will send no more; answer what it sent, then close.
            self.eof = True
            if self.busy or self.write_paused:
                self._update_watch()
            else:
                self._serve()
            return
        self.last_read = time.monotonic()
        self.frames.feed(self.broker.read_view[:count])
        if self.busy or self.write_paused:
            self._update_watch()
        else:
            self._serve()

    def writable(self) -> None:
        out = self.out
        if out:
            try:
                count = os.write(self.fd, out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._give_up(e)
                return
            del out[:count]
        if out:
            if not self.write_paused or len(out) > UNSENT_LIMIT // 4:
                return
        else:
            self.out = None
            sent = self.sent
            if sent is not None:
                self.sent = None
                if not sent.done():
                    sent.set_result(None)
            if self.closed:  # closing after the client's end of stream: all is sent
                self._drop()
                return
        if self.write_paused:
            self.write_paused = False
            if not self.busy and not self.closed:
                self._serve()
                return
        self._update_watch()

    def failed(self) -> None:
        self.close()

    # -- sending -------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        """Send `data` now, or as much as the socket takes and the rest when it can."""
        if self.fd < 0:
            return
        out = self.out
        if out is not None:
            out += data
        else:
            try:
                count = os.write(self.fd, data)
            except (BlockingIOError, InterruptedError):
                count = 0
            except OSError as e:
                self._give_up(e)
                return
            if count == len(data):
                return
            out = self.out = bytearray(memoryview(data)[count:])
        if len(out) > UNSENT_LIMIT:
            self.write_paused = True
        self._update_watch()

    async def _all_sent(self) -> None:
        """Wait until the socket took everything written so far."""
        while self.out is not None or self.sent is not None:
            if self.fd < 0:
                raise ConnectionResetError("connection closed")
            if self.sent is None:
                self.sent = asyncio.get_running_loop().create_future()
                self._update_watch()
            await self.sent
        if self.fd < 0:
            raise ConnectionResetError("connection closed")

    async def _can_send(self) -> None:
        """Wait until the socket can take more (after a sendfile that would block)."""
        self.sent = asyncio.get_running_loop().create_future()
        self._update_watch()
        await self._all_sent()

    async def _stream(self, response: RawResponse) -> None:
        """Send a response whose file ranges go from file to socket by sendfile (Fetch
        answers: the stored batches never pass through Python, as in Kafka)."""
        try:
            self.write(response.buffer)
            for piece in response.rest:
                if type(piece) is not FileRange:
                    self.write(piece)
                    continue
                await self._all_sent()
                await self._send_range(piece)
        except OSError as e:
            if isinstance(e, ConnectionError):
                raise
            raise CloseConnection(f"cannot send a response: {e}") from e
        finally:
            response.close()

    async def _send_range(self, piece: FileRange) -> None:
        """One file range of a response, by sendfile (a TLS connection encrypts it
        instead: coterie.broker.tls_connection)."""
        offset, left = piece.offset, piece.count
        while left:
            try:
                sent = os.sendfile(self.fd, piece.fd, offset, left)
            except (BlockingIOError, InterruptedError):
                await self._can_send()
                continue
            except OSError as e:
                if isinstance(e, ConnectionError) or self.fd < 0:
                    raise
                # No sendfile for this file or socket: read and write instead.
                self.write(os.pread(piece.fd, left, offset))
                return
            if not sent:  # the file is shorter than the batches it should hold
                raise CloseConnection(f"short sendfile: {piece.count - left} of "
                                      f"{piece.count} bytes")
            offset += sent
            left -= sent

    # -- closing -------------------------------------------------------------------------
    def close(self) -> None:
        """Drop the connection now, unsent answers and all."""
        self.closed = True
        self.out = None
        self._drop()

    def close_after_failed_auth(self) -> None:
        """A failed SASL authentication: its answer was sent, the connection goes once what
        is queued is out (`connection.failed.authentication.delay.ms` after the failure)."""
        if not self.closed:
            self._close_when_sent()

    def _close_when_sent(self) -> None:
        self.closed = True
        if self.out is None:
            self._drop()
        else:
            self._update_watch()

    def _drop(self) -> None:
        fd = self.fd
        if fd < 0:
            return
        self.fd = -1
        self.closed = True
        broker = self.broker
        self.frames.close()
        broker.request_memory.forget(self)
        broker.poller.remove(fd)
        os.close(fd)
        broker.connections.remove(self)
        broker.connection_gone(self)
        sent = self.sent
        if sent is not None and not sent.done():
            sent.set_exception(ConnectionResetError("connection closed"))
            sent.exception()  # retrieved: nobody may be waiting for it
        # An answer still being awaited finishes on its own and is dropped.
        log.debug("connection from %s closed", self.peer)

    # -- serving -------------------------------------------------------------------------
    def _update_watch(self) -> None:
        """Read while answers are being sent and requests do not pile up unanswered; watch
        for writing while something waits to be sent."""
        if self.fd < 0:
            return
        read = (not self.closed and not self.eof and not self.write_paused
                and not self.frames.blocked
                and (not self.busy or self.frames.pending <= READ_LIMIT))
        write = self.out is not None or self.sent is not None
        if read is not self.reading or write is not self.writing:
            self.reading = read
            self.writing = write
            self.broker.poller.watch(self.fd, read, write)

    def _serve(self) -> None:
        """Answer the buffered frames in order until none is left, an answer must be
        awaited (a task goes on), the client stops reading (`writable` goes on) or the
        turn is used up (the loop's next round goes on)."""
        broker = self.broker
        turn_start = time.monotonic()
        try:
            while not self.closed:
                frame = self.frames.next_frame()
                if frame is None:
                    break
                sasl = self.sasl
                # Not authenticated yet, or a session that ends (KIP-368): the SASL
                # state's gate (coterie.broker.sasl.SaslState.refusal) decides.
                if sasl is not None and (not sasl.authenticated
                                         or sasl.expires_at is not None):
                    if sasl.failed:
                        continue  # closing: nothing more is answered
                    api_key = int.from_bytes(frame[:2], "big", signed=True)
                    refusal = sasl.refusal(api_key, time.monotonic())
                    if refusal is not None:
                        raise CloseConnection(f"{refusal} from {self.peer}")
                out = broker._handle_frame(frame, self.peer, self.listener, self.principal,
                                           self)
                if type(out) is Parked:
                    self.busy = True
                    self.waiting = True
                    self.parked = out
                    out.future.add_done_callback(self._parked_done)
                    self._update_watch()
                    return
                if type(out) is CoroutineType or type(out) is RawResponse:
                    self.busy = True
                    self.task = asyncio.get_running_loop().create_task(self._finish(out))
                    self._update_watch()
                    return
                if out is not None:
                    self.write(out)
                if self.write_paused:
                    return
                if time.monotonic() - turn_start > TURN_S:
                    # Many pipelined requests in one read: let other connections have a
                    # turn before the next one.
                    self.busy = True
                    asyncio.get_running_loop().call_soon(self._next_turn)
                    self._update_watch()
                    return
        except Exception as e:
            self._give_up(e)
            return
        if self.frames.blocked and not self.closed:
            # A large frame waits for request memory (coterie.broker.request_memory).
            self.broker.request_memory.wait(self, self._memory_back)
            self._update_watch()
        elif self.eof and not self.closed:
            self._close_when_sent()
        elif not self.reading:
            self._update_watch()

    def _give_up(self, error: BaseException) -> None:
        """Close the connection after `error`: a refusal (oversized or undecodable frame,
        a handler's CloseConnection) with one warning line, a bug of ours with its
        traceback, a client gone or a broker stopping quietly."""
        if isinstance(error, FrameTooLarge | CloseConnection):
            log.warning("closing connection from %s: %s", self.peer, error)
        elif not isinstance(error, ConnectionError | asyncio.CancelledError):
            log.error("closing connection from %s: serving it failed", self.peer,
                      exc_info=error)
        self.close()

    def _memory_back(self) -> None:
        """Request memory was given back: try again for the large frame, on the loop's next
        round (not inside the release that woke us)."""
        asyncio.get_running_loop().call_soon(self._retry_frame)

    def _retry_frame(self) -> None:
        if self.closed:
            return
        if not self.busy and not self.write_paused:
            self._serve()
        else:
            self._update_watch()

    def _next_turn(self) -> None:
        self.busy = False
        if not self.closed and not self.write_paused:
            self._serve()
        else:
            self._update_watch()

    def _parked_done(self, future: asyncio.Future) -> None:
        """A parked request's answer is there: send it, and go on with the frames that
        waited meanwhile."""
        parked = self.parked
        self.parked = None
        self.waiting = False
        if self.closed or parked is None:
            return
        try:
            out = self.broker._answer_parked(parked, future.result())
            if out is not None:
                self.write(out)
        except (Exception, asyncio.CancelledError) as e:
            self._give_up(e)
            return
        self.busy = False
        if not self.closed and not self.write_paused:
            self._serve()
        else:
            self._update_watch()

    async def _finish(self, out: Any) -> None:
        """Await an answer (async handler, worker-thread encoding, sendfile), send it, and
        go on with the frames that waited meanwhile."""
        try:
            if type(out) is CoroutineType:
                self.waiting = True
                try:
                    out = await out
                finally:
                    self.waiting = False
            if self.closed:
                if type(out) is RawResponse:
                    out.close()
                return
            if type(out) is RawResponse:
                await self._stream(out)
            elif out is not None:
                self.write(out)
        except (Exception, asyncio.CancelledError) as e:
            self._give_up(e)
            return
        finally:
            self.task = None
        self.busy = False
        if not self.closed and not self.write_paused:
            self._serve()
        else:
            self._update_watch()
