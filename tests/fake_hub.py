#!/usr/bin/env python3
"""A loopback stand-in for the Hugging Face hub, for tests/pull_cli_test.cc.

Serves the files under --root (ROOT/ORG/REPO/PATH) with the hub's URL layout:
  GET /api/models/ORG/REPO[?blobs=true]   -> {"id", "siblings": [{"rfilename",
                                             "size", "lfs": {"sha256","size"}}]}
  GET|HEAD /ORG/REPO/resolve/main/PATH    -> the bytes; Range "bytes=N-" or
                                             "bytes=N-M" answered with 206;
                                             ETag and X-Linked-Etag = sha256
Every request is appended to --log as one JSON line (method, path, range,
authorization). Faults come from --faults, a JSON file read on every request
(the test may rewrite it between runs):
  {"repos": {"ORG/REPO": 401},
   "files": {"ORG/REPO/PATH": {"status": 404, "cut_after": N, "cut_times": K,
                               "corrupt": true}},
   "require_token": "hf_secret", "no_lfs": true}
cut_after: send N body bytes of a response, then drop the connection (the
first K GETs of that file when cut_times is given, else all). corrupt: flip
bytes but advertise the real checksum. require_token: 401 without it (not
asked on /cdn/). no_lfs: the listing carries no lfs.sha256. redirect: the
resolve URL answers 302 (with X-Linked-Etag, as the hub does) to
http://localhost:PORT/cdn/ORG/REPO/PATH, another host name for the same
server, whose ETag is not a sha256.
The chosen port is written to --port-file once listening.
"""
import argparse
import hashlib
import http.server
import json
import os
import socketserver
import sys
import threading
import urllib.parse


class Hub:
    def __init__(self, root, log_path, faults_path):
        self.root = root
        self.log_path = log_path
        self.faults_path = faults_path
        self.lock = threading.Lock()
        self.cuts = {}

    def faults(self):
        try:
            with open(self.faults_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def log(self, entry):
        with self.lock, open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def take_cut(self, key, fault):
        """Whether this GET of `key` is to be cut."""
        if "cut_after" not in fault:
            return False
        with self.lock:
            done = self.cuts.get(key, 0)
            if "cut_times" in fault and done >= fault["cut_times"]:
                return False
            self.cuts[key] = done + 1
            return True


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub = None

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.handle_request(head=False)

    def do_HEAD(self):
        self.handle_request(head=True)

    def send_json(self, status, obj, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_request(self, head):
        hub = self.hub
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        hub.log({"method": self.command, "path": path, "query": url.query,
                 "range": self.headers.get("Range"),
                 "authorization": self.headers.get("Authorization")})
        faults = hub.faults()
        parts = path.strip("/").split("/")
        if len(parts) >= 4 and parts[0] == "cdn":
            return self.file(parts[1] + "/" + parts[2], "/".join(parts[3:]), faults, cdn=True)
        token = faults.get("require_token")
        if token and self.headers.get("Authorization") != "Bearer " + token:
            return self.send_json(401, {"error": "Invalid credentials"},
                                  {"X-Error-Code": "GatedRepo"})
        if len(parts) >= 4 and parts[0] == "api" and parts[1] == "models":
            return self.listing(parts[2] + "/" + parts[3], url.query, faults)
        if len(parts) >= 5 and parts[2] == "resolve" and parts[3] == "main":
            return self.file(parts[0] + "/" + parts[1], "/".join(parts[4:]), faults)
        self.send_json(404, {"error": "no such route"})

    def repo_status(self, repo, faults):
        status = faults.get("repos", {}).get(repo)
        if status:
            self.send_json(status, {"error": "fault %d" % status},
                           {"X-Error-Message": "fault injected for " + repo})
            return True
        if not os.path.isdir(os.path.join(self.hub.root, repo)):
            self.send_json(404, {"error": "Repository not found"},
                           {"X-Error-Code": "RepoNotFound"})
            return True
        return False

    def listing(self, repo, query, faults):
        if self.repo_status(repo, faults):
            return
        base = os.path.join(self.hub.root, repo)
        blobs = "blobs=true" in query
        siblings = []
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                full = os.path.join(dirpath, name)
                entry = {"rfilename": os.path.relpath(full, base)}
                if blobs:
                    size = os.path.getsize(full)
                    entry["size"] = size
                    if name.endswith(".gguf") and not faults.get("no_lfs"):
                        entry["lfs"] = {"sha256": sha256_of(full), "size": size}
                siblings.append(entry)
        self.send_json(200, {"id": repo, "siblings": siblings})

    def file(self, repo, rel, faults, cdn=False):
        if not cdn and self.repo_status(repo, faults):
            return
        key = repo + "/" + rel
        fault = faults.get("files", {}).get(key, {})
        full = os.path.join(self.hub.root, repo, rel)
        if fault.get("status"):
            return self.send_json(fault["status"], {"error": "fault"})
        if not os.path.isfile(full):
            return self.send_json(404, {"error": "Entry not found"},
                                  {"X-Error-Code": "EntryNotFound"})
        with open(full, "rb") as f:
            data = f.read()
        digest = hashlib.sha256(data).hexdigest()
        if fault.get("redirect") and not cdn:
            self.send_response(302)
            self.send_header("Location", "http://localhost:%d/cdn/%s" %
                             (self.server.server_address[1], urllib.parse.quote(key)))
            self.send_header("X-Linked-Etag", '"%s"' % digest)
            self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if fault.get("corrupt"):
            data = bytes(b ^ 0x5A for b in data)
        start, end, status = 0, len(data) - 1, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a)
            end = int(b) if b else len(data) - 1
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        body = data[start:end + 1]
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if cdn:
            self.send_header("ETag", '"%s"' % hashlib.md5(data).hexdigest())
        else:
            self.send_header("ETag", '"%s"' % digest)
            self.send_header("X-Linked-Etag", '"%s"' % digest)
            self.send_header("X-Linked-Size", str(len(data)))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
        self.end_headers()
        if self.command == "HEAD":
            return
        if self.command == "GET" and self.hub.take_cut(key, fault):
            self.wfile.write(body[:fault["cut_after"]])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def server_bind(self):
        # HTTPServer's own looks up the host's name (getfqdn), which can hang
        # for seconds on a machine without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--faults", required=True)
    p.add_argument("--port-file", required=True)
    args = p.parse_args()
    Handler.hub = Hub(args.root, args.log, args.faults)
    server = Server(("127.0.0.1", 0), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
