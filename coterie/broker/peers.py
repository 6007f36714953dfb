"""Requests from one broker of a cluster to another (WriteTxnMarkers).

Why the broker speaks to its peers: a transaction's coordinator must write its markers into
every partition of the transaction, and in a cluster another broker may lead some of them
(and only the leader may write, through its lease). Kafka's coordinator sends those
brokers WriteTxnMarkers; coterie does the same, over the same wire, with kio's codecs. One
connection per peer address, one request in flight on it at a time (marker jobs are few and
each is retried by the coordinator's tick when it fails), reopened after any failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from kio.serial import entity_reader

from coterie.wire.build import build
from coterie.wire.codec import encode_request, request_schema, response_schema

__all__ = ["PeerError", "Peers"]

_SIZE = struct.Struct(">i")


class PeerError(Exception):
    """The peer could not be reached or did not answer in time."""


class _Link:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()
        self.correlation = 0


class Peers:
    """Connections to the other brokers, by address."""

    def __init__(self, client_id: str, timeout_s: float = 10.0) -> None:
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._links: dict[tuple[str, int], _Link] = {}

    async def call(self, host: str, port: int, api_key: int, version: int,
                   data: dict[str, Any]) -> Any:
        """Send the request built from `data` and return the decoded response; PeerError when
        the peer cannot be reached or does not answer within the timeout."""
        request = build(request_schema(api_key, version), data)
        try:
            return await asyncio.wait_for(self._roundtrip(host, port, request),
                                          self.timeout_s)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, EOFError) as e:
            self._drop((host, port))
            raise PeerError(f"{host}:{port}: {e or type(e).__name__}") from e

    async def _roundtrip(self, host: str, port: int, request: Any) -> Any:
        link = self._links.get((host, port))
        if link is None or link.writer.is_closing():
            reader, writer = await asyncio.open_connection(host, port)
            link = self._links[(host, port)] = _Link(reader, writer)
        async with link.lock:
            link.correlation += 1
            link.writer.write(encode_request(link.correlation, request,
                                             client_id=self.client_id))
            await link.writer.drain()
            size = _SIZE.unpack(await link.reader.readexactly(4))[0]
            frame = await link.reader.readexactly(size)
        cls = response_schema(request.__api_key__, request.__version__)
        header, used = entity_reader(cls.__header_schema__)(frame, 0)
        if header.correlation_id != link.correlation:
            raise EOFError(f"answer {header.correlation_id} to request {link.correlation}")
        body, _ = entity_reader(cls)(frame, used)
        return body

    def _drop(self, address: tuple[str, int]) -> None:
        link = self._links.pop(address, None)
        if link is not None:
            with contextlib.suppress(Exception):
                link.writer.close()

    def close(self) -> None:
        for address in list(self._links):
            self._drop(address)
