"""A webhook receiver for fleetset's tests, verifying each message with the Standard Webhooks
reference library (PyPI standardwebhooks).

    receiver.py PORT_FILE LOG_FILE SECRET_FILE [--fail N] [--status CODE] [--hang] [--port PORT]

Listens on 127.0.0.1 (PORT, or a free port; written to PORT_FILE once listening). For each POST it
appends one JSON line to LOG_FILE: the webhook-id, -timestamp and -signature headers, the body,
whether the library verified it with the secret in SECRET_FILE (read at each request), and the
status it answered: CODE (500 by default) for the first N requests, then 204. --hang accepts
requests and never answers.
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

port_file, log_file, secret_file = sys.argv[1:4]
options = sys.argv[4:]
fail = int(options[options.index("--fail") + 1]) if "--fail" in options else 0
status = int(options[options.index("--status") + 1]) if "--status" in options else 500
hang = "--hang" in options
port = int(options[options.index("--port") + 1]) if "--port" in options else 0
lock = threading.Lock()
seen = [0]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if hang:
            time.sleep(3600)
            return
        with lock:
            seen[0] += 1
            answer = status if seen[0] <= fail else 204
        headers = {name: self.headers.get(name, "") for name in ("webhook-id", "webhook-timestamp", "webhook-signature")}
        try:
            with open(secret_file) as f:
                Webhook(f.read().strip()).verify(body, headers)
            verified = True
        except (WebhookVerificationError, OSError, ValueError):
            verified = False
        record = dict(headers, body=body.decode("utf-8", "replace"), verified=verified, answered=answer, path=self.path,
                      contentType=self.headers.get("content-type", ""))
        with lock, open(log_file, "a") as f:
            f.write(json.dumps(record) + "\n")
        self.send_response(answer)
        if answer in (301, 302, 307, 308):
            self.send_header("location", "http://127.0.0.1:1/elsewhere")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer.allow_reuse_address = True
server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
server.daemon_threads = True
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
