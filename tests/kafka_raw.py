"""A minimal raw Kafka connection for tests that need exact control of the bytes sent.

Requests and responses go through kio's codecs (via coterie.wire.codec), so these tests check
the broker's behaviour, not a second hand-written codec.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.serial import entity_reader

from coterie.wire.codec import encode_request


class RawConnection:
    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any, correlation_id: int | None = None) -> int:
        if correlation_id is None:
            self.correlation += 1
            correlation_id = self.correlation
        self.sock.sendall(encode_request(correlation_id, request, client_id="raw-test"))
        return correlation_id

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            chunks += chunk
        return bytes(chunks)

    def recv(self, response_cls: type) -> tuple[int, Any]:
        frame = self.recv_frame()
        header_cls = response_cls.__header_schema__
        header, hsize = entity_reader(header_cls)(frame, 0)
        body, _ = entity_reader(response_cls)(frame, hsize)
        return header.correlation_id, body

    def request(self, request: Any) -> Any:
        corr = self.send(request)
        cls = load_response_schema(request.__api_key__, request.__version__)
        got, body = self.recv(cls)
        assert got == corr
        return body

    def is_closed_by_peer(self, wait: float = 5.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False


def make_batch(values: list[bytes], key: bytes | None = b"k", ts_ms: int = 1_700_000_000_000,
               headers: tuple[tuple[bytes, bytes], ...] = ()) -> bytes:
    """An uncompressed magic-2 record batch built by kio's record writer."""
    ts = datetime.datetime.fromtimestamp(ts_ms / 1000, datetime.UTC)
    records = tuple(
        Record(attributes=0, timestamp=ts, offset=i, key=key, value=v,
               headers=tuple(RecordHeader(key=hk, value=hv) for hk, hv in headers))
        for i, v in enumerate(values)
    )
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        records=records, attributes=0))
    return buf.getvalue()
