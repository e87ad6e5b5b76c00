# An HTTP/2 (h2c, prior knowledge) test server for tests/http2.rs, on the
# python3-h2 package: one thread per connection. argv: MODE STATS_FILE [N]
#   hold N  : answers the requests that have fully arrived once N are
#             waiting (or the oldest waited 0.2 s): the most requests ever
#             waiting at once on a connection is the client's concurrency.
#   rst N   : every Nth request of a connection is reset (RST_STREAM
#             INTERNAL_ERROR), the others answered.
#   goaway N: the Nth request of a connection gets GOAWAY
#             ENHANCE_YOUR_CALM naming the stream before it as the last,
#             and the connection is closed; the others are answered.
# STATS_FILE is rewritten after every request: "requests max_waiting".
import socket, sys, threading, time
import h2.config, h2.connection, h2.errors, h2.events

mode, stats_path = sys.argv[1], sys.argv[2]
n = int(sys.argv[3])
lock = threading.Lock()
stats = {"requests": 0, "max_waiting": 0}


def record(waiting):
    with lock:
        stats["requests"] += 1
        stats["max_waiting"] = max(stats["max_waiting"], waiting)
        with open(stats_path + ".tmp", "w") as f:
            f.write("%d %d\n" % (stats["requests"], stats["max_waiting"]))
        import os
        os.replace(stats_path + ".tmp", stats_path)


def answer(conn, sid):
    conn.send_headers(sid, [(":status", "200"), ("content-length", "2")])
    conn.send_data(sid, b"ok", end_stream=True)


def serve(c):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    c.sendall(conn.data_to_send())
    c.settimeout(0.02)
    waiting, since, count = [], None, 0
    while True:
        try:
            data = c.recv(65536)
            if not data:
                break
        except socket.timeout:
            data = b""
        except OSError:
            break
        for ev in conn.receive_data(data) if data else []:
            if isinstance(ev, h2.events.StreamEnded):
                count += 1
                sid = ev.stream_id
                if mode == "hold":
                    waiting.append(sid)
                    since = since or time.monotonic()
                    record(len(waiting))
                elif mode == "rst" and count % n == 0:
                    record(1)
                    conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.INTERNAL_ERROR)
                elif mode == "goaway" and count == n:
                    record(1)
                    conn.close_connection(
                        error_code=h2.errors.ErrorCodes.ENHANCE_YOUR_CALM,
                        last_stream_id=sid - 2,
                    )
                    c.sendall(conn.data_to_send())
                    c.close()
                    return
                else:
                    record(1)
                    answer(conn, sid)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                c.sendall(conn.data_to_send())
                c.close()
                return
        if waiting and (len(waiting) >= n or time.monotonic() - since > 0.2):
            for sid in waiting:
                answer(conn, sid)
            waiting, since = [], None
        out = conn.data_to_send()
        if out:
            c.sendall(out)
    c.close()


ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
print(ls.getsockname()[1], flush=True)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
