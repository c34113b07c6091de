#!/usr/bin/env python3
"""A read-only Docker registry (Distribution API v2, the part a pull uses)
serving one image from a `docker save` archive, so that a real dockerd can
really pull on a machine without registry access.

    serve.py SAVED.tar NAME TAG PORTFILE [EXTRA_BYTES]

Listens on 127.0.0.1 (dockerd treats 127.0.0.0/8 registries as insecure,
so plain HTTP is used), writes the port into PORTFILE once listening, and
serves until killed:
  GET /v2/                         200 {}
  GET|HEAD /v2/NAME/manifests/TAG  an image manifest, schema 2
  GET|HEAD /v2/NAME/blobs/DIGEST   the config, or a layer gzip-compressed
Anything else is 404 with the registry's error body. Layers are compressed
once at start; their digests are of the compressed bytes, the config's
diff_ids of the uncompressed ones (as docker save wrote them).

EXTRA_BYTES (default 0) adds a layer holding one file of that many random
bytes (/sbx-pull-payload): an image, and a layer, that no daemon has yet,
so that a pull really downloads and reports its progress.
"""
import gzip
import hashlib
import http.server
import io
import json
import os
import sys
import tarfile

MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG = "application/vnd.docker.container.image.v1+json"
LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def payload_layer(size):
    """An uncompressed layer tar with one file of `size` random bytes."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo("sbx-pull-payload")
        info.size = size
        info.mode = 0o644
        t.addfile(info, io.BytesIO(os.urandom(size)))
    return out.getvalue()


def load(saved, extra):
    with tarfile.open(saved) as t:
        index = json.load(t.extractfile("manifest.json"))[0]
        config = t.extractfile(index["Config"]).read()
        raw = [t.extractfile(l).read() for l in index["Layers"]]
    if extra:
        raw.append(payload_layer(extra))
        c = json.loads(config)
        c["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(raw[-1]).hexdigest())
        c.setdefault("history", []).append({"created_by": "serve.py payload"})
        config = json.dumps(c).encode()
    layers = [gzip.compress(l, mtime=0, compresslevel=1) for l in raw]
    blobs = {}

    def digest(data):
        d = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[d] = data
        return d

    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "size": len(config), "digest": digest(config)},
        "layers": [{"mediaType": LAYER, "size": len(l), "digest": digest(l)} for l in layers],
    }
    return json.dumps(manifest).encode(), blobs


def main():
    saved, name, tag, portfile = sys.argv[1:5]
    extra = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    manifest, blobs = load(saved, extra)
    mdigest = "sha256:" + hashlib.sha256(manifest).hexdigest()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, body, ctype, extra=None):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                # in pieces, so that the client sees a download in progress
                for i in range(0, len(body), 65536):
                    self.wfile.write(body[i:i + 65536])

        def route(self):
            path = self.path.split("?")[0]
            if path in ("/v2/", "/v2"):
                return self.answer(200, b"{}", "application/json")
            if path == "/v2/%s/manifests/%s" % (name, tag) or path == "/v2/%s/manifests/%s" % (name, mdigest):
                return self.answer(200, manifest, MANIFEST, {"Docker-Content-Digest": mdigest})
            prefix = "/v2/%s/blobs/" % name
            if path.startswith(prefix) and path[len(prefix):] in blobs:
                d = path[len(prefix):]
                return self.answer(200, blobs[d], "application/octet-stream",
                                   {"Docker-Content-Digest": d})
            err = json.dumps({"errors": [{"code": "NAME_UNKNOWN", "message": "not here"}]})
            return self.answer(404, err.encode(), "application/json")

        do_GET = route
        do_HEAD = route

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(portfile + ".tmp", portfile)
    server.serve_forever()


if __name__ == "__main__":
    main()
