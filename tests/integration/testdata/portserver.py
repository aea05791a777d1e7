"""A test server for tests/integration/ports_test.go, run in a sandbox:
a WebSocket echo (/ws), server-sent events that wait for the client
(/events, released by /go) and a request body's length (POST /len), on
127.0.0.1:PORT. Python's standard library only."""
import base64
import hashlib
import http.server
import struct
import sys
import threading

go = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        self.reply(b"%d %s" % (len(data), hashlib.sha256(data).hexdigest().encode()))

    def do_GET(self):
        if self.path == "/go":
            go.set()
            self.reply(b"released")
        elif self.path == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"data: first\n\n")
            self.wfile.flush()
            go.wait()  # until the client, having read the first, asks for /go
            self.wfile.write(b"data: second\n\n")
            self.wfile.flush()
            self.close_connection = True
        elif self.path == "/ws":
            self.websocket()
        else:
            self.reply(b"?")

    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept.decode())
        self.end_headers()
        self.wfile.flush()
        while True:
            b0, b1 = self.rfile.read(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack(">H", self.rfile.read(2))
            elif n == 127:
                (n,) = struct.unpack(">Q", self.rfile.read(8))
            mask = self.rfile.read(4) if b1 & 0x80 else b"\0\0\0\0"
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(self.rfile.read(n)))
            if b0 & 0x0F == 8:
                self.wfile.write(b"\x88\x00")
                self.wfile.flush()
                self.close_connection = True
                return
            head = bytes([b0, n]) if n < 126 else bytes([b0, 126]) + struct.pack(">H", n)
            self.wfile.write(head + data)
            self.wfile.flush()


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
