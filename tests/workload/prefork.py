#!/usr/bin/env python3
"""A prefork echo server for profile's shared-address tests.

  prefork.py WORKERS LIMIT COUNTS_DIR

The parent listens on 127.0.0.1 (an ephemeral port), forks WORKERS workers
that inherit the listening socket, prints "ready PORT PID1 PID2 ..." and
waits. Each worker accepts connections on the shared socket (at most LIMIT
of them when LIMIT > 0, so a test can fix the split), echoes what it reads,
and on SIGTERM writes "BYTES CONNECTIONS" (what it echoed and accepted) to
COUNTS_DIR/PID and exits. SIGTERM to the parent stops the workers first.
"""
import os
import selectors
import signal
import socket
import sys


def worker(lsock, limit, counts):
    state = {"bytes": 0, "conns": 0}

    def on_term(_sig, _frame):
        path = os.path.join(counts, str(os.getpid()))
        with open(path + ".tmp", "w") as f:
            f.write("%d %d\n" % (state["bytes"], state["conns"]))
        os.rename(path + ".tmp", path)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    sel = selectors.DefaultSelector()
    lsock.setblocking(False)
    sel.register(lsock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select(timeout=1.0):
            if key.fileobj is lsock:
                try:
                    conn, _ = lsock.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(True)
                sel.register(conn, selectors.EVENT_READ)
                state["conns"] += 1
                if limit and state["conns"] >= limit:
                    sel.unregister(lsock)
                continue
            conn = key.fileobj
            try:
                data = conn.recv(65536)
            except ConnectionError:
                data = b""
            if not data:
                sel.unregister(conn)
                conn.close()
                continue
            state["bytes"] += len(data)
            try:
                conn.sendall(data)
            except ConnectionError:
                sel.unregister(conn)
                conn.close()


def main():
    workers, limit, counts = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(128)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            worker(lsock, limit, counts)
        pids.append(pid)
    print("ready %d %s" % (lsock.getsockname()[1], " ".join(map(str, pids))), flush=True)
    signal.sigwait({signal.SIGTERM})
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    for pid in pids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
