#!/usr/bin/env python3
"""A prefork echo server for profile's shared-address tests.

  prefork.py WORKERS LIMIT COUNTS_DIR [reuseport]

The parent listens on 127.0.0.1 (an ephemeral port), forks WORKERS workers
that inherit the listening socket, prints "ready PORT PID1 PID2 ..." and
waits. With `reuseport`, the parent only binds the port (SO_REUSEPORT, not
listening) and each worker listens on its own SO_REUSEPORT socket there
instead, so the kernel spreads the connections over the workers. Each worker accepts connections on the shared socket (at most LIMIT
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


def reuseport_socket(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    return s


def wait_listeners(port, n):
    """Waits (at most 10 s) until n sockets listen on the port."""
    import time
    want = ":%04X" % port
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open("/proc/net/tcp") as f:
            rows = [l.split() for l in f.readlines()[1:]]
        if sum(1 for r in rows if r[1].endswith(want) and r[3] == "0A") >= n:
            return
        time.sleep(0.01)
    sys.exit("workers did not listen")


def main():
    workers, limit, counts = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    reuseport = len(sys.argv) > 4 and sys.argv[4] == "reuseport"
    if reuseport:
        lsock = reuseport_socket(0)
    else:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(128)
    port = lsock.getsockname()[1]
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            if reuseport:
                lsock.close()
                lsock = reuseport_socket(port)
                lsock.listen(128)
            worker(lsock, limit, counts)
        pids.append(pid)
    if reuseport:
        # Ready once every worker listens (the workers' own sockets).
        wait_listeners(port, workers)
    print("ready %d %s" % (port, " ".join(map(str, pids))), flush=True)
    signal.sigwait({signal.SIGTERM})
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    for pid in pids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
