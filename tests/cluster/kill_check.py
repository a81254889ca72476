#!/usr/bin/env python3
"""One instance of a scripts/cluster.sh cluster SIGKILLed under streaming load.

Sends streaming /v1/completions through HAProxy at a steady rate; after a
second, the first instance seen with two open streams and a long-lived key
is the victim: it is SIGKILLed,
keeps sending, restarts the victim (scripts/cluster.sh restart) and measures
how long HAProxy takes to count it up again after its /health answers 200.

Checks (exit 1 when one fails, each printed):
  - streams cut by the kill end as a closed stream, none hangs;
  - every request sent after the kill succeeds;
  - the restarted instance is counted up within the health-check interval
    (plus --slack-s for a loaded machine) and serves requests again;
  - sticky affinity (the cluster's BALANCE): each of 6 long-lived keys (every
    4th request) keeps its instance, and the killed instance's keys stay where
    they moved after it rejoins (their caches are warm there).
Prints the counts: sent, succeeded, failed by cause. Standard library only.
"""
import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from urllib.parse import urlparse


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-dir", required=True)
    p.add_argument("--cluster-sh", required=True)
    p.add_argument("--rate", type=float, default=25.0, help="requests per second")
    p.add_argument("--max-tokens", type=int, default=600)
    p.add_argument("--after-kill-s", type=float, default=2.5,
                   help="seconds of load between the kill and the restart")
    p.add_argument("--after-up-s", type=float, default=2.0,
                   help="seconds of load after the victim is counted up again")
    p.add_argument("--hang-s", type=float, default=15.0,
                   help="a stream silent this long counts as hung")
    p.add_argument("--slack-s", type=float, default=1.0)
    return p.parse_args()


def read_env(run_dir):
    env = {}
    with open(os.path.join(run_dir, "cluster.env")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            env[k] = v
    return env


def inter_seconds(text):
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    if text.endswith("s"):
        return float(text[:-1])
    return float(text) / 1000  # HAProxy's default unit is ms


class Result:
    def __init__(self, i, sent_at):
        self.i = i
        self.sent_at = sent_at
        self.instance = ""
        self.headers_at = None
        self.first_data_at = None
        self.ended_at = None
        self.outcome = "pending"  # ok | closed-stream | http-NNN | connect-error | hang


FIXED_KEYS = 6
TAIL = " Once upon a time there was a little dog who liked to run." * 5  # past the 256-byte key


def fixed_key(i):
    """Every 4th request carries one of FIXED_KEYS long-lived leading parts."""
    return (i // 4) % FIXED_KEYS if i % 4 == 0 else None


def prompt_of(i):
    # The others get a new leading part every 3 requests, as new
    # conversations keep coming: keys spread over every instance, and a
    # restarted instance is dealt new keys at once.
    k = fixed_key(i)
    return ("Series %d." % k if k is not None else "Story %d." % (i // 3)) + TAIL


def stream_one(front, r, max_tokens, hang_s, state):
    u = urlparse(front)
    body = json.dumps({
        "model": state["model"],
        "prompt": prompt_of(r.i),
        "max_tokens": max_tokens, "ignore_eos": True, "stream": True, "temperature": 0,
    })
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=hang_s)
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        r.instance = resp.getheader("X-Tern-Instance", "")
        r.headers_at = time.monotonic()
        if resp.status != 200:
            resp.read()
            r.outcome = "http-%d" % resp.status
            return
        tail = b""
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            if r.first_data_at is None:
                r.first_data_at = time.monotonic()
                with state["lock"]:
                    state["open"].setdefault(r.instance, set()).add(r.i)
            tail = (tail + chunk)[-64:]
        r.outcome = "ok" if b"data: [DONE]" in tail else "closed-stream"
    except TimeoutError:
        r.outcome = "hang"
    except (http.client.IncompleteRead, ConnectionError, http.client.RemoteDisconnected) as e:
        # After a 200's headers the stream has begun: its end is a closed stream.
        r.outcome = "closed-stream" if r.headers_at is not None else "connect-error: " + type(e).__name__
    except OSError as e:
        r.outcome = "connect-error: " + type(e).__name__
    finally:
        r.ended_at = time.monotonic()
        with state["lock"]:
            state["open"].get(r.instance, set()).discard(r.i)
        conn.close()


def victim_up(stats_url, name):
    with urllib.request.urlopen(stats_url + "/stats;csv", timeout=2) as f:
        for line in f.read().decode().splitlines():
            cols = line.split(",")
            if len(cols) > 17 and cols[0] == "tern" and cols[1] == name:
                return cols[17].startswith("UP")
    return False


def healthy(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=1) as f:
            return f.status == 200
    except Exception:
        return False


def check_sticky_keys(results, victim, marks):
    """Sticky affinity: each long-lived key stays on one instance; the
    victim's keys move once and stay where they moved after it rejoins."""
    failures, moved, kept = [], 0, 0
    for k in range(FIXED_KEYS):
        # Where HAProxy sent each request of the key (its answer's header;
        # a stream cut by the kill counts too).
        def sent_to(t0, t1):
            return [r.instance for r in results
                    if fixed_key(r.i) == k and r.instance and t0 < r.sent_at <= t1]
        before = (sent_to(float("-inf"), marks["kill"]) or [None])[-1]
        during = (sent_to(marks["kill"], marks["restart"]) or [None])[-1]
        after = set(sent_to(marks["up"], float("inf")))
        if before is None or during is None or not after:
            continue  # too few requests of this key to judge
        if before == victim:
            moved += 1
            if after != {during}:
                failures.append("key %d: on %s, moved to %s at the kill, then went to %s after %s "
                                "rejoined (want %s only)" % (k, before, during, sorted(after), victim, during))
        else:
            kept += 1
            if during != before or after != {before}:
                failures.append("key %d of %s went to %s during the outage and %s after (want %s)" % (
                    k, before, during, sorted(after), before))
    print("kill_check: sticky keys: %d of the killed instance's moved and stayed moved, %d others "
          "stayed put%s" % (moved, kept, "" if not failures else " (but see below)"))
    if moved == 0:
        failures.append("no long-lived key was on %s to follow" % victim)
    return failures


def main():
    a = parse_args()
    env = read_env(a.run_dir)
    front, stats = env["FRONT_URL"], env["STATS_URL"]
    urls = env["INSTANCE_URLS"].split(",")
    inter = inter_seconds(env.get("CHECK_INTER", "1s"))
    victim, victim_index = None, None
    with urllib.request.urlopen(front + "/v1/models", timeout=5) as f:
        model = json.load(f)["data"][0]["id"]
    state = {"lock": threading.Lock(), "open": {}, "model": model}
    results, threads = [], []
    t0 = time.monotonic()
    marks = {}
    phase = "before-kill"
    deadline = t0 + 60
    restart = None

    def send():
        r = Result(len(results), time.monotonic())
        results.append(r)
        t = threading.Thread(target=stream_one, args=(front, r, a.max_tokens, a.hang_s, state))
        t.start()
        threads.append(t)

    next_send = t0
    while time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_send:
            send()
            next_send += 1.0 / a.rate
        if phase == "before-kill" and now - t0 >= 1.0:
            # The busiest instance that holds a long-lived key (to follow
            # where its keys go).
            holders = {r.instance for r in results if fixed_key(r.i) is not None and r.instance}
            with state["lock"]:
                busiest = max(((n, s) for n, s in state["open"].items() if n in holders),
                              key=lambda kv: len(kv[1]), default=("", ()))
            open_on_victim = len(busiest[1])
            if open_on_victim >= 2 and busiest[0].startswith("tern"):
                victim, victim_index = busiest[0], int(busiest[0][4:])
                with open(os.path.join(a.run_dir, "inst%d.pid" % victim_index)) as f:
                    os.kill(int(f.read()), signal.SIGKILL)
                marks["kill"] = time.monotonic()
                marks["cut_candidates"] = open_on_victim
                phase = "after-kill"
        elif phase == "after-kill" and now - marks["kill"] >= a.after_kill_s:
            restart = subprocess.Popen([a.cluster_sh, "restart", str(victim_index), "--run-dir", a.run_dir],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            marks["restart"] = now
            phase = "restarting"
        elif phase == "restarting":
            if "ready" not in marks and healthy(urls[victim_index]):
                marks["ready"] = time.monotonic()
            if "ready" in marks and victim_up(stats, victim):
                marks["up"] = time.monotonic()
                phase = "after-up"
        elif phase == "after-up" and now - marks["up"] >= a.after_up_s:
            break
        time.sleep(0.01)
    for t in threads:
        t.join(a.hang_s + 5)
    if restart:
        _, err = restart.communicate(timeout=30)
        if restart.returncode != 0:
            print("kill_check: cluster.sh restart failed: " + err.decode(), file=sys.stderr)

    failures = []
    kill = marks.get("kill")
    if kill is None:
        failures.append("never saw 2 open streams on an instance holding a long-lived key, to kill")
        kill = float("inf")
    causes = {}
    for r in results:
        if r.outcome != "ok":
            causes[r.outcome] = causes.get(r.outcome, 0) + 1
    ok = sum(r.outcome == "ok" for r in results)
    after = [r for r in results if r.sent_at > kill]
    cut = [r for r in results if r.sent_at <= kill and r.outcome != "ok"]
    print("kill_check: sent %d, succeeded %d, failed %d%s" % (
        len(results), ok, len(results) - ok,
        "".join(" (%s: %d)" % kv for kv in sorted(causes.items()))))
    print("kill_check: %d sent after the kill, %d of them succeeded; %d streams cut by the kill "
          "(%d were open on %s)" % (len(after), sum(r.outcome == "ok" for r in after), len(cut),
                                   marks.get("cut_candidates", 0), victim))
    bad_after = [r for r in after if r.outcome != "ok"]
    if bad_after:
        failures.append("%d requests sent after the kill failed: %s" % (
            len(bad_after), sorted({r.outcome for r in bad_after})))
    if kill != float("inf") and not cut:
        failures.append("the kill cut no stream (none was open on %s?)" % victim)
    for r in cut:
        if r.outcome != "closed-stream" or r.instance != victim:
            failures.append("request %d (on %s) failed as '%s', not a closed stream from %s" % (
                r.i, r.instance, r.outcome, victim))
        elif r.ended_at - kill > 5:
            failures.append("request %d's stream closed %.1f s after the kill" % (r.i, r.ended_at - kill))
    if "up" not in marks:
        failures.append("%s was not counted up again after its restart" % victim)
    else:
        rejoin = marks["up"] - marks["ready"]
        print("kill_check: %s healthy %.2f s after the restart began, counted up by HAProxy %.2f s "
              "later (health-check interval %.2f s)" % (victim, marks["ready"] - marks["restart"],
                                                        rejoin, inter))
        if rejoin > inter + a.slack_s:
            failures.append("rejoin took %.2f s > interval %.2f s + %.2f s" % (rejoin, inter, a.slack_s))
        served_again = sum(r.instance == victim and r.outcome == "ok" and r.sent_at > marks["up"]
                           for r in results)
        print("kill_check: %d requests served by %s after it rejoined" % (served_again, victim))
        if served_again == 0:
            failures.append("%s served nothing after it rejoined" % victim)
    if env.get("BALANCE") == "sticky" and "up" in marks and "restart" in marks:
        failures += check_sticky_keys(results, victim, marks)
    for f in failures:
        print("kill_check: FAILED: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
