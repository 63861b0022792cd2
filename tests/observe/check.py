"""The observability tests, run by tests/observe/run.sh.

Each check prints "PASS name" or "FAIL name: why"; the last line is
"observe: N passed, M failed". The references are independent of the
library: the job (tests/mpi/observe_job.c) counts the calls it makes, the
counters are read back through a real Prometheus server's HTTP API and
through prometheus_client's parser, and the timeline is checked against
the calls and the late rank the job was told to have.
"""
import argparse
import glob
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

RESULTS = {"passed": 0, "failed": 0}
WORKDIRS = []


def workdir(prefix):
    """A fresh folder for one step's files: removed at the end when every
    step passed, else kept for a look and named."""
    d = tempfile.mkdtemp(prefix=prefix)
    WORKDIRS.append(d)
    return d


def report(name, ok, why=""):
    RESULTS["passed" if ok else "failed"] += 1
    print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)), flush=True)
    return ok


def free_ports(n, start=20000):
    """The first of n consecutive ports that nothing listens on."""
    for base in range(start, 60000, 97):
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("0.0.0.0", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


class Job:
    """One launch of observe_job under the build's MPI launcher (each rank
    run by the command @wrap where one is given)."""

    def __init__(self, args, np, env, job_args, wrap=()):
        self.env = dict(os.environ, **env)
        flags = []
        if os.path.basename(args.mpiexec).startswith("mpirun"):
            flags = ["--oversubscribe", "--bind-to", "none"]
            for k in env:
                flags += ["-x", k]
        cmd = [args.mpiexec] + flags + ["-n", str(np)] + list(wrap) + \
            [os.path.join(args.build, "tests/mpi/observe_job")] + job_args
        self.out = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=self.out, stderr=subprocess.STDOUT)

    def finish(self, timeout=300):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = -9
        self.out.seek(0)
        return rc, self.out.read()


def job_ok(rc, out):
    return rc == 0 and " 0 failed" in out and "FAIL" not in out


class HeldJob(Job):
    """A job whose ranks wait, once their calls are made, until release():
    their metrics' endpoints stay up meanwhile. ready: whether the calls
    were made (rank 0 wrote the expect file) within 240 s."""

    def __init__(self, args, np, env, job_args, work, wrap=()):
        self.expect, self.hold = os.path.join(work, "expect"), os.path.join(work, "hold")
        super().__init__(args, np, env, job_args + ["--expect", self.expect, "--hold", self.hold], wrap)
        deadline = time.time() + 240
        while not os.path.exists(self.expect) and self.proc.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        self.ready = os.path.exists(self.expect)

    def release(self):
        open(self.hold, "w").close()
        return self.finish()


def scrape(port):
    """The text of http://127.0.0.1:PORT/metrics, or the error's words."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
            return r.read().decode()
    except OSError as e:
        return "error: %s" % e


def info_rank(text):
    """The rank label of fastreduce_info in a scrape, or None."""
    m = re.search(r'^fastreduce_info\{[^}]*rank="(-?\d+)"', text, re.M)
    return int(m.group(1)) if m else None


def listeners(port):
    """The IPv4 addresses that a socket listens on at TCP port @port (/proc/net/tcp)."""
    found = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            w = line.split()
            addr, p = w[1].split(":")
            if w[3] == "0A" and int(p, 16) == port:
                found.add(socket.inet_ntoa(struct.pack("<I", int(addr, 16))))
    return found


def log_ranks(out):
    """{pid: set of ranks} of the library's log lines (host:pid:rank fastreduce ...)."""
    ranks = {}
    for m in re.finditer(r"^[^:\s]+:(\d+):(-?\d+) fastreduce ", out, re.M):
        ranks.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    return ranks


def read_expect(path):
    """{(collective, algorithm): (calls, bytes)} of every rank, {(collective,
    status): failures} of all ranks, and the calls one rank alone made:
    {rank: {(collective, algorithm): (calls, bytes)}}."""
    want, failed, extra = {}, {}, {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[0] == "failure":
                failed[(w[1], w[2])] = int(w[3])
            elif w[0] == "extra":
                extra.setdefault(int(w[1]), {})[(w[2], w[3])] = (int(w[4]), int(w[5]))
            else:
                want[(w[0], w[1])] = (int(w[2]), int(w[3]))
    return want, failed, extra


def plus(a, b):
    """{kind: (calls, bytes)} a and b added."""
    out = dict(a)
    for k, (c, n) in b.items():
        c0, n0 = out.get(k, (0, 0))
        out[k] = (c0 + c, n0 + n)
    return out


class Prometheus:
    """A real Prometheus server scraping the ranks' endpoints every second."""

    def __init__(self, work, targets):
        self.port = free_ports(1, 19100)
        cfg = os.path.join(work, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: fastreduce\n    static_configs:\n"
                    "      - targets: [%s]\n" % ", ".join("'%s'" % t for t in targets))
        self.log = open(os.path.join(work, "prometheus.log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(work, "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port, timeout=2)
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("Prometheus did not get ready in 60 s (see %s)" % self.log.name)

    def query(self, expr):
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (self.port, urllib.parse.urlencode({"query": expr}))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError("query %s: %s" % (expr, body))
        return body["data"]["result"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def by_kind(result):
    return {(r["metric"].get("collective"), r["metric"].get("algorithm")): float(r["value"][1]) for r in result}


def prometheus_test(args, np):
    """A np-rank job scraped by Prometheus: its counters are the calls the job made."""
    work = workdir("fr-observe-np%d-" % np)
    base = free_ports(np)
    prom = Prometheus(work, ["127.0.0.1:%d" % (base + r) for r in range(np)])
    env = {"FASTREDUCE_METRICS": "http:127.0.0.1:%d,file:%s/m.%%r.prom" % (base, work),
           "FASTREDUCE_METRICS_INTERVAL": "1"}
    job = None
    try:
        job = HeldJob(args, np, env, ["--calls", "20", "--failures"], work)
        if not report("np=%d: the job made its calls" % np, job.ready, "no %s" % job.expect):
            return
        want, failed, extra = read_expect(job.expect)
        # every rank makes the same calls (but the extras): Prometheus sums them
        everyone = {k: (np * c, np * b) for k, (c, b) in want.items()}
        for r in extra:
            everyone = plus(everyone, extra[r])
        total = {k: c for k, (c, b) in everyone.items()}
        nbytes = {k: b for k, (c, b) in everyone.items()}
        got = {}
        deadline = time.time() + 60
        while time.time() < deadline:
            got = by_kind(prom.query('sum by (collective, algorithm) (fastreduce_collective_calls_total{job="fastreduce"})'))
            if got == total:
                break
            time.sleep(1)
        report("np=%d: Prometheus' sum of fastreduce_collective_calls_total is the job's calls" % np,
               got == total, "Prometheus %s, job %s" % (sorted(got.items()), sorted(total.items())))
        up = prom.query('count(up{job="fastreduce"} == 1)')
        report("np=%d: Prometheus scraped every rank's endpoint" % np,
               bool(up) and int(float(up[0]["value"][1])) == np, "up: %s" % up)
        gotb = by_kind(prom.query('sum by (collective, algorithm) (fastreduce_collective_bytes_total)'))
        report("np=%d: fastreduce_collective_bytes_total is the job's bytes" % np, gotb == nbytes,
               "%s vs %s" % (sorted(gotb.items()), sorted(nbytes.items())))
        hist = by_kind(prom.query('sum by (collective, algorithm) (fastreduce_collective_seconds_count)'))
        report("np=%d: the histogram's _count is the calls" % np, hist == total, "%s" % sorted(hist.items()))
        fails = prom.query('sum by (collective, status) (fastreduce_collective_failures_total)')
        fails = {(r["metric"]["collective"], r["metric"]["status"]): int(float(r["value"][1])) for r in fails}
        report("np=%d: fastreduce_collective_failures_total counts the mismatches and timeouts" % np,
               all(fails.get(k) == v for k, v in failed.items()) and failed[("allreduce", "mismatch")] == 3 * np,
               "Prometheus %s, job %s" % (sorted(fails.items()), sorted(failed.items())))
        per_rank = prom.query('sum by (rank) (fastreduce_collective_calls_total)')
        want_rank = {r: sum(c for c, b in plus(want, extra.get(r, {})).values()) for r in range(np)}
        got_rank = {int(r["metric"]["rank"]): int(float(r["value"][1])) for r in per_rank}
        report("np=%d: each rank counted its own calls" % np, got_rank == want_rank,
               "Prometheus %s, job %s" % (got_rank, want_rank))
        if np == 2:
            print("np=2 Prometheus answer to sum by (collective, algorithm) (fastreduce_collective_calls_total):")
            for k in sorted(got):
                print("    %-10s %-20s %d" % (k[0], k[1], got[k]))
    finally:
        rc, out = job.release() if job else (-1, "")
        prom.stop()
    report("np=%d: the job passed" % np, job_ok(rc, out), "exit %d:\n%s" % (rc, out[-3000:]))
    textfile_test(args, np, work, want, extra)


def textfile_test(args, np, work, want, extra):
    """The node exporter's textfile of each rank parses and holds its calls."""
    for r in range(np):
        path = os.path.join(work, "m.%d.prom" % r)
        try:
            with open(path) as f:
                text = f.read()
            fams = {m.name: m for m in text_string_to_metric_families(text)}
        except Exception as e:  # a parse error is the failure reported
            report("np=%d rank %d: the textfile parses" % (np, r), False, "%s: %s" % (path, e))
            continue
        calls = {}
        for s in fams["fastreduce_collective_calls"].samples:
            if s.labels.get("rank") != str(r):
                continue
            k = (s.labels["collective"], s.labels["algorithm"])
            calls[k] = calls.get(k, 0) + int(s.value)
        mine = plus(want, extra.get(r, {}))
        report("np=%d rank %d: the textfile's counters are the rank's calls" % (np, r),
               calls == {k: c for k, (c, b) in mine.items()}, "%s" % sorted(calls.items()))
        leftovers = glob.glob(os.path.join(work, "m.%d.prom.*.tmp" % r))
        report("np=%d rank %d: no temporary file left" % (np, r), not leftovers, "%s" % leftovers)
    if np == 2:
        # (each bound exactly, as the shortest decimal that reads back as it: 4^b us)
        with open(os.path.join(work, "m.0.prom")) as f:
            les = re.findall(r'^fastreduce_collective_seconds_bucket\{[^}]*le="([^"]*)"', f.read(), re.M)
        want_le = [repr(4 ** b / 1e6) for b in range(12)] + ["+Inf"]
        report("the histogram's bucket bounds are exact", les and all(
            les[i:i + len(want_le)] == want_le for i in range(0, len(les), len(want_le))),
            "le labels %s, want %s" % (les[:len(want_le)], want_le))
    dash = os.path.join(args.top, "tools/grafana/check_dashboard.py")
    if np == 2 and os.path.exists(dash):
        p = subprocess.run([sys.executable, dash, os.path.join(args.top, "tools/grafana/fastreduce.json"),
                            os.path.join(work, "m.0.prom")], capture_output=True, text=True)
        report("the Grafana dashboard's metrics are the library's", p.returncode == 0, p.stdout + p.stderr)


def late_rows(out):
    """The first data row's rank of each late-rank report the library printed."""
    firsts, lines = [], out.splitlines()
    for i, line in enumerate(lines):
        if "fastreduce LATE" in line and "others_waited_s" in line and i + 1 < len(lines):
            firsts.append(int(lines[i + 1].split("LATE")[1].split()[0]))
    return firsts


def nesting_errors(events):
    """Phases outside their call, or calls without phases, in a merged trace."""
    calls = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "collective":
            calls[(e["pid"], e["args"]["comm"], e["args"]["call"])] = e
    bad = []
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "phase":
            continue
        c = calls.get((e["pid"], e["args"]["comm"], e["args"]["call"]))
        eps = 0.002  # (the files' microseconds have three decimals)
        if not c or c["tid"] != e["tid"] or e["ts"] < c["ts"] - eps or e["ts"] + e["dur"] > c["ts"] + c["dur"] + eps:
            bad.append(e)
    return calls, bad


def timeline_test(args):
    """A 3-rank job whose rank 2 sleeps before every tenth call."""
    np, late, every, sleep_ms = 3, 2, 10, 50
    work = workdir("fr-observe-timeline-")
    env = {"FASTREDUCE_TIMELINE": os.path.join(work, "t.%r.json"), "FASTREDUCE_STATS": "1"}
    job = Job(args, np, env, ["--calls", "30", "--late", str(late), "--every", str(every),
                              "--sleep-ms", str(sleep_ms), "--expect", os.path.join(work, "expect")])
    rc, out = job.finish()
    report("timeline: the job passed", job_ok(rc, out), "exit %d:\n%s" % (rc, out[-3000:]))
    firsts = late_rows(out)
    report("timeline: FASTREDUCE_STATS's late-rank report names rank %d first on every communicator" % late,
           len(firsts) >= 10 and all(r == late for r in firsts), "first rows: %s\n%s" % (firsts, out[-2000:]))
    files = sorted(glob.glob(os.path.join(work, "t.*.json")))
    merged, png, rep = (os.path.join(work, n) for n in ("merged.json", "timeline.png", "late.json"))
    tool = os.path.join(args.top, "tools/fastreduce-trace")
    p = subprocess.run([sys.executable, tool, "-o", merged, "--png", png, "--json-report", rep] + files,
                       capture_output=True, text=True)
    if not report("timeline: fastreduce-trace merges the ranks' files", p.returncode == 0 and len(files) == np,
                  "%d files; exit %d: %s" % (len(files), p.returncode, p.stdout[-1000:] + p.stderr[-2000:])):
        return
    print(p.stdout)
    with open(merged) as f:
        events = json.load(f)["traceEvents"]
    calls, bad = nesting_errors(events)
    report("timeline: every phase nests inside its call", not bad and calls, "%d outside: %s" % (len(bad), bad[:3]))
    seen = {}
    for (pid, comm, seq) in calls:
        seen.setdefault((comm, seq), set()).add(pid)
    want_calls = sum(int(line.split()[2]) for line in open(os.path.join(work, "expect")))
    missing = [k for k, ranks in seen.items() if ranks != set(range(np))]
    report("timeline: every call appears on every rank", not missing and len(seen) == want_calls,
           "%d calls in the trace, %d made; on some ranks only: %s" % (len(seen), want_calls, missing[:5]))
    # the late rank came last to the calls it slept before, on the aligned clocks
    arrivals = {}
    for (pid, comm, seq), e in calls.items():
        arrivals.setdefault((comm, seq), {})[pid] = e["ts"]
    slept = [a for (comm, seq), a in arrivals.items() if seq % every == 0]
    last = sum(1 for a in slept if max(a, key=a.get) == late)
    report("timeline: rank %d arrived last at the calls it slept before" % late,
           slept and last >= 0.9 * len(slept), "%d of %d" % (last, len(slept)))
    with open(rep) as f:
        lr = json.load(f)
    tops = [max(c["per_rank"], key=lambda x: x["waited_s"])["rank"] for c in lr.values() if c["per_rank"]]
    report("timeline: the merged trace's late-rank report names rank %d" % late,
           len(tops) >= 10 and all(t == late for t in tops), "%s" % tops)
    with open(png, "rb") as f:
        head = f.read(8)
    report("timeline: the PNG is written", head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(png) > 10000,
           "%s, %d bytes" % (head, os.path.getsize(png)))


PY_SPAN = """
import numpy as np
from mpi4py import MPI
import fastreduce as fr
c = fr.Comm(MPI.COMM_WORLD)
x = np.ones(1000, dtype=np.float32)
with fr.span("compute"):
    c.allreduce(x)
c.free()
assert x[0] == MPI.COMM_WORLD.Get_size()
"""


def python_span_test(args):
    """fastreduce.span marks a span that holds the allreduce made inside it."""
    pympi = os.path.join(args.build, "pympi")
    if not os.path.isdir(os.path.join(pympi, "mpi4py")):
        print("SKIP python span: no mpi4py in %s (scripts/test_python.sh builds it)" % pympi)
        return
    work = workdir("fr-observe-py-")
    env = dict(os.environ, FASTREDUCE_TIMELINE=os.path.join(work, "t.%r.json"),
               FASTREDUCE_LIB=os.path.join(args.build, "lib/.libs/libfastreduce.so"),
               PYTHONPATH=os.path.join(args.top, "python") + ":" + pympi)
    flags = []
    if os.path.basename(args.mpiexec).startswith("mpirun"):
        flags = ["--oversubscribe", "--bind-to", "none", "-x", "FASTREDUCE_TIMELINE", "-x", "FASTREDUCE_LIB",
                 "-x", "PYTHONPATH"]
    p = subprocess.run([args.mpiexec] + flags + ["-n", "2", sys.executable, "-c", PY_SPAN], env=env,
                       capture_output=True, text=True, timeout=300)
    ok, why = p.returncode == 0, p.stdout[-1000:] + p.stderr[-2000:]
    for r in range(2):
        if not ok:
            break
        with open(os.path.join(work, "t.%d.json" % r)) as f:
            ev = json.load(f)
        spans = [e for e in ev if e.get("cat") == "span" and e["name"] == "compute"]
        calls = [e for e in ev if e.get("cat") == "collective" and e["name"] == "allreduce"]
        inside = [c for c in calls for sp in spans if c["tid"] == sp["tid"] and sp["ts"] <= c["ts"] and
                  c["ts"] + c["dur"] <= sp["ts"] + sp["dur"] + 0.002]
        ok, why = len(spans) == 1 and len(inside) == 1, "rank %d: spans %s, calls %s" % (r, spans, calls)
    report("python: fastreduce.span holds the allreduce made inside it", ok, why)


def device_test(args):
    """Device-buffer calls in the timeline and the metrics, through the
    stand-in CUDA driver of tests/mpi/test_fakedev (a build with CUDA serves
    them, and they fail alike on every rank: there is no GPU)."""
    fake = os.path.join(args.build, "tests/mpi/fakecuda/libcuda.so.1")
    with open(os.path.join(args.build, "config.h")) as f:
        cuda = '#define FR_BUILT_CUDA "yes"' in f.read()
    if not cuda or not os.path.exists(fake):
        print("SKIP device calls: a build without CUDA refuses device pointers before any call")
        return
    work = workdir("fr-observe-dev-")
    env = dict(os.environ, FR_TEST_FAKE_CUDA=fake, FASTREDUCE_TIMELINE=work + "/t.%r.json",
               FASTREDUCE_METRICS="file:%s/m.%%r.prom" % work)
    flags = []
    if os.path.basename(args.mpiexec).startswith("mpirun"):
        flags = ["--oversubscribe", "--bind-to", "none", "-x", "FR_TEST_FAKE_CUDA", "-x", "FASTREDUCE_TIMELINE",
                 "-x", "FASTREDUCE_METRICS"]
    p = subprocess.run([args.mpiexec] + flags + ["-n", "2", os.path.join(args.build, "tests/mpi/test_fakedev")],
                       env=env, capture_output=True, text=True, timeout=300)
    ok, why = job_ok(p.returncode, p.stdout), p.stdout[-1500:] + p.stderr[-1500:]
    for r in range(2):
        if not ok:
            break
        with open(os.path.join(work, "t.%d.json" % r)) as f:
            cuda = [e for e in json.load(f) if e.get("cat") == "collective" and e["args"]["memory"] == "cuda"]
        with open(os.path.join(work, "m.%d.prom" % r)) as f:
            fails = sum(int(smp.value) for fam in text_string_to_metric_families(f.read())
                        if fam.name == "fastreduce_collective_failures" for smp in fam.samples)
        ok = len(cuda) > 0 and len(cuda) == fails and all(e["args"]["status"] != "success" for e in cuda)
        why = "rank %d: %d device calls in the timeline, %d failures in the metrics" % (r, len(cuda), fails)
    report("device calls: in the timeline (memory cuda) and counted by the metrics", ok, why)


def interposer_test(args):
    """Under the interposer, the calls passed to MPI are counted by reason:
    fastreduce_mpi_passed_total of rank 0's textfile against rank 0's
    FASTREDUCE_STATS rows of calls passed to MPI."""
    work = workdir("fr-observe-pmpi-")
    preload = os.path.join(args.build, "lib/.libs/libfastreduce-mpi.so")
    env = dict(os.environ, FASTREDUCE_STATS="1", FASTREDUCE_METRICS="file:%s/i.%%r.prom" % work)
    flags = []
    if os.path.basename(args.mpiexec).startswith("mpirun"):
        flags = ["--oversubscribe", "--bind-to", "none", "-x", "FASTREDUCE_STATS", "-x", "FASTREDUCE_METRICS"]
    prog = os.path.join(args.build, "tests/mpi/mpi_program")
    p = subprocess.run([args.mpiexec] + flags + ["-n", "2", "env", "LD_PRELOAD=" + preload, prog], env=env,
                       capture_output=True, text=True, timeout=300)
    want = {}
    for line in p.stderr.splitlines():
        m = re.search(r"fastreduce STATS (\w+) +MPI +(.+?) +(\d+) +(\d+) +\d+ ", line)
        if m and m.group(1) in ("allreduce", "bcast", "iallreduce", "ibcast"):
            k = (m.group(1), m.group(2))
            want[k] = want.get(k, 0) + int(m.group(4))
    got = {}
    try:
        with open(os.path.join(work, "i.0.prom")) as f:
            for fam in text_string_to_metric_families(f.read()):
                if fam.name == "fastreduce_mpi_passed":
                    for smp in fam.samples:
                        got[(smp.labels["call"], smp.labels["reason"])] = int(smp.value)
    except OSError as e:
        got = {"error": str(e)}
    report("interposer: fastreduce_mpi_passed_total is what FASTREDUCE_STATS says went to MPI",
           p.returncode == 0 and want and got == want, "exit %d; STATS %s; metrics %s\n%s" %
           (p.returncode, sorted(want.items()), sorted(got.items()) if isinstance(got, dict) else got,
            p.stderr[-1500:]))


def timeline_edges_test(args):
    """The timeline where a span's name is cut inside a character or is not
    UTF-8, where more than 64 threads write, and where a child forked while
    the file's buffer holds events calls exit()."""
    np, work = 2, workdir("fr-observe-edges-")
    env = {"FASTREDUCE_TIMELINE": os.path.join(work, "t.%r.json")}
    rc, out = Job(args, np, env, ["--calls", "1", "--spans", "--threads", "70", "--fork"]).finish()
    report("timeline edges: the job passed", job_ok(rc, out), "exit %d:\n%s" % (rc, out[-3000:]))
    evs = {}
    try:
        for r in range(np):
            with open(os.path.join(work, "t.%d.json" % r), encoding="utf-8") as f:
                evs[r] = json.load(f)
    except (OSError, ValueError) as e:
        report("timeline edges: each rank's file is JSON in UTF-8", False, "%s: %s" % (type(e).__name__, e))
        return
    report("timeline edges: each rank's file is JSON in UTF-8", True)
    want = sorted(["0123456789012345678901234567890123456789012345", "bad \ufffd\ufffd bytes \u00e9"])
    names = {r: sorted({e["name"] for e in ev if e.get("cat") == "span"} - {"work"}) for r, ev in evs.items()}
    report("timeline edges: span names are cut between characters, and bytes not UTF-8 are U+FFFD",
           all(n == want for n in names.values()), "names %s, want %s" % (names, want))
    named, works = {}, {}
    for r, ev in evs.items():
        per_tid = {}
        for e in ev:
            if e["name"] == "thread_name":
                per_tid[e["tid"]] = per_tid.get(e["tid"], 0) + 1
        named[r] = max(per_tid.values(), default=0)
        works[r] = sum(1 for e in ev if e.get("cat") == "span" and e["name"] == "work")
    report("timeline edges: past 64 threads, a thread's name is written once at most",
           all(named[r] == 1 and works[r] == 70 * 3 for r in evs),
           "most thread_name events of one thread %s, work spans %s (want 210)" % (named, works))
    dups, clocks = {}, {}
    for r, ev in evs.items():
        seen = {}
        # (a thread's names are the check above's)
        for e in (e for e in ev if e["name"] != "thread_name"):
            k = json.dumps(e, sort_keys=True)
            seen[k] = seen.get(k, 0) + 1
        dups[r] = sum(n - 1 for n in seen.values())
        keys = [e["args"]["comm"] for e in ev if e["name"] == "fastreduce_clock"]
        clocks[r] = len(keys) - len(set(keys))
    report("timeline edges: a forked child's exit() writes nothing into the parent's file",
           all(dups[r] == 0 and clocks[r] == 0 for r in evs),
           "events written twice %s, clock events written twice %s" % (dups, clocks))


def killed_test(args):
    """A rank killed before its first call keeps its clock's event."""
    np, work = 2, workdir("fr-observe-kill-")
    env = {"FASTREDUCE_TIMELINE": os.path.join(work, "t.%r.json")}
    rc, out = Job(args, np, env, ["--kill"]).finish()
    found = {}
    for r in range(np):
        try:
            with open(os.path.join(work, "t.%d.json" % r), encoding="utf-8") as f:
                body = f.read().strip().rstrip(",")
            found[r] = sum(1 for e in json.loads(body + "\n]") if e["name"] == "fastreduce_clock")
        except (OSError, ValueError) as e:
            found[r] = "%s: %s" % (type(e).__name__, e)
    report("killed rank: the clock's event is in the file of a rank killed before its first call",
           rc != 0 and all(n == 1 for n in found.values()), "exit %d, clock events %s\n%s" % (rc, found, out[-1500:]))


LAUNCHER_LOCAL_RANKS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "SLURM_LOCALID")


def http_place_test(args):
    """Each rank serves on PORT plus its place on the host, when its first
    communicator holds only some ranks: from the launcher's variable, or
    without one from the first communicator of every rank. Each log line
    names the rank in MPI_COMM_WORLD."""
    np = 4
    unset = ["env"] + [a for v in LAUNCHER_LOCAL_RANKS for a in ("-u", v)]
    for how, wrap in (("the launcher's local rank", ()), ("no launcher variable", unset)):
        work, base = workdir("fr-observe-place-"), free_ports(np)
        env = {"FASTREDUCE_METRICS": "http:127.0.0.1:%d" % base, "FASTREDUCE_DEBUG": "INFO"}
        job = HeldJob(args, np, env, ["--calls", "1", "--split-first"], work, wrap)
        try:
            got = {base + r: info_rank(scrape(base + r)) for r in range(np)} if job.ready else {}
        finally:
            rc, out = job.release()
        report("HTTP port (%s): a first communicator of some ranks, each rank serves on PORT plus its place" % how,
               got == {base + r: r for r in range(np)} and "cannot serve HTTP" not in out,
               "port: rank %s\n%s" % (got, "\n".join(l for l in out.splitlines() if "metrics" in l)[-2000:]))
        report("HTTP port (%s): the job passed" % how, job_ok(rc, out), "exit %d:\n%s" % (rc, out[-3000:]))
        ranks = log_ranks(out)
        report("log (%s): each process's lines name its rank in MPI_COMM_WORLD" % how,
               all(len(v) == 1 for v in ranks.values()) and sorted(min(v) for v in ranks.values()) == list(range(np)),
               "ranks by pid: %s" % ranks)
    # under the interposer, FASTREDUCE_DISABLE=1 makes no communicator: the endpoint starts at the first call
    base = free_ports(2)
    env = dict(os.environ, FASTREDUCE_DISABLE="1", FASTREDUCE_METRICS="http:127.0.0.1:%d" % base,
               FASTREDUCE_DEBUG="INFO")
    flags = []
    if os.path.basename(args.mpiexec).startswith("mpirun"):
        flags = ["--oversubscribe", "--bind-to", "none", "-x", "FASTREDUCE_DISABLE", "-x", "FASTREDUCE_METRICS",
                 "-x", "FASTREDUCE_DEBUG"]
    preload = os.path.join(args.build, "lib/.libs/libfastreduce-mpi.so")
    p = subprocess.run([args.mpiexec] + flags + ["-n", "2", "env", "LD_PRELOAD=" + preload,
                                                 os.path.join(args.build, "tests/mpi/mpi_program")],
                       env=env, capture_output=True, text=True, timeout=300)
    started = sorted(int(port) for port in re.findall(
        r" fastreduce INFO metrics at http://127\.0\.0\.1:(\d+)/metrics$", p.stderr, re.M))
    report("HTTP port: under the interposer with FASTREDUCE_DISABLE=1, the ranks serve on PORT and PORT + 1",
           p.returncode == 0 and started == [base, base + 1],
           "exit %d, ports started: %s\n%s" % (p.returncode, started, p.stderr[-1500:]))


def http_entries_test(args):
    """A bad http: entry leaves a good one before it whole; a later good one
    replaces it whole; and the endpoint serves past 1024 open descriptors."""
    p0 = free_ports(2)
    cases = [("a bad entry after a good one", "http:127.0.0.1:%d,http:x" % p0, [], p0, {"127.0.0.1"},
              "'http:x' is not http:PORT"),
             ("a good entry after another", "http:127.0.0.1:%d,http:%d" % (p0, p0 + 1), [], p0 + 1, {"0.0.0.0"},
              "replaces the earlier http: entry")]
    import resource
    if resource.getrlimit(resource.RLIMIT_NOFILE)[1] >= 1400:
        cases.append(("1100 more descriptors open", "http:127.0.0.1:%d" % p0, ["--fds", "1100"], p0,
                      {"127.0.0.1"}, ""))
    else:
        print("SKIP HTTP past 1024 descriptors: the hard limit of open files is under 1400")
    for name, spec, extra, port, addrs, warning in cases:
        work = workdir("fr-observe-http-")
        job = HeldJob(args, 1, {"FASTREDUCE_METRICS": spec}, ["--calls", "1"] + extra, work)
        try:
            where = {q: listeners(q) for q in (p0, p0 + 1)} if job.ready else {}
            rank = info_rank(scrape(port)) if job.ready else None
        finally:
            rc, out = job.release()
        want = {q: addrs if q == port else set() for q in (p0, p0 + 1)}
        report("HTTP (%s): %s serves /metrics on %s:%d alone" % (name, spec, "/".join(sorted(addrs)), port),
               job_ok(rc, out) and where == want and rank == 0 and warning in out,
               "listening %s, want %s; rank in the scrape %s; warning '%s' %s\nexit %d:\n%s" % (
                   where, want, rank, warning, "found" if warning in out else "missing", rc, out[-2000:]))


def trace_clocks_test(args):
    """fastreduce-trace puts every rank on one clock where the first
    communicators hold some ranks each (offsets against their own rank 0):
    through a communicator of every rank, or chained through those that
    share a rank. Made-up files: ranks 0 and 2, then 1 and 3, then (in the
    first case) all four; rank r's clock plus off[r] is rank 0's."""
    off = {0: 0.0, 1: 1000.0, 2: -300.0, 3: 1500.0}
    world = {"0.2": ([0, 1, 2, 3], 0)}
    chain = {"0.3": ([0, 1], 0)}
    for how, last in (("a communicator of every rank", world), ("chained", chain)):
        work = workdir("fr-observe-clock-")
        comms = dict({"0.1": ([0, 2], 0), "1.1": ([1, 3], 1)}, **last)
        calls_on = list(last)[0] if last is world else "0.1"
        files = []
        for r in range(4):
            ev = [{"name": "process_name", "ph": "M", "pid": r, "tid": 0, "args": {"name": "rank %d" % r}}]
            for key, (ranks, ref) in comms.items():
                if r in ranks:
                    ev.append({"name": "fastreduce_clock", "ph": "M", "pid": r, "tid": 0,
                               "args": {"offset_us": off[r] - off[ref], "uncertainty_us": 1.0,
                                        "comm": key, "reference_rank": ref}})
            if r in comms[calls_on][0]:
                for k in range(1, 4):
                    ev.append({"name": "allreduce", "cat": "collective", "ph": "X", "pid": r, "tid": 1,
                               "ts": 10000.0 * k - off[r], "dur": 100.0, "args": {"comm": calls_on, "call": k}})
            files.append(os.path.join(work, "t.%d.json" % r))
            with open(files[-1], "w") as f:
                json.dump(ev, f)
        merged = os.path.join(work, "merged.json")
        p = subprocess.run([sys.executable, os.path.join(args.top, "tools/fastreduce-trace"), "-o", merged] + files,
                           capture_output=True, text=True)
        try:
            with open(merged) as f:
                m = json.load(f)
            got = {int(r): o for r, o in m["otherData"]["clock_offsets_us"].items()}
            starts = {}
            for e in m["traceEvents"]:
                if e.get("cat") == "collective":
                    starts.setdefault(e["args"]["call"], set()).add(round(e["ts"], 3))
        except (OSError, ValueError, KeyError) as e:
            got, starts = "%s: %s" % (type(e).__name__, e), {}
        report("fastreduce-trace: clocks aligned (%s)" % how,
               p.returncode == 0 and got == off and len(starts) == 3 and all(len(t) == 1 for t in starts.values()),
               "exit %d; offsets %s, want %s; each call's starts %s\n%s" % (p.returncode, got, off, starts,
                                                                             p.stderr[-1000:]))


def malformed_test(args):
    """Bad settings warn and the job runs on without the output."""
    work = workdir("fr-observe-bad-")
    busy = socket.socket()
    busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    port = free_ports(2)
    busy.bind(("0.0.0.0", port))
    busy.listen(1)
    cases = [
        ("a port in use", {"FASTREDUCE_METRICS": "http:%d" % port}, "cannot serve HTTP on port %d" % port),
        ("an unwritable timeline", {"FASTREDUCE_TIMELINE": "/proc/no-such-dir/t.json"}, "FASTREDUCE_TIMELINE="),
        ("an unwritable metrics file", {"FASTREDUCE_METRICS": "file:/proc/no-such-dir/m.prom"},
         "FASTREDUCE_METRICS: cannot write"),
        ("a malformed interval", {"FASTREDUCE_METRICS": "file:%s/m.%%r.prom" % work,
                                  "FASTREDUCE_METRICS_INTERVAL": "soon"}, "FASTREDUCE_METRICS_INTERVAL"),
        ("a zero interval", {"FASTREDUCE_METRICS": "file:%s/z.%%r.prom" % work,
                             "FASTREDUCE_METRICS_INTERVAL": "0"}, "must be more than 0"),
        ("a port out of range", {"FASTREDUCE_METRICS": "http:70000"}, "not http:PORT"),
        ("a malformed address", {"FASTREDUCE_METRICS": "http:1.2.3:%d" % port}, "not http:PORT or http:ADDR:PORT"),
        ("an unknown output", {"FASTREDUCE_METRICS": "ftp:somewhere"}, "neither http:PORT nor file:PATH"),
    ]
    try:
        for name, env, warning in cases:
            rc, out = Job(args, 2, env, ["--calls", "3"]).finish()
            report("malformed: %s warns and the job runs on" % name, job_ok(rc, out) and warning in out,
                   "exit %d, warning '%s' %s:\n%s" % (rc, warning, "found" if warning in out else "missing",
                                                      out[-2000:]))
    finally:
        busy.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--top", required=True)
    ap.add_argument("--only", metavar="STEP,...", help="run these steps alone (the names in main())")
    args = ap.parse_args()
    steps = {
        "prometheus2": lambda: prometheus_test(args, 2),
        "prometheus4": lambda: prometheus_test(args, 4),
        "http_entries": lambda: http_entries_test(args),
        "http_place": lambda: http_place_test(args),
        "timeline": lambda: timeline_test(args),
        "edges": lambda: timeline_edges_test(args),
        "killed": lambda: killed_test(args),
        "trace_clocks": lambda: trace_clocks_test(args),
        "python": lambda: python_span_test(args),
        "interposer": lambda: interposer_test(args),
        "device": lambda: device_test(args),
        "malformed": lambda: malformed_test(args),
    }
    only = args.only.split(",") if args.only else list(steps)
    unknown = [n for n in only if n not in steps]
    if unknown:
        ap.error("unknown steps %s (of %s)" % (unknown, ", ".join(steps)))
    for name in only:
        try:
            steps[name]()
        except Exception as e:  # one broken step is a failure, and the others still run
            report("observe step", False, "%s: %s" % (type(e).__name__, e))
    if RESULTS["failed"]:
        print("observe: the steps' files are kept in %s" % " ".join(WORKDIRS))
    else:
        for d in WORKDIRS:
            shutil.rmtree(d, ignore_errors=True)
    print("observe: %d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"]))
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
