"""A TCP server on 127.0.0.1 in a thread, for the SSH remote's probe: one that greets like sshd (at once or
after a pause), one that hangs up, or one that accepts and never says a word (a stuck sshd, a firewall's tarpit)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def tcp_server(reply: bytes | None, delay: float = 0.0) -> Iterator[int]:
    """Yield the port; each connection gets `reply` `delay` seconds after it is accepted and is closed, or with
    None is held open, silent."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # the server socket was closed: the test is over
                return
            if reply is None:
                held.append(conn)
                continue
            with conn:
                time.sleep(delay)
                try:
                    conn.sendall(reply)
                except OSError:  # the client gave up waiting and closed its end
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        for conn in held:
            conn.close()
