"""A client connection over TLS: the same connection as a plaintext one (coterie.broker.
server's ClientConnection), with `ssl.SSLObject` between the socket and the frames.

Why memory BIOs rather than an `ssl.SSLSocket`: coterie's connections are bare descriptors
in one epoll set (coterie.broker.sockets), read and written by the connection itself. The
TLS object only turns bytes into bytes: ciphertext read from the socket goes into
`incoming`, plaintext comes out of `read`; plaintext goes into `write`, ciphertext comes out
of `outgoing` and is sent like any answer (buffered when the socket is full). Nothing
blocks, and the poller, the turn-taking and the limits are the plaintext connection's.

What changes: no sendfile (the bytes must be encrypted), so a Fetch answer's file ranges are
read and encrypted a megabyte at a time, waiting for the socket between them. The handshake
must finish within `tls.handshake.timeout.ms` (10 s; coterie's own setting, Kafka has none)
of the accept, or the connection is closed: a client that stalls in it holds nothing else. A
handshake that fails (plaintext sent to a TLS port, an unknown CA, no client certificate
where one is required) closes the connection with one log line. The connection's principal
comes from the client's certificate once the handshake is done
(coterie.broker.tls.principal_of).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from typing import Any

from coterie.broker.client_connection import Broker, ClientConnection, CloseConnection
from coterie.broker.ssl_principal import NoRuleApplies, PrincipalMapper
from coterie.broker.tls import principal_of
from coterie.wire.codec import FileRange

__all__ = ["TlsClientConnection"]

log = logging.getLogger("coterie.tls")

_READ = 256 * 1024  # ciphertext read from the socket at once
_FILE_CHUNK = 1024 * 1024  # of a Fetch answer's file range, encrypted at once
_PLAIN = 64 * 1024  # plaintext taken out of the TLS object at once


class TlsClientConnection(ClientConnection):
    """A ClientConnection whose bytes pass through TLS (module docstring)."""

    __slots__ = ("handshaken", "incoming", "mapper", "outgoing", "timer", "tls")

    def __init__(self, broker: Broker, fd: int, ip: str, port: int, listener: str,
                 context: ssl.SSLContext, mapper: PrincipalMapper | None = None) -> None:
        ClientConnection.__init__(self, broker, fd, ip, port, listener)
        self.mapper = mapper  # the listener's ssl.principal.mapping.rules
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.handshaken = False
        self.timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(
            broker.tls_handshake_timeout_s, self._handshake_overdue)

    def _handshake_overdue(self) -> None:
        self.timer = None
        if not self.handshaken and not self.closed:
            log.info("closing connection from %s: no TLS handshake within %g s", self.peer,
                     self.broker.tls_handshake_timeout_s)
            self.close()

    # -- reading ---------------------------------------------------------------------------
    def readable(self) -> None:
        if self.closed:
            return
        try:
            data = os.read(self.fd, _READ)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._give_up(e)
            return
        if data:
            self.incoming.write(data)
        else:
            self.incoming.write_eof()
        try:
            plain = self._decrypt()
        except ssl.SSLEOFError:
            if not self.handshaken:
                log.info("closing connection from %s: it left during the TLS handshake",
                         self.peer)
                self.close()
                return
            plain = b""  # it hung up without TLS's goodbye: an end of stream like any
        except ssl.SSLError as e:
            self._send_pending()  # the alert, if TLS has one to say
            log.info("closing connection from %s: TLS failed: %s", self.peer,
                     e.reason or e)
            self.close()
            return
        except NoRuleApplies as e:
            # Kafka fails the authentication: the client is not let in.
            log.info("closing connection from %s: ssl.principal.mapping.rules: %s",
                     self.peer, e)
            self.close()
            return
        self._send_pending()
        if self.closed:
            return
        if plain:
            self.last_read = time.monotonic()
            self.frames.feed(plain)
        if not data:
            self.eof = True
        if self.busy or self.write_paused:
            self._update_watch()
        else:
            self._serve()

    def _decrypt(self) -> bytes:
        """Go on with the handshake, then take out all the plaintext there is."""
        tls = self.tls
        if not self.handshaken:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.handshaken = True
            self.principal = principal_of(tls.getpeercert(), self.mapper)
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
        out = bytearray()
        while True:
            try:
                chunk = tls.read(_PLAIN)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the client's close_notify
                self.eof = True
                break
            if not chunk:
                # SSLObject.read answers b"" (it does not raise) once the client's
                # close_notify has been read: no data is SSLWantReadError, a hang-up
                # without it SSLEOFError. The client will send no more: answer what it
                # sent, then close, as on a plaintext end of stream. (Clients that wait
                # for the close, as asyncio's SSL transport does for 30 s, need it.)
                self.eof = True
                break
            out += chunk
        return bytes(out)

    def _send_pending(self) -> None:
        """Send what TLS has to say (handshake records, alerts, session tickets)."""
        pending = self.outgoing.read()
        if pending:
            ClientConnection.write(self, pending)

    # -- writing ---------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        if self.fd < 0:
            return
        try:
            self.tls.write(data)
        except ssl.SSLError as e:
            self._give_up(CloseConnection(f"cannot encrypt an answer: {e}"))
            return
        self._send_pending()

    async def _send_range(self, piece: FileRange) -> None:
        """A Fetch answer's file range, read and encrypted a chunk at a time (no sendfile
        through TLS), waiting for the socket once a chunk is queued."""
        offset, left = piece.offset, piece.count
        while left:
            chunk = os.pread(piece.fd, min(left, _FILE_CHUNK), offset)
            if not chunk:
                raise CloseConnection(f"short read: {piece.count - left} of "
                                      f"{piece.count} bytes")
            self.write(chunk)
            offset += len(chunk)
            left -= len(chunk)
            if self.out is not None:
                await self._all_sent()

    def _drop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        ClientConnection._drop(self)
