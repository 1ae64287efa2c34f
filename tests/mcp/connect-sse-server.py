#!/usr/bin/env python3
"""tests/mcp/connect-sse-server.py — a stand-in MCP server for `ward mcp
--connect` that answers every POSTed request with a text/event-stream: a
comment, a notification, then the response, its data split over two
`data:` lines, with CRLF, CR and LF line ends, written in small pieces.
initialize gets an Mcp-Session-Id; a later request's response echoes the
session id and protocol version it was sent with (result.sid,
result.version). Prints its port on stdout, serves until killed.
"""
import http.server
import json
import sys
import time


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in msg:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if msg["method"] == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {},
                      "serverInfo": {"name": "sse", "version": "1"}}
        else:
            result = {"sid": self.headers.get("Mcp-Session-Id"),
                      "version": self.headers.get("MCP-Protocol-Version")}
        resp = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        half = resp.index(", \"result\"") + 1  # between two members: the newline is whitespace
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "info", "data": "working"}})
        body = (": a comment\r\n" + "event: message\r\ndata: " + note + "\r\n\r\n" +
                "id: 1\rdata:" + resp[:half] + "\ndata: " + resp[half:] + "\n\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if msg["method"] == "initialize":
            self.send_header("Mcp-Session-Id", "sse-session-1")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(0, len(body), 7):
            piece = body[i:i + 7]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
            time.sleep(0.001)
        self.wfile.write(b"0\r\n\r\n")


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
