#!/usr/bin/env python3
"""An example kube-scheduler extender (extender v1 protocol), standard library only.

It is the extender of the "Custom logic" example: its filter rejects pods by name, its
prioritize scores nodes by name (20 - len(node name)), and its bind writes the Binding to the
API server itself. Used by placement's tests; run it with:

    python3 extender.py --port 0 [--reject-prefix reject-] [--resolvable] [--mode ok|garbage|500|slow]
                        [--api-server URL] [--token TOKEN] [--port-file FILE]

It prints `listening on <port>` (and writes the port to --port-file) once it serves.
Every request is appended to --log (one JSON object per line: verb and body) when given.

Modes, for the failure tests: `garbage` answers 200 with a body that is not JSON, `500`
answers status 500, `slow` waits --delay seconds before answering.
"""

import argparse
import json
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOG_LOCK = threading.Lock()


def node_names(args):
    """The node names of an ExtenderArgs: NodeNames (nodeCacheCapable) or Nodes.items."""
    if args.get("NodeNames") is not None:
        return list(args["NodeNames"])
    nodes = args.get("Nodes") or {}
    return [n["metadata"]["name"] for n in nodes.get("items") or []]


def filter_(args):
    pod = args["Pod"]["metadata"]["name"]
    names = node_names(args)
    failed, unresolvable = {}, {}
    if pod.startswith(ARGS.reject_prefix):
        # A pod's name does not change when pods are evicted: unresolvable, so preemption skips
        # these nodes (--resolvable reports them in FailedNodes instead).
        message = "extender rejects pods named %s*" % ARGS.reject_prefix
        target = failed if ARGS.resolvable else unresolvable
        target.update({n: message for n in names})
        keep = []
    else:
        keep = names
    result = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
    if args.get("NodeNames") is not None:
        result["NodeNames"] = keep
        result["Nodes"] = None
    else:
        items = [n for n in (args.get("Nodes") or {}).get("items") or [] if n["metadata"]["name"] in keep]
        result["Nodes"] = {"metadata": {}, "items": items}
        result["NodeNames"] = None
    return result


def prioritize(args):
    return [{"Host": n, "Score": max(0, min(10, 20 - len(n)))} for n in node_names(args)]


def bind(args):
    if not ARGS.api_server:
        return {"Error": "no --api-server to bind with"}
    body = json.dumps({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": args["PodName"], "namespace": args["PodNamespace"], "uid": args["PodUID"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]},
    }).encode()
    url = "%s/api/v1/namespaces/%s/pods/%s/binding" % (
        ARGS.api_server.rstrip("/"), args["PodNamespace"], args["PodName"])
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    if ARGS.token:
        req.add_header("Authorization", "Bearer " + ARGS.token)
    ctx = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            resp.read()
        return {"Error": ""}
    except urllib.error.HTTPError as e:
        return {"Error": "binding rejected: %d %s" % (e.code, e.read().decode(errors="replace"))}
    except OSError as e:
        return {"Error": "binding failed: %s" % e}


VERBS = {"filter": filter_, "prioritize": prioritize, "bind": bind}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without TCP_NODELAY the body waits for the
    # client's delayed ACK (40 ms a call on Linux).
    disable_nagle_algorithm = True

    def log_message(self, *_):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        verb = self.path.rstrip("/").rsplit("/", 1)[-1]
        try:
            args = json.loads(raw)
        except ValueError:
            self.answer(400, b"bad json")
            return
        if ARGS.log:
            with LOG_LOCK, open(ARGS.log, "a") as f:
                f.write(json.dumps({"verb": verb, "args": args}) + "\n")
        if ARGS.mode == "slow":
            time.sleep(ARGS.delay)
        if ARGS.mode == "500":
            self.answer(500, b"internal error")
            return
        if ARGS.mode == "garbage":
            self.answer(200, b"garbage, not json")
            return
        handler = VERBS.get(verb)
        if handler is None:
            self.answer(404, b"unknown verb")
            return
        self.answer(200, json.dumps(handler(args)).encode())

    def answer(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--reject-prefix", default="reject-")
    p.add_argument("--resolvable", action="store_true")
    p.add_argument("--mode", choices=["ok", "garbage", "500", "slow"], default="ok")
    p.add_argument("--delay", type=float, default=5.0)
    p.add_argument("--api-server")
    p.add_argument("--token")
    p.add_argument("--log")
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--client-ca", help="require a client certificate signed by this CA (PEM file)")
    ARGS = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    server.daemon_threads = True
    if ARGS.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.cert, ARGS.key)
        if ARGS.client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(ARGS.client_ca)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    print("listening on %d" % port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
