"""Loopback servers that accept Postgres connections and never answer, for tests of a hung server.

:class:`HungProxy` forwards 127.0.0.1:<port> to a real server until :meth:`HungProxy.hang`; from then
on it behaves like a server whose processes were stopped (SIGSTOP), a stalled VM or a half-open
path: every connection, open or new, is accepted and read from, and nothing is ever sent back.
:func:`silent_server` is that hung state without a real server behind it; :func:`answered_then_silent`
answers the startup handshake (no password, no TLS) and then goes silent, so a connection opens
and its first statement gets no answer.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

_SSL_REQUEST, _GSS_REQUEST = 80877103, 80877104


def _listen(handle: Callable[[socket.socket], None]) -> tuple[socket.socket, int]:
    """A loopback listener whose connections each get ``handle`` in a daemon thread; and its port."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)

    def accept() -> None:
        while True:
            try:
                conn, _ = ls.accept()
            except OSError:  # closed
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return ls, ls.getsockname()[1]


def _drain(conn: socket.socket) -> None:
    """Read whatever comes and answer nothing, until the peer closes."""
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass
    finally:
        conn.close()


def silent_server() -> tuple[socket.socket, int]:
    """A listener that accepts, reads and never sends a byte; and its port. Close it when done."""
    return _listen(_drain)


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def _handshake(conn: socket.socket) -> None:
    """Answer a client's startup as a trusting Postgres 16 (SSL and GSS encryption refused)."""
    while True:
        (length,) = struct.unpack("!I", conn.recv(4, socket.MSG_WAITALL))
        (code,) = struct.unpack("!I", conn.recv(length - 4, socket.MSG_WAITALL)[:4])
        if code not in (_SSL_REQUEST, _GSS_REQUEST):
            break
        conn.sendall(b"N")
    params = {
        "server_version": "16.0",
        "client_encoding": "UTF8",
        "standard_conforming_strings": "on",
        "integer_datetimes": "on",
        "DateStyle": "ISO, MDY",
    }
    out = _msg(b"R", struct.pack("!I", 0))
    out += b"".join(_msg(b"S", k.encode() + b"\0" + v.encode() + b"\0") for k, v in params.items())
    conn.sendall(out + _msg(b"K", struct.pack("!II", 1, 2)) + _msg(b"Z", b"I"))


def answered_then_silent() -> tuple[socket.socket, int]:
    """A listener that completes the startup handshake, then reads and never answers; its port."""

    def handle(conn: socket.socket) -> None:
        try:
            _handshake(conn)
        except (OSError, struct.error):
            conn.close()
            return
        _drain(conn)

    return _listen(handle)


class HungProxy:
    """A loopback TCP proxy to ``host:port`` that can be made to hang (see the module).

    Args:
        host: The real server's host.
        port: Its port.
    """

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self.hung = threading.Event()
        self._listener, self.port = _listen(self._serve)

    def hang(self) -> None:
        """From now on nothing reaches either side: the server looks stopped, its sockets open."""
        self.hung.set()

    def resume(self) -> None:
        """Forward again (connections that hung stay hung: the client drops them)."""
        self.hung.clear()

    def close(self) -> None:
        """Stop accepting connections."""
        self._listener.close()

    def _serve(self, client: socket.socket) -> None:
        if self.hung.is_set():
            _drain(client)
            return
        try:
            upstream = socket.create_connection(self._target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()
        self._pipe(client, upstream)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        """Copy ``src`` to ``dst`` until either closes; once hung, read ``src`` and drop it."""
        try:
            while data := src.recv(65536):
                if self.hung.is_set():
                    continue
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
