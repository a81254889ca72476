#!/usr/bin/env python3
"""Checks deploy/k8s/*.yaml without a cluster (ctest -R '^deploy_manifests$').

  - every document parses and has apiVersion, kind, metadata.name;
  - the tern Deployment: a readiness probe on /health at the container's
    port, `serve` with --host 0.0.0.0 and --port matching that port;
  - each Service selects the pods of a Deployment and targets a port they name;
  - the HAProxy ConfigMap holds every routing, health and retry line of
    deploy/haproxy/haproxy.cfg.in with the default affinity lines
    (affinity/sticky.cfg.in), filled as scripts/cluster.sh fills them,
    and `haproxy -c` accepts it where haproxy is installed.
Needs python3-yaml; skips (exit 0) without it unless TERN_REQUIRE_TEST_DATA=1.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))
errors = []


def check(cond, message):
    if not cond:
        errors.append(message)
    return cond


def load_docs():
    import yaml  # python3-yaml
    docs = []
    for path in sorted(glob.glob(os.path.join(repo, "deploy", "k8s", "*.yaml"))):
        with open(path) as f:
            for i, doc in enumerate(yaml.safe_load_all(f)):
                if doc is None:
                    continue
                where = "%s (document %d)" % (os.path.relpath(path, repo), i + 1)
                for key in ("apiVersion", "kind"):
                    check(key in doc, "%s: no %s" % (where, key))
                check(doc.get("metadata", {}).get("name"), "%s: no metadata.name" % where)
                docs.append((where, doc))
    return docs


def containers(deploy):
    return deploy["spec"]["template"]["spec"]["containers"]


def check_tern(where, deploy):
    c = containers(deploy)[0]
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    probe = c.get("readinessProbe", {}).get("httpGet", {})
    check(probe.get("path") == "/health", "%s: readinessProbe is not GET /health" % where)
    check(probe.get("port") in ports or probe.get("port") in ports.values(),
          "%s: readinessProbe port %r is not a container port" % (where, probe.get("port")))
    args = [str(a) for a in c.get("args", [])]
    check(args[:1] == ["serve"], "%s: args do not start with serve" % where)

    def flag(name):
        return args[args.index(name) + 1] if name in args[:-1] else None
    check(flag("--host") == "0.0.0.0", "%s: --host 0.0.0.0 missing (pods listen on all addresses)" % where)
    check(flag("--port") is not None and int(flag("--port")) in ports.values(),
          "%s: --port %s is not the container port %s" % (where, flag("--port"), list(ports.values())))
    check(flag("-m") or flag("--model"), "%s: no -m MODEL" % where)


def check_services(docs):
    deployments = [(w, d) for w, d in docs if d["kind"] == "Deployment"]
    for where, svc in docs:
        if svc["kind"] != "Service":
            continue
        selector = svc["spec"].get("selector", {})
        matched = [d for _, d in deployments
                   if selector and selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]
        if not check(matched, "%s: selector %s matches no Deployment's pods" % (where, selector)):
            continue
        for d in matched:
            check(d["spec"]["selector"]["matchLabels"].items() <=
                  d["spec"]["template"]["metadata"]["labels"].items(),
                  "%s: Deployment selector does not match its own pods" % where)
            names = {p.get("name") for c in containers(d) for p in c.get("ports", [])}
            numbers = {p["containerPort"] for c in containers(d) for p in c.get("ports", [])}
            for p in svc["spec"]["ports"]:
                target = p.get("targetPort", p["port"])
                check(target in names or target in numbers,
                      "%s: targetPort %r is not a port of the pods" % (where, target))


def template_lines():
    """The routing/health/retry lines of the template, filled as cluster.sh fills it."""
    with open(os.path.join(repo, "deploy", "haproxy", "haproxy.cfg.in")) as f:
        text = f.read()
    # The default affinity, sticky (deploy/haproxy/affinity/sticky.cfg.in).
    with open(os.path.join(repo, "deploy", "haproxy", "affinity", "sticky.cfg.in")) as f:
        text = text.replace("@AFFINITY@\n", f.read())
    for k, v in {"KEY_BYTES": "256", "BALANCE": "roundrobin", "STICK_EXPIRE": "30m",
                 "CHECK_INTER": "1s"}.items():
        text = text.replace("@%s@" % k, v)
    skip = ("bind ", "server ", "@")
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and not line.startswith(skip):
            lines.append(line)
    return lines


def check_haproxy(where, cm):
    cfg = cm["data"].get("haproxy.cfg", "")
    if not check(cfg, "%s: no data.haproxy.cfg" % where):
        return
    have = {line.strip() for line in cfg.splitlines()}
    for line in template_lines():
        check(line in have, "%s: lacks the template's line '%s'" % (where, line))
    if not shutil.which("haproxy"):
        print("check_manifests: haproxy not installed: `haproxy -c` not run")
        return
    with tempfile.NamedTemporaryFile("w", suffix=".cfg") as f:
        f.write(cfg)
        f.flush()
        r = subprocess.run(["haproxy", "-c", "-q", "-f", f.name], capture_output=True, text=True)
        check(r.returncode == 0, "%s: haproxy -c rejects it:\n%s" % (where, r.stdout + r.stderr))


def main():
    try:
        import yaml  # noqa: F401
    except ImportError:
        if os.environ.get("TERN_REQUIRE_TEST_DATA") == "1":
            print("check_manifests: FAILED: python3-yaml missing", file=sys.stderr)
            return 1
        print("check_manifests: SKIPPED: python3-yaml missing (make deps)")
        return 0
    docs = load_docs()
    check(docs, "no manifests under deploy/k8s")
    kinds = {}
    for where, d in docs:
        kinds.setdefault((d["kind"], d["metadata"]["name"]), where)
    tern = [(w, d) for w, d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "tern"]
    if check(tern, "no Deployment named tern"):
        check_tern(*tern[0])
    check_services(docs)
    cms = [(w, d) for w, d in docs if d["kind"] == "ConfigMap" and "haproxy.cfg" in d.get("data", {})]
    if check(cms, "no ConfigMap with haproxy.cfg"):
        check_haproxy(*cms[0])
    for e in errors:
        print("check_manifests: FAILED: " + e, file=sys.stderr)
    if not errors:
        print("check_manifests: %d documents OK (%s)" % (
            len(docs), ", ".join("%s/%s" % k for k in sorted(kinds))))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
