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
#   limit N : as hold, with SETTINGS_MAX_CONCURRENT_STREAMS N (in force from
#             the server's first SETTINGS: a stream beyond it is refused).
#   drop N  : every Nth request of a connection is never answered.
#   big N   : every answer has an N-byte body, sent as the client's
#             flow-control windows allow.
# Request bodies are read and their flow-control window given back.
# STATS_FILE is rewritten after every request and reset:
# "requests max_waiting resets body_bytes" (resets: RST_STREAM received).
import socket, sys, threading, time
import h2.config, h2.connection, h2.errors, h2.events, h2.settings

mode, stats_path = sys.argv[1], sys.argv[2]
n = int(sys.argv[3])
lock = threading.Lock()
stats = {"requests": 0, "max_waiting": 0, "resets": 0, "body": 0}


def record(waiting, count=1):
    with lock:
        stats["requests"] += count
        stats["max_waiting"] = max(stats["max_waiting"], waiting)
        with open(stats_path + ".tmp", "w") as f:
            f.write("%d %d %d %d\n" % (stats["requests"], stats["max_waiting"],
                                        stats["resets"], stats["body"]))
        import os
        os.replace(stats_path + ".tmp", stats_path)


pending = {}  # big: stream -> body bytes left to send (one connection each)


def answer(conn, sid):
    if mode == "big":
        conn.send_headers(sid, [(":status", "200"), ("content-length", str(n))])
        pending[threading.get_ident(), sid] = n
        return
    conn.send_headers(sid, [(":status", "200"), ("content-length", "2")])
    conn.send_data(sid, b"ok", end_stream=True)


def send_pending(conn):
    for key in [k for k in pending if k[0] == threading.get_ident()]:
        sid, left = key[1], pending[key]
        try:
            w = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, left)
        except Exception:
            del pending[key]
            continue
        if w > 0:
            conn.send_data(sid, b"x" * w, end_stream=(w == left))
            pending[key] = left - w
        if pending[key] == 0:
            del pending[key]


def serve(c):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    if mode == "limit":
        conn.local_settings = h2.settings.Settings(
            client=False,
            initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: n})
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
            if isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                with lock:
                    stats["body"] += len(ev.data)
            elif isinstance(ev, h2.events.StreamReset):
                with lock:
                    stats["resets"] += 1
                record(0, count=0)
            elif isinstance(ev, h2.events.StreamEnded):
                count += 1
                sid = ev.stream_id
                if mode in ("hold", "limit"):
                    waiting.append(sid)
                    since = since or time.monotonic()
                    record(len(waiting))
                elif mode == "rst" and count % n == 0:
                    record(1)
                    conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.INTERNAL_ERROR)
                elif mode == "drop" and count % n == 0:
                    record(1)
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
        send_pending(conn)
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
