#!/usr/bin/env python3
"""Helpers of bench/run: configuration trees, signed request sets, loads, probes, report.

Standard library only (python3 >= 3.9). Every wait is bounded; every failure exits
non-zero with a message on standard error, so that bench/run (set -e) stops loudly.
Subcommands write their result as one JSON object on standard output unless told
otherwise; bench/run stores them under $WORK/res/ and `report` reads them all.
"""

import argparse
import datetime as dt
import glob
import gzip
import hashlib
import hmac
import http.client
import json
import math
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

BODY = '{{"ref":"refs/heads/main","job":"{job}"}}'
BAD_SIGNATURE = "0" * 64  # well-formed hex, so the server does the whole HMAC check


def die(message):
    print(f"bench.py: {message}", file=sys.stderr)
    sys.exit(1)


def sign(secret, body):
    return hmac.new(secret.encode(), body.encode(), hashlib.sha256).hexdigest()


def job_names(count, prefix="j"):
    width = max(2, len(str(count - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(count)]


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def out(obj):
    json.dump(obj, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


def write(path, text, mode=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(path, mode)


def iso(ts):
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def log_time(ts):
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


# ----- HTTP ------------------------------------------------------------------------------


def split_url(url):
    m = re.match(r"^http://([^/:]+):(\d+)(/.*)?$", url)
    if not m:
        die(f"unsupported URL {url!r}")
    return m.group(1), int(m.group(2)), m.group(3) or "/"


def http_get(url, headers=None, timeout=5.0):
    host, port, path = split_url(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_ready(url, pid, timeout, method="GET", headers=None, poll=0.001):
    """Polls until `url` answers 200 (GET) or any HTTP answer (method ANY); returns the
    seconds waited. Fails when the process `pid` dies or the time runs out."""
    start = time.monotonic()
    host, port, path = split_url(url)
    while True:
        if pid and not pid_alive(pid):
            die(f"the server (pid {pid}) exited before answering {url}")
        try:
            conn = http.client.HTTPConnection(host, port, timeout=2)
            conn.request("GET" if method == "ANY" else method, path, headers=headers or {})
            resp = conn.getresponse()
            resp.read()
            conn.close()
            if method == "ANY" or resp.status == 200:
                return time.monotonic() - start
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() - start > timeout:
            die(f"{url} did not answer within {timeout} s")
        time.sleep(poll)


# ----- /proc -----------------------------------------------------------------------------


def mem_kb(pid):
    """(VmRSS, VmHWM) in KiB of process `pid`."""
    rss = hwm = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError as err:
        die(f"cannot read the memory of pid {pid}: {err}")
    if rss is None or hwm is None:
        die(f"pid {pid}: no VmRSS/VmHWM")
    return rss, hwm


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """(own user+system CPU, CPU of reaped children) in seconds of process `pid`."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError as err:
        die(f"cannot read the CPU time of pid {pid}: {err}")
    # Fields 14-17 (utime, stime, cutime, cstime) are at 11..14 after the command name.
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / CLK_TCK, (cutime + cstime) / CLK_TCK


class RssSampler(threading.Thread):
    def __init__(self, pid, every=0.05):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.peak = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.peak = max(self.peak, mem_kb(self.pid)[0])
            except SystemExit:
                return
            self.stop.wait(self.every)


# ----- svc metrics and counted commands ----------------------------------------------------


def svc_metrics(metrics_url):
    """(finished job runs, sum of their durations in seconds) from svc's metrics."""
    status, _, body = http_get(metrics_url)
    if status != 200:
        die(f"{metrics_url} answered {status}")
    total, duration = 0, 0.0
    for line in body.decode().splitlines():
        if line.startswith("svc_runs_total{") and 'kind="job"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith('svc_run_duration_seconds_sum{kind="job"}'):
            duration = float(line.rsplit(" ", 1)[1])
    return total, duration


def svc_runs(metrics_url):
    return svc_metrics(metrics_url)[0]


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def counter_reader(args):
    if args.metrics:
        return lambda: svc_runs(args.metrics)
    if args.count_file:
        return lambda: count_lines(args.count_file)
    return None


# ----- configuration trees ---------------------------------------------------------------


def svc_main(args, dir_base, max_running):
    return (
        "# Written by bench/lib/bench.py.\n[svc]\n"
        f"dir_base = {dir_base}\n"
        f"listen_address = 127.0.0.1:{args.port}\n"
        f"secret = {args.secret}\n"
        f"max_job_running = {max_running}\n"
        f"runner_path = {args.runner}\n"
        + (f"database_url = {args.database_url}\n" if args.database_url else "")
        + (f"node_name = {args.node_name}\n" if args.node_name else "")
    )


def write_state(dir_base, job, last_run, status, counter):
    write(
        os.path.join(dir_base, "var/run/svc/job", job),
        f"last_run = {iso(last_run) if last_run else ''}\nstatus = {status}\n"
        f"counter = {counter}\npaused = false\n",
    )


def cmd_gen_svc(args):
    d = os.path.abspath(args.dir)
    conf = os.path.join(d, "etc/svc")
    os.makedirs(os.path.join(conf, "job.d"), exist_ok=True)
    os.makedirs(os.path.join(conf, "job_http.d"), exist_ok=True)
    jobs = []
    max_running = args.max_running
    info = {"dir_base": d}
    if args.kind == "trigger":
        for name in job_names(args.jobs):
            jobs.append((name, [f"path = /bench/{name}", "command = /bin/true"]))
    elif args.kind == "idle":
        for name in job_names(args.jobs):
            jobs.append((name, [f"path = /bench/{name}", "command = /bin/true"]))
    elif args.kind == "overhead":
        # Jobs write only where their write_paths let them (the per-run sandbox).
        out_dir = os.path.join(d, "out")
        os.makedirs(out_dir, exist_ok=True)
        stamps = os.path.join(out_dir, "stamps.txt")
        jobs.append(
            (
                "stamp",
                [
                    "path = /bench/stamp",
                    f"write_paths = {out_dir}",
                    f"command = date +%s.%N >> {stamps}",
                ],
            )
        )
        info["stamps"] = stamps
    elif args.kind == "timer":
        out_dir = os.path.join(d, "out")
        os.makedirs(out_dir, exist_ok=True)
        out_file = os.path.join(out_dir, "timer.txt")
        # A last_run in the future puts every job's first due time at t0 + 1 s, a whole
        # second, and the grid (due + k * 1 s) on whole seconds from there.
        t0 = float(math.ceil(time.time()) + args.lead)
        for name in job_names(args.jobs, "t"):
            jobs.append(
                (
                    name,
                    [
                        "interval = 1s",
                        f"write_paths = {out_dir}",
                        f'command = "echo \\"$SVC_JOB_ID $(date +%s.%N)\\" >> {out_file}"',
                    ],
                )
            )
            write_state(d, name, t0, "success", 0)
        info.update({"t0": t0, "file": out_file})
    elif args.kind == "env":
        now = time.time()
        logs = 0
        for i, name in enumerate(job_names(args.jobs, "e")):
            if i % 2 == 0:
                # Ran an hour ago, next due in 23 h: no run during the benchmark.
                lines = ["interval = 24h"]
            else:
                lines = [f"path = /env/{name}"]
            lines += [
                "command = echo one",
                "command = echo two",
                f"description = benchmark job {i}, <b>{name}</b>",
            ]
            jobs.append((name, lines))
            last = now - 3600
            log_dir = os.path.join(d, "var/log/svc/job", name)
            os.makedirs(log_dir, exist_ok=True)
            for counter in range(1, args.logs + 1):
                t = last - (args.logs - counter) * 3600
                text = "".join(
                    f"{log_time(t)} {line}\n"
                    for line in (
                        f"=== run {counter} of job {name} started by timer",
                        "$ echo one",
                        "one",
                        "--- exit code 0 after 0.002s",
                        "$ echo two",
                        "two",
                        "--- exit code 0 after 0.002s",
                        f"=== run {counter} finished: success",
                    )
                )
                write(os.path.join(log_dir, f"{name}.{counter}.success"), text)
                logs += 1
            write_state(d, name, last, "success", args.logs)
        info["logs"] = logs
    elif args.kind == "scale":
        # Many idle jobs, one file each in job.d (as configuration management writes
        # them), every one with a long timer, half also with a webhook path, and
        # `--logs` finished logs each, kept by log_retention.
        write_scale_jobs(d, conf, args)
        info.update({"logs": args.jobs * args.logs, "scale_jobs": args.jobs})
    elif args.kind == "scale-timer":
        # Every job due at the same whole seconds (see "timer" above), each run a plain
        # command started without a shell: the cheapest run there is.
        t0 = float(math.ceil(time.time()) + args.lead)
        for name in job_names(args.jobs, "t"):
            jobs.append((name, ["interval = 1s", "command = /bin/true"]))
            write_state(d, name, t0, "success", 0)
        info["t0"] = t0
    else:
        die(f"unknown kind {args.kind}")
    write(os.path.join(conf, "svc.conf"), svc_main(args, d, max_running), 0o600)
    text = "".join(
        f'[job "{name}"]\n' + "".join(f"{line}\n" for line in lines) + "\n" for name, lines in jobs
    )
    write(os.path.join(conf, "job.d/bench.conf"), text)
    info.update({"config": os.path.join(conf, "svc.conf"), "jobs": info.pop("scale_jobs", len(jobs))})
    out(info)


def write_scale_jobs(d, conf, args):
    """`args.jobs` jobs in job.d, one file each, with `args.logs` logs each in the
    on-disk format of logstore.rs and a matching state file."""
    now = time.time()
    last = now - 3600
    names = job_names(args.jobs, "s")
    job_d = os.path.join(conf, "job.d")
    for i, name in enumerate(names):
        lines = [
            f'[job "{name}"]',
            # Ran an hour ago, next due in 23 h: no run during the benchmark.
            "interval = 24h",
            f"log_retention = {args.logs}",
            "command = echo one",
            "command = echo two",
            f"description = scale job {i}, <b>{name}</b>",
        ]
        if i % 2 == 1:
            # A webhook job with a secret of its own, as --check asks.
            lines[2:2] = [f"path = /scale/{name}", f"secret = {args.secret}-{name}"]
        with open(os.path.join(job_d, f"{name}.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")
        log_dir = os.path.join(d, "var/log/svc/job", name)
        os.makedirs(log_dir, exist_ok=True)
        for counter in range(1, args.logs + 1):
            t = log_time(last - (args.logs - counter) * 3600)
            text = (
                f"{t} === run {counter} of job {name} started by timer\n"
                f"{t} $ echo one\n{t} one\n{t} --- exit code 0 after 0.002s\n"
                f"{t} $ echo two\n{t} two\n{t} --- exit code 0 after 0.002s\n"
                f"{t} === run {counter} finished: success\n"
            )
            with open(os.path.join(log_dir, f"{name}.{counter}.success"), "w") as f:
                f.write(text)
        write_state(d, name, last, "success", args.logs)


def cmd_gen_webhook(args):
    d = os.path.abspath(args.dir)
    os.makedirs(d, exist_ok=True)
    count_file = os.path.join(d, "count.txt")
    script = os.path.join(d, "count.sh")
    # What svc's job does (/bin/sh, /bin/true) plus the line that counts the run.
    write(script, f"#!/bin/sh\n/bin/true\necho x >> {count_file}\n", 0o755)
    hooks = []
    for name in job_names(args.jobs):
        hooks.append(
            {
                "id": name,
                "execute-command": script,
                "command-working-directory": d,
                "include-command-output-in-response": bool(args.sync),
                # A rule that does not match is answered 401, as in svc. (webhook 2.8.0
                # answers a wrong signature 500 "Error occurred while evaluating hook
                # rules" whatever this says: it treats it as an evaluation error.)
                "trigger-rule-mismatch-http-response-code": 401,
                "trigger-rule": {
                    "match": {
                        "type": "payload-hmac-sha256",
                        "secret": args.secret,
                        "parameter": {"source": "header", "name": "X-Svc-Sign"},
                    }
                },
            }
        )
    write(os.path.join(d, "hooks.json"), json.dumps(hooks, indent=1))
    out({"hooks": os.path.join(d, "hooks.json"), "count_file": count_file})


def cmd_gen_reqs(args):
    """A Lua data file for bench/wrk/bench.lua: the pre-signed requests, one per job."""

    def lua(s):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    items = []
    names = job_names(args.jobs)
    # Each node's load generator starts at its own place in the round, so that the
    # nodes do not send the same job's trigger at the same moment.
    shift = args.rotate % len(names)
    for name in names[shift:] + names[:shift]:
        body = BODY.format(job=name)
        sig = BAD_SIGNATURE if args.bad else sign(args.secret, body)
        items.append(
            f"  {{path = {lua(args.prefix + name)}, body = {lua(body)}, sig = {lua(sig)}}},"
        )
    text = (
        "-- Written by bench/lib/bench.py: pre-signed requests, one per job.\n"
        f"return {{\n header = {lua(args.header)},\n items = {{\n"
        + "\n".join(items)
        + "\n }\n}\n"
    )
    write(args.out, text)


# ----- start-up, readiness, memory -------------------------------------------------------


def cmd_wait(args):
    waited = wait_ready(args.url, args.pid, args.timeout, method=args.method)
    out({"seconds": round(waited, 4)})


def cmd_startup(args):
    """Spawns the command (its pid appended to --pidfile at once), polls --url until it
    answers 200 and prints the time from spawn to that answer. Leaves it running."""
    stdout = open(args.stdout, "ab")
    stderr = open(args.stderr, "ab")
    start = time.monotonic()
    proc = subprocess.Popen(args.command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    with open(args.pidfile, "a") as f:
        f.write(f"{proc.pid}\n")
    # Polls without sleeping much: the figure is start-up time, not poll granularity.
    host, port, path = split_url(args.url)
    while True:
        if proc.poll() is not None:
            die(f"{args.command[0]} exited with {proc.returncode} before answering")
        try:
            conn = http.client.HTTPConnection(host, port, timeout=5)
            conn.request("GET", path, headers={"Accept-Encoding": "gzip"})
            resp = conn.getresponse()
            resp.read()
            conn.close()
            if resp.status == 200:
                break
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() - start > args.timeout:
            die(f"{args.url} did not answer 200 within {args.timeout} s")
        time.sleep(0.0005)
    elapsed = time.monotonic() - start
    out({"pid": proc.pid, "ms": round(elapsed * 1000, 1)})


def cmd_mem(args):
    rss, hwm = mem_kb(args.pid)
    out({"rss_kb": rss, "hwm_kb": hwm})


def cmd_stop(args):
    """SIGTERM, then SIGKILL after --grace seconds; waits (bounded) until gone."""
    for pid in args.pids:
        if not pid_alive(pid):
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + args.grace
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if pid_alive(pid):
            print(f"bench.py: pid {pid} still there after {args.grace} s: SIGKILL", file=sys.stderr)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 5
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)


# ----- loads -----------------------------------------------------------------------------


def run_wrk(args):
    env = dict(os.environ)
    if args.reqs:
        env["BENCH_REQS"] = args.reqs
    cmd = [
        "wrk",
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{args.seconds}s",
        "--timeout",
        "5s",
        "-s",
        args.script,
    ]
    for header in args.header or []:
        cmd += ["-H", header]
    cmd.append(args.url)
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=args.seconds + 30
        )
    except subprocess.TimeoutExpired:
        die(f"wrk did not end within {args.seconds + 30} s")
    if done.returncode != 0:
        die(f"wrk failed ({done.returncode}): {done.stderr.strip()} {done.stdout.strip()}")
    for line in done.stdout.splitlines():
        if line.startswith("BENCH_JSON "):
            return json.loads(line[len("BENCH_JSON ") :]), done.stdout
    die(f"no BENCH_JSON line in the output of wrk:\n{done.stdout}\n{done.stderr}")


def settle(read, seconds):
    """Reads the counter until it stops moving for 1 s (at most `seconds`)."""
    deadline = time.monotonic() + seconds
    last, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        value = read()
        if value != last:
            last, since = value, time.monotonic()
        elif time.monotonic() - since >= 1.0:
            break
    return last


def cmd_load(args):
    counter = counter_reader(args)
    result = {"label": args.label}
    if args.pid:
        result["rss_before_kb"] = mem_kb(args.pid)[0]
        sampler = RssSampler(args.pid)
        sampler.start()
    runs_before = counter() if counter else None
    if args.pid:
        cpu_before = cpu_seconds(args.pid)
    wrk, text = run_wrk(args)
    if counter:
        runs_end = counter()
    if args.pid:
        cpu_end = cpu_seconds(args.pid)
        result["cpu_s"] = cpu_end[0] - cpu_before[0]
        result["children_cpu_s"] = cpu_end[1] - cpu_before[1]
        result["cpu_us_per_req"] = result["cpu_s"] * 1e6 / max(1, wrk["requests"])
    if args.pid:
        sampler.stop.set()
        sampler.join()
        rss_end, hwm = mem_kb(args.pid)
        result.update(
            {"rss_end_kb": rss_end, "rss_peak_sampled_kb": max(sampler.peak, rss_end), "hwm_kb": hwm}
        )
    result.update(wrk)
    duration = wrk["duration_us"] / 1e6
    result["rps"] = wrk["requests"] / duration
    if counter:
        result["runs_in_window"] = runs_end - runs_before
        result["runs_per_sec"] = (runs_end - runs_before) / duration
        if args.pid and result["runs_in_window"]:
            result["children_cpu_ms_per_run"] = (
                result["children_cpu_s"] * 1000 / result["runs_in_window"]
            )
    if args.after:
        time.sleep(args.after)
        if args.pid:
            result["rss_after_kb"] = mem_kb(args.pid)[0]
    if counter and args.drain:
        result["runs_total"] = settle(counter, args.drain) - runs_before
    write(os.path.join(args.res, args.label + ".wrk.txt"), text)
    out(result)


# ----- cluster: several nodes, one PostgreSQL ----------------------------------------------


def psql(args, sql):
    """One query's unaligned, header-less output, through psql on --db-url."""
    try:
        done = subprocess.run(
            [args.psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", args.db_url, "-c", sql],
            capture_output=True,
            text=True,
            timeout=20,
            env=dict(os.environ, PGCONNECT_TIMEOUT="10"),
        )
    except subprocess.TimeoutExpired:
        die(f"psql did not answer within 20 s: {sql}")
    if done.returncode != 0:
        die(f"psql failed: {done.stderr.strip()} ({sql})")
    return done.stdout.strip()


def cluster_runs(args):
    """(successful runs, runs queued or running, epoch of the last end) in svc_runs."""
    text = psql(
        args,
        "SELECT count(*) FILTER (WHERE state = 'done' AND status = 'success'),"
        " count(*) FILTER (WHERE state IN ('queued', 'running')),"
        " coalesce(extract(epoch FROM max(ended_at)), 0) FROM svc_runs",
    )
    done, pending, last = text.split("|")
    return int(done), int(pending), float(last)


def success_runs(metrics_urls):
    """Successful job runs of single-node svc, from svc_runs_total{result="success"}."""
    total = 0
    for url in metrics_urls:
        status, _, body = http_get(url)
        if status != 200:
            die(f"{url} answered {status}")
        for line in body.decode().splitlines():
            if line.startswith("svc_runs_total{") and 'kind="job"' in line and 'result="success"' in line:
                total += int(float(line.rsplit(" ", 1)[1]))
    return total


class ConnSampler(threading.Thread):
    """The most connections svc-controller held on the server, sampled every 0.5 s."""

    def __init__(self, args):
        super().__init__(daemon=True)
        self.args, self.peak = args, 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            count = psql(
                self.args,
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'svc-controller'",
            )
            self.peak = max(self.peak, int(count))
            self.stop.wait(0.5)


def tree_cpu(root):
    """CPU seconds of process `root` and its children alive now (PostgreSQL's postmaster
    and its backends)."""
    total = cpu_seconds(root)[0]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == root:
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def cmd_cluster_load(args):
    """Signed triggers to every node at once (one wrk per node, the connections shared
    out), then runs counted until the queue drains (bounded by --drain): from svc_runs
    with --db-url, from the metrics of single-node svc otherwise."""
    urls = args.urls.split(",")
    reqs = args.reqs.split(",")
    pids = [int(p) for p in args.pids.split(",")] if args.pids else []
    if len(reqs) != len(urls):
        die("cluster-load: one --reqs file per URL")
    cluster = bool(args.db_url)
    metrics = [u + "/svc/api/metrics" for u in urls]
    conns = [args.connections // len(urls) + (1 if i < args.connections % len(urls) else 0) for i in range(len(urls))]
    if cluster:
        runs_before = cluster_runs(args)[0]
        sampler = ConnSampler(args)
        sampler.start()
    else:
        runs_before = success_runs(metrics)
    cpu_before = [cpu_seconds(p)[0] for p in pids]
    pg_before = tree_cpu(args.pg_pid) if args.pg_pid else None
    threads = 2 if len(urls) == 1 else 1
    procs = []
    start = time.time()
    for url, req, c in zip(urls, reqs, conns):
        cmd = ["wrk", f"-t{threads}", f"-c{c}", f"-d{args.seconds}s", "--timeout", "5s", "-s", args.script, url]
        procs.append(
            subprocess.Popen(
                cmd, env=dict(os.environ, BENCH_REQS=req), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    results = []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=args.seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            die(f"wrk did not end within {args.seconds + 30} s")
        if proc.returncode != 0:
            die(f"wrk failed ({proc.returncode}): {stderr.strip()}")
        lines = [l for l in stdout.splitlines() if l.startswith("BENCH_JSON ")]
        if not lines:
            die(f"no BENCH_JSON line in the output of wrk:\n{stdout}\n{stderr}")
        results.append(json.loads(lines[0][len("BENCH_JSON ") :]))
    load_end = time.time()
    cpu_end = [cpu_seconds(p)[0] for p in pids]
    pg_cpu = tree_cpu(args.pg_pid) - pg_before if args.pg_pid else None
    duration = max(r["duration_us"] for r in results) / 1e6
    # Runs until the queue drains: the nodes' queues (cluster) or the run counter stops
    # moving for 1 s (single node, whose queue is not visible from outside).
    deadline = time.monotonic() + args.drain
    if cluster:
        runs_at_load_end = cluster_runs(args)[0]
        while True:
            done, pending, last_end = cluster_runs(args)
            if pending == 0 or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        sampler.stop.set()
        sampler.join()
        drained = pending == 0
        end = last_end if last_end > 0 else time.time()
    else:
        runs_at_load_end = success_runs(metrics)
        done, end, stable_since = runs_at_load_end, time.time(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now_done = success_runs(metrics)
            if now_done != done:
                done, end, stable_since = now_done, time.time(), time.monotonic()
            elif time.monotonic() - stable_since >= 1.0:
                break
        drained, pending = time.monotonic() - stable_since >= 1.0, None
    runs = done - runs_before
    result = {
        "label": args.label,
        "jobs": args.jobs,
        "nodes": len(urls),
        "connections": args.connections,
        "seconds": duration,
        "requests": sum(r["requests"] for r in results),
        "s2xx": sum(r["s2xx"] for r in results),
        "s4xx": sum(r["s4xx"] for r in results),
        "s5xx": sum(r["s5xx"] for r in results),
        "errors": sum(r["errors"] for r in results),
        "p50_ms_max": max(r["p50_ms"] for r in results),
        "p99_ms_max": max(r["p99_ms"] for r in results),
        "runs": runs,
        "runs_in_window": runs_at_load_end - runs_before,
        "drained": drained,
        "pending_at_end": pending,
        "drain_s": max(0.0, end - load_end),
        "per_node": results,
        "node_cpu_s": [b - a for a, b in zip(cpu_before, cpu_end)],
    }
    result["accepted_per_sec"] = result["s2xx"] / duration
    result["rps"] = result["requests"] / duration
    # From the first trigger to the last run's end (or to the drain's bound).
    result["runs_per_sec"] = runs / max(duration, end - start)
    result["runs_in_window_per_sec"] = result["runs_in_window"] / duration
    if cluster:
        result["pg_connections_peak"] = sampler.peak
        result["pg_cpu_s"] = pg_cpu
    out(result)


# ----- slow clients ----------------------------------------------------------------------


def signed_latencies(url, path, secret, seconds):
    """Sequential signed triggers on one keep-alive connection for `seconds`: the
    latency of each in ms, and the status counts."""
    host, port = split_url(url)[:2]
    body = BODY.format(job="slow")
    headers = {"Content-Type": "application/json", "X-Svc-Sign": sign(secret, body)}
    latencies, statuses = [], {}
    conn = http.client.HTTPConnection(host, port, timeout=10)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as err:
            status = f"error: {type(err).__name__}"
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=10)
        latencies.append((time.perf_counter() - start) * 1000)
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    conn.close()
    return latencies, statuses


def cmd_slow_clients(args):
    """p99 of a signed trigger without, then with, `--slow` connections each dripping a
    webhook body one byte per second (a slowloris): the service must keep answering."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < args.slow + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    host, port = split_url(args.url)[:2]
    result = {"slow_connections": args.slow}
    result["rss_before_kb"] = mem_kb(args.pid)[0]
    base, base_status = signed_latencies(args.url, args.path, args.secret, args.seconds)
    result.update(
        {
            "base_p50_ms": percentile(base, 50),
            "base_p99_ms": percentile(base, 99),
            "base_max_ms": max(base),
            "base_requests": len(base),
            "base_status": base_status,
        }
    )
    head = (
        f"POST {args.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n"
        f"X-Svc-Sign: {BAD_SIGNATURE}\r\n\r\n"
    ).encode()
    slow, refused = [], 0
    for _ in range(args.slow):
        try:
            sock = socket.create_connection((host, port), timeout=5)
            sock.sendall(head)
            sock.setblocking(False)
            slow.append(sock)
        except OSError:
            refused += 1
    stop = threading.Event()

    def drip():
        while not stop.wait(1.0):
            for sock in slow:
                try:
                    sock.send(b" ")
                except OSError:
                    pass

    dripper = threading.Thread(target=drip, daemon=True)
    dripper.start()
    time.sleep(1)
    result["rss_slow_open_kb"] = mem_kb(args.pid)[0]
    loaded, loaded_status = signed_latencies(args.url, args.path, args.secret, args.seconds)
    open_at_end = 0
    for sock in slow:
        try:
            if sock.recv(1, socket.MSG_PEEK) == b"":
                continue
        except BlockingIOError:
            open_at_end += 1
            continue
        except OSError:
            continue
    stop.set()
    dripper.join()
    rss_end, hwm = mem_kb(args.pid)
    for sock in slow:
        sock.close()
    result.update(
        {
            "slow_p50_ms": percentile(loaded, 50),
            "slow_p99_ms": percentile(loaded, 99),
            "slow_max_ms": max(loaded),
            "slow_requests": len(loaded),
            "slow_status": loaded_status,
            "slow_refused_at_connect": refused,
            "slow_open_at_end": open_at_end,
            "rss_end_kb": rss_end,
            "hwm_kb": hwm,
        }
    )
    out(result)


# ----- run overhead ----------------------------------------------------------------------


def read_new_lines(path, offset):
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    if not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
    return data.decode().splitlines(), offset + len(data)


def cmd_overhead(args):
    host, port, _ = split_url(args.url)
    body = BODY.format(job="stamp")
    headers = {
        "Content-Type": "application/json",
        "x-svc-sign": sign(args.secret, body),
    }
    conn = http.client.HTTPConnection(host, port, timeout=5)
    latencies, cycles, failures = [], [], []
    offset = 0
    runs, duration_before = svc_metrics(args.metrics)
    runs_before = runs
    for i in range(args.count):
        sent = time.time()
        conn.request("POST", args.path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            failures.append(resp.status)
            time.sleep(0.1)
            continue
        deadline = time.monotonic() + 5
        lines = []
        while not lines:
            lines, offset = read_new_lines(args.file, offset)
            if lines:
                break
            if time.monotonic() > deadline:
                die(f"trigger {i}: the command did not write its timestamp within 5 s")
            time.sleep(0.0002)
        latencies.append((float(lines[-1]) - sent) * 1000.0)
        # Wait for the run to be over (counted in the metrics), then let the service idle.
        runs += 1
        deadline = time.monotonic() + 5
        while svc_runs(args.metrics) < runs:
            if time.monotonic() > deadline:
                die(f"trigger {i}: the run did not finish within 5 s")
            time.sleep(0.001)
        cycles.append((time.time() - sent) * 1000.0)
        time.sleep(args.pause)
    conn.close()
    runs_after, duration_after = svc_metrics(args.metrics)
    out(
        {
            "latencies_ms": [round(x, 3) for x in latencies],
            "failures": failures,
            # Trigger sent -> the run counted as finished in the metrics (1 ms polling).
            "cycle_p50_ms": percentile(cycles, 50),
            # svc_run_duration_seconds: from the permit to the end of the run.
            "run_duration_mean_ms": (duration_after - duration_before)
            * 1000
            / max(1, runs_after - runs_before),
        }
    )


def cmd_latency_stats(args):
    data = json.load(open(args.file))
    values = data["latencies_ms"]
    if not values:
        die(f"{args.file}: no latencies")
    data.update(
        {
            "n": len(values),
            "p50_ms": percentile(values, 50),
            "p99_ms": percentile(values, 99),
            "max_ms": max(values),
            "mean_ms": statistics.fmean(values),
        }
    )
    out(data)


# ----- timer precision -------------------------------------------------------------------


def cmd_timer_analyze(args):
    """Each line: `<job> <start time>`. Due times are whole seconds from t0 + 1 on;
    delay = start - due, where due = the whole second at or before the start."""
    first_due = args.t0 + 1
    last_due = first_due + args.ticks - 1
    delays, per_job, outside = [], {}, 0
    with open(args.file) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2:
                continue
            job, ts = parts[0], float(parts[1])
            due = math.floor(ts)
            if due < first_due or due > last_due:
                outside += 1
                continue
            delays.append((ts - due) * 1000.0)
            per_job[job] = per_job.get(job, 0) + 1
    if not delays:
        die(f"{args.file}: no run between {first_due} and {last_due}")
    expected = args.jobs * args.ticks
    out(
        {
            "runs": len(delays),
            "expected": expected,
            "jobs_seen": len(per_job),
            "outside_window": outside,
            "p50_ms": percentile(delays, 50),
            "p99_ms": percentile(delays, 99),
            "max_ms": max(delays),
            "mean_ms": statistics.fmean(delays),
        }
    )


def cmd_burst_analyze(args):
    delays = []
    with open(args.file) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                ts = float(parts[1])
                delays.append((ts - math.floor(ts)) * 1000.0)
    if not delays:
        die(f"{args.file}: empty")
    out(
        {
            "runs": len(delays),
            "p50_ms": percentile(delays, 50),
            "p99_ms": percentile(delays, 99),
            "max_ms": max(delays),
        }
    )


# ----- timer lateness at scale -----------------------------------------------------------


def histogram(metrics_url, name):
    """{"buckets": [(upper bound in s, cumulative count)...], "count", "sum"} of the
    histogram `name` (without labels) in svc's metrics; empty when it has no sample."""
    status, _, body = http_get(metrics_url)
    if status != 200:
        die(f"{metrics_url} answered {status}")
    buckets, count, total = [], 0, 0.0
    bucket = re.compile(rf'^{name}_bucket{{le="([^"]+)"}} (\S+)')
    for line in body.decode().splitlines():
        m = bucket.match(line)
        if m:
            le = math.inf if m.group(1) == "+Inf" else float(m.group(1))
            buckets.append((le, int(float(m.group(2)))))
        elif line.startswith(f"{name}_count "):
            count = int(float(line.split()[1]))
        elif line.startswith(f"{name}_sum "):
            total = float(line.split()[1])
    buckets.sort()
    return {"buckets": buckets, "count": count, "sum": total}


def histogram_quantile(buckets, q):
    """The q-quantile (0..1) of cumulative `buckets`, interpolated linearly within its
    bucket as Prometheus's histogram_quantile does; the highest finite bound when it
    falls in +Inf."""
    total = buckets[-1][1] if buckets else 0
    if total == 0:
        return None
    rank = q * total
    lower, below = 0.0, 0
    for le, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(le):
                return lower
            inside = cumulative - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, cumulative
    return lower


def child_count(pid):
    """Number of live child processes of `pid` (its runners)."""
    total = 0
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(task) as f:
                total += len(f.read().split())
        except OSError:
            pass
    return total


def cmd_timer_lateness(args):
    """svc_timer_lateness_seconds over a window of `--seconds` from now (the difference
    of two readings of the metrics), the runs completed meanwhile, and the controller's
    child processes (runners) sampled every 10 ms."""
    name = "svc_timer_lateness_seconds"
    before = histogram(args.metrics, name)
    runs_before = svc_runs(args.metrics)
    children, samples = 0, 0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        children = max(children, child_count(args.pid))
        samples += 1
        time.sleep(0.01)
    after = histogram(args.metrics, name)
    runs = svc_runs(args.metrics) - runs_before
    if not after["buckets"]:
        die(f"no {name} in {args.metrics}")
    old = dict(before["buckets"])
    window = [(le, n - old.get(le, 0)) for le, n in after["buckets"]]
    count = after["count"] - before["count"]
    if count <= 0:
        die(f"no timer fired in the window of {args.seconds} s")
    highest = next((le for le, n in window if n == count), math.inf)
    ms = lambda v: None if v is None else v * 1000.0
    out(
        {
            "fired": count,
            "expected": args.jobs * args.ticks,
            "p50_ms": ms(histogram_quantile(window, 0.50)),
            "p99_ms": ms(histogram_quantile(window, 0.99)),
            # Histograms keep no maximum: the bound of the bucket that holds it.
            "max_le_ms": ms(highest),
            "mean_ms": (after["sum"] - before["sum"]) * 1000.0 / count,
            "within_10ms": next((n for le, n in window if le == 0.01), 0) / count,
            "runs": runs,
            "runners_max": children,
            "rss_kb": mem_kb(args.pid)[0],
            "buckets": window,
        }
    )


# ----- environment size ------------------------------------------------------------------


def cmd_env_size(args):
    status, headers, body = http_get(args.url, {"Accept-Encoding": "gzip"})
    if status != 200:
        die(f"{args.url} answered {status}")
    encoding = {k.lower(): v for k, v in headers.items()}.get("content-encoding", "")
    plain = gzip.decompress(body) if encoding == "gzip" else body
    data = json.loads(plain)["data"]
    logs = sum(len(j["logs"]) for j in data["jobs"].values())
    out(
        {
            "encoding": encoding,
            "wire_bytes": len(body),
            "json_bytes": len(plain),
            "jobs": len(data["jobs"]),
            "logs": logs,
        }
    )


# ----- report ----------------------------------------------------------------------------


def load_results(res):
    results = {}
    for path in glob.glob(os.path.join(res, "*.json")):
        with open(path) as f:
            results[os.path.basename(path)[:-5]] = json.load(f)
    return results


def fmt(value, unit=""):
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" + unit
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return "-"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return text + unit


def mib(kb):
    return None if kb is None else kb / 1024.0


def cmd_report(args):
    r = load_results(args.res)

    def get(name, key, default=None):
        return r.get(name, {}).get(key, default)

    rows = []  # (figure, svc, other, ratio, target, verdict)

    def row(figure, svc, other="-", ratio=None, target="", ok=None, unit="", other_unit=None):
        other_unit = unit if other_unit is None else other_unit
        if ok is None:
            verdict = ""
        elif not measured(svc) or (target.endswith("x") and ratio is None):
            # Its part (or the baseline it is compared with) was not run: no verdict.
            verdict = "not run"
        else:
            verdict = "met" if ok else "MISSED"
        rows.append(
            (
                figure,
                fmt(svc, unit),
                fmt(other, other_unit) if not isinstance(other, str) else other,
                "-" if ratio is None else f"{ratio:.2f}x",
                target,
                verdict,
            )
        )

    def measured(value):
        return value is not None and not (isinstance(value, float) and math.isnan(value))

    def ratio(a, b):
        if a is None or b in (None, 0):
            return None
        return a / b

    def mix(name):
        s = r.get(name)
        if not s:
            return "-"
        return f"{s['s2xx']}/{s['s4xx']}/{s['s5xx']}" + (
            f" (+{s['errors']} err)" if s.get("errors") else ""
        )

    spawn = get("spawn_loop", "per_sec")
    t_svc, t_floor, t_wh, t_whs = "trigger_svc", "trigger_floor", "trigger_webhook", "trigger_webhook_sync"
    svc_rps, floor_rps, wh_rps = get(t_svc, "rps"), get(t_floor, "rps"), get(t_wh, "rps")
    rows.append(("TRIGGER LOAD (32 connections, 16 jobs, valid signatures)", "", "", "", "", ""))
    x = ratio(svc_rps, floor_rps)
    row("requests/s vs floor server", svc_rps, floor_rps, x, ">= 0.70x", x is not None and x >= 0.70)
    x = ratio(svc_rps, wh_rps)
    row("requests/s vs webhook (default mode)", svc_rps, wh_rps, x, ">= 3x", x is not None and x >= 3.0)
    row("requests/s vs webhook (sync mode)", svc_rps, get(t_whs, "rps"), ratio(svc_rps, get(t_whs, "rps")))
    rows.append(("status 2xx/4xx/5xx vs webhook", mix(t_svc), mix(t_wh), "-", "", ""))
    rows.append(("status 2xx/4xx/5xx: floor; webhook sync", mix(t_floor), mix(t_whs), "-", "", ""))
    s5 = get(t_svc, "s5xx")
    row("svc responses 5xx", s5, "-", None, "= 0", s5 == 0 if s5 is not None else False)
    row("latency p50 vs webhook", get(t_svc, "p50_ms"), get(t_wh, "p50_ms"), ratio(get(t_svc, "p50_ms"), get(t_wh, "p50_ms")), unit=" ms")
    row("latency p99 vs webhook", get(t_svc, "p99_ms"), get(t_wh, "p99_ms"), ratio(get(t_svc, "p99_ms"), get(t_wh, "p99_ms")), unit=" ms")
    row("latency p99 vs floor", get(t_svc, "p99_ms"), get(t_floor, "p99_ms"), ratio(get(t_svc, "p99_ms"), get(t_floor, "p99_ms")), unit=" ms")
    cpu = get(t_svc, "cpu_us_per_req")
    row("server CPU per request vs floor", cpu, get(t_floor, "cpu_us_per_req"), ratio(cpu, get(t_floor, "cpu_us_per_req")), unit=" us")
    # The server's own cost, whatever share of the CPUs the co-located load generator took.
    per_cpu_s = lambda name: (1e6 / get(name, "cpu_us_per_req")) if get(name, "cpu_us_per_req") else None
    a, af, aw = per_cpu_s(t_svc), per_cpu_s(t_floor), per_cpu_s(t_wh)
    row("answers per server CPU-second vs floor", a, af, ratio(a, af))
    row("answers per server CPU-second vs webhook", a, aw, ratio(a, aw))
    runs = get(t_svc, "runs_per_sec")
    x = ratio(runs, spawn)
    row("runs completed/s vs spawn loop", runs, spawn, x, ">= 0.40x", x is not None and x >= 0.40)
    row("runs completed/s vs webhook (ran in window)", runs, get(t_wh, "runs_per_sec"), ratio(runs, get(t_wh, "runs_per_sec")))
    row("runs completed/s vs webhook sync", runs, get(t_whs, "runs_per_sec"), ratio(runs, get(t_whs, "runs_per_sec")))
    if "trigger_svc_default" in r:
        d_rps = get("trigger_svc_default", "rps")
        row("requests/s with max_job_running = 1 (default) vs floor", d_rps, floor_rps, ratio(d_rps, floor_rps))
        row("runs/s with max_job_running = 1 (default)", get("trigger_svc_default", "runs_per_sec"), spawn, ratio(get("trigger_svc_default", "runs_per_sec"), spawn))
    c = get(t_svc, "children_cpu_ms_per_run")
    row("CPU of children per run vs webhook", c, get(t_wh, "children_cpu_ms_per_run"), ratio(c, get(t_wh, "children_cpu_ms_per_run")), unit=" ms")
    row("webhook: commands run in window; after drain", get(t_wh, "runs_in_window"), get(t_wh, "runs_total"))
    idle = mib(get(t_svc, "rss_before_kb"))
    after = mib(get(t_svc, "rss_after_kb"))
    row("RSS before load vs webhook", idle, mib(get(t_wh, "rss_before_kb")), ratio(idle, mib(get(t_wh, "rss_before_kb"))), unit=" MiB")
    row("RSS at end of load vs webhook", mib(get(t_svc, "rss_end_kb")), mib(get(t_wh, "rss_end_kb")), ratio(mib(get(t_svc, "rss_end_kb")), mib(get(t_wh, "rss_end_kb"))), unit=" MiB")
    row("RSS peak (VmHWM) vs webhook", mib(get(t_svc, "hwm_kb")), mib(get(t_wh, "hwm_kb")), ratio(mib(get(t_svc, "hwm_kb")), mib(get(t_wh, "hwm_kb"))), unit=" MiB")
    x = ratio(after, idle)
    row("RSS 2 s after load / before", after, idle, x, "<= 2x", x is not None and x <= 2.0, unit=" MiB")

    rows.append(("REJECTION LOAD (32 connections, wrong signature)", "", "", "", "", ""))
    j_svc, j_floor, j_wh = get("reject_svc", "rps"), get("reject_floor", "rps"), get("reject_webhook", "rps")
    x = ratio(j_svc, j_floor)
    row("requests/s vs floor server", j_svc, j_floor, x, ">= 0.80x", x is not None and x >= 0.80)
    row("requests/s vs webhook", j_svc, j_wh, ratio(j_svc, j_wh))
    cpu = get("reject_svc", "cpu_us_per_req")
    row("server CPU per request vs floor", cpu, get("reject_floor", "cpu_us_per_req"), ratio(cpu, get("reject_floor", "cpu_us_per_req")), unit=" us")
    row("server CPU per request vs webhook", cpu, get("reject_webhook", "cpu_us_per_req"), ratio(cpu, get("reject_webhook", "cpu_us_per_req")), unit=" us")
    row("latency p99 vs floor", get("reject_svc", "p99_ms"), get("reject_floor", "p99_ms"), ratio(get("reject_svc", "p99_ms"), get("reject_floor", "p99_ms")), unit=" ms")
    row("latency p99 vs webhook", get("reject_svc", "p99_ms"), get("reject_webhook", "p99_ms"), ratio(get("reject_svc", "p99_ms"), get("reject_webhook", "p99_ms")), unit=" ms")
    rows.append(("status 2xx/4xx/5xx vs webhook", mix("reject_svc"), mix("reject_webhook"), "-", "", ""))

    rows.append(("RUN OVERHEAD (200 sequential triggers, idle)", "", "", "", "", ""))
    o, b = r.get("overhead_svc", {}), r.get("overhead_spawn", {})
    p50, p99 = o.get("p50_ms"), o.get("p99_ms")
    row("trigger sent -> command started p50 vs direct spawn", p50, b.get("p50_ms"), ratio(p50, b.get("p50_ms")), "<= 5 ms", p50 is not None and p50 <= 5, unit=" ms")
    row("trigger sent -> command started p99 vs direct spawn", p99, b.get("p99_ms"), ratio(p99, b.get("p99_ms")), "<= 20 ms", p99 is not None and p99 <= 20, unit=" ms")
    x = ratio(p99, b.get("p99_ms"))
    row("trigger sent -> command started p99, ratio to direct spawn", x, "-", x, "<= 2x", x is not None and x <= 2.0, unit="x")
    row("trigger sent -> command started max vs direct spawn", o.get("max_ms"), b.get("max_ms"), ratio(o.get("max_ms"), b.get("max_ms")), unit=" ms")
    row("trigger sent -> run finished (p50)", o.get("cycle_p50_ms"), unit=" ms")
    row("run duration (svc_run_duration_seconds, mean)", o.get("run_duration_mean_ms"), unit=" ms")
    if o.get("failures"):
        rows.append(("  non-200 answers", str(len(o["failures"])), "", "", "", ""))

    rows.append(("ENVIRONMENT (1,000 jobs, 5,000 logs, gzip)", "", "", "", "", ""))
    e1, e32 = r.get("env_1conn", {}), r.get("env_32conn", {})
    p99 = e1.get("p99_ms")
    row("requests/s, 1 connection", e1.get("rps"))
    row("latency p50, 1 connection", e1.get("p50_ms"), unit=" ms")
    row("latency p99, 1 connection", p99, "-", None, "<= 20 ms", p99 is not None and p99 <= 20, unit=" ms")
    row("server CPU per request, 1 connection", e1.get("cpu_us_per_req") and e1["cpu_us_per_req"] / 1000, unit=" ms")
    row("requests/s, 32 connections", e32.get("rps"))
    row("latency p99, 32 connections", e32.get("p99_ms"), unit=" ms")
    size = r.get("env_size", {})
    row("response size: gzip; plain JSON", size.get("wire_bytes") and size["wire_bytes"] / 1024.0, size.get("json_bytes") and size["json_bytes"] / 1024.0, unit=" KiB")
    row("RSS after the environment loads", mib(get("env_32conn", "rss_after_kb")), unit=" MiB")

    rows.append(("FOOTPRINT AND START-UP", "", "", "", "", ""))
    i3 = mib(get("idle_3", "rss_kb"))
    row("idle RSS, 3 jobs vs webhook (16 hooks)", i3, mib(get(t_wh, "rss_before_kb")), ratio(i3, mib(get(t_wh, "rss_before_kb"))), "<= 10 MiB", i3 is not None and i3 <= 10, unit=" MiB")
    row("idle RSS, 3 jobs vs floor server", i3, mib(get(t_floor, "rss_before_kb")), ratio(i3, mib(get(t_floor, "rss_before_kb"))), unit=" MiB")
    i1k = mib(get("idle_1000", "rss_kb"))
    row("idle RSS, 1,000 jobs", i1k, "-", None, "<= 40 MiB", i1k is not None and i1k <= 40, unit=" MiB")
    st = r.get("startup", {})
    ms = st.get("median_ms")
    row("start -> first environment 200 (median of 3)", ms, "-", None, "<= 500 ms", ms is not None and ms <= 500, unit=" ms")
    row("start -> first environment 200 (max of 3)", st.get("max_ms"), unit=" ms")

    rows.append(("TIMER PRECISION (50 jobs, interval 1 s, 10 s)", "", "", "", "", ""))
    t, tb = r.get("timer_svc", {}), r.get("timer_spawn", {})
    row("delay due -> start p50 vs 50 spawns at once", t.get("p50_ms"), tb.get("p50_ms"), ratio(t.get("p50_ms"), tb.get("p50_ms")), unit=" ms")
    x = ratio(t.get("p99_ms"), tb.get("p99_ms"))
    row("delay due -> start p99 vs 50 spawns at once", t.get("p99_ms"), tb.get("p99_ms"), x, "<= 1.5x", x is not None and x <= 1.5, unit=" ms")
    row("delay due -> start max vs 50 spawns at once", t.get("max_ms"), tb.get("max_ms"), ratio(t.get("max_ms"), tb.get("max_ms")), "<= 50 ms", t.get("max_ms") is not None and t["max_ms"] <= 50, unit=" ms")
    row("runs seen; expected", t.get("runs"), t.get("expected"))

    if any(name.startswith("scale_") for name in r):
        rows.append(("SCALE (10,000 jobs, 100,000 logs, gzip)", "", "", "", "", ""))
        st = r.get("scale_startup", {})
        ms = st.get("median_ms")
        row("start -> first environment 200 (median of 3)", ms, "-", None, "<= 1000 ms", ms is not None and ms <= 1000, unit=" ms")
        row("start -> first environment 200 (max of 3)", st.get("max_ms"), unit=" ms")
        idle = mib(get("scale_idle", "rss_kb"))
        row("idle RSS (after the first environment answer)", idle, "-", None, "<= 64 MiB", idle is not None and idle <= 64, unit=" MiB")
        e1, e32 = r.get("scale_env_1conn", {}), r.get("scale_env_32conn", {})
        row("environment requests/s, 1 connection", e1.get("rps"))
        row("environment latency p50, 1 connection", e1.get("p50_ms"), unit=" ms")
        p99 = e1.get("p99_ms")
        row("environment latency p99, 1 connection", p99, "-", None, "<= 50 ms", p99 is not None and p99 <= 50, unit=" ms")
        row("environment requests/s, 32 connections", e32.get("rps"))
        p99 = e32.get("p99_ms")
        row("environment latency p99, 32 connections", p99, "-", None, "<= 50 ms", p99 is not None and p99 <= 50, unit=" ms")
        size = r.get("scale_env_size", {})
        row("response size: gzip; plain JSON", size.get("wire_bytes") and size["wire_bytes"] / 1024.0, size.get("json_bytes") and size["json_bytes"] / 1024.0, unit=" KiB")
        row("RSS after the environment loads", mib(get("scale_env_32conn", "rss_after_kb")), unit=" MiB")
        t = r.get("scale_timer", {})
        rows.append(("SCALE TIMERS (1,000 jobs due together every 1 s, /bin/true, max_job_running = 1)", "", "", "", "", ""))
        row("timer lateness p50 (svc_timer_lateness_seconds)", t.get("p50_ms"), unit=" ms")
        # Judged on the bucket itself (at least 99 % of the ticks within 10 ms), not on
        # the p99 interpolated inside a bucket, which only estimates where it lies.
        within = t.get("within_10ms")
        row("timer lateness p99 (interpolated in its bucket)", t.get("p99_ms"), "-", None, "<= 10 ms", within is not None and within >= 0.99, unit=" ms")
        row("ticks fired within 10 ms", within and within * 100, unit=" %")
        row("timer lateness max (bound of its bucket)", t.get("max_le_ms"), unit=" ms")
        row("timer lateness mean", t.get("mean_ms"), unit=" ms")
        row("ticks fired; expected", t.get("fired"), t.get("expected"))
        row("runs completed in the window", t.get("runs"))
        row("runner processes alive at once (max)", t.get("runners_max"))
        row("RSS at the end", mib(t.get("rss_kb")), unit=" MiB")

    previous = {}
    previous_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "previous.json")
    if os.path.exists(previous_path):
        with open(previous_path) as f:
            previous = json.load(f)
    when = f"previous ({previous.get('date', '?')}, {previous.get('commit', '?')})"
    if "runs_one_job" in r:
        rows.append(("RUNS (one job /bin/true, max_job_running = 1, 32 connections)", "", "", "", "", ""))
        one = get("runs_one_job", "runs_per_sec")
        x = ratio(one, spawn)
        row("runs completed/s vs spawn loop", one, spawn, x, ">= 0.55x", x is not None and x >= 0.55)
        row(f"runs completed/s vs {when}", one, previous.get("runs_one_job_per_sec"), ratio(one, previous.get("runs_one_job_per_sec")))
        row("status 2xx/4xx/5xx", mix("runs_one_job"), "-")
    if "overhead_svc" in r and previous:
        o = r["overhead_svc"]
        row(f"trigger -> command start p50 vs {when}", o.get("p50_ms"), previous.get("start_p50_ms"), ratio(o.get("p50_ms"), previous.get("start_p50_ms")), unit=" ms")
        row(f"trigger -> command start p99 vs {when}", o.get("p99_ms"), previous.get("start_p99_ms"), ratio(o.get("p99_ms"), previous.get("start_p99_ms")), unit=" ms")
    if "slow_clients" in r:
        sc = r["slow_clients"]
        rows.append((f"SLOW CLIENTS ({sc['slow_connections']:,} connections dripping a webhook body, 1 byte/s)", "", "", "", "", ""))
        p99 = sc.get("slow_p99_ms")
        row("signed trigger p99 with them vs without", p99, sc.get("base_p99_ms"), ratio(p99, sc.get("base_p99_ms")), "<= 50 ms", p99 is not None and p99 <= 50, unit=" ms")
        row("signed trigger p50 with them vs without", sc.get("slow_p50_ms"), sc.get("base_p50_ms"), ratio(sc.get("slow_p50_ms"), sc.get("base_p50_ms")), unit=" ms")
        row("signed trigger max with them vs without", sc.get("slow_max_ms"), sc.get("base_max_ms"), unit=" ms")
        answered = sc.get("slow_status", {})
        errors = sum(n for status, n in answered.items() if not status.isdigit() or status.startswith("5"))
        row("triggers with an error or 5xx while they were open", errors, "-", None, "= 0", errors == 0)
        row("slow connections still open at the end; refused at connect", sc.get("slow_open_at_end"), sc.get("slow_refused_at_connect"))
        row("RSS with them open vs before", mib(sc.get("rss_slow_open_kb")), mib(sc.get("rss_before_kb")), ratio(mib(sc.get("rss_slow_open_kb")), mib(sc.get("rss_before_kb"))), unit=" MiB")

    if any(name.startswith("cluster_") for name in r):
        cs, c1, c3 = r.get("cluster_single", {}), r.get("cluster_one", {}), r.get("cluster_three", {})
        skipped = get("cluster_skipped", "reason")
        jobs = cs.get("jobs") or c1.get("jobs") or c3.get("jobs")
        title = f"CLUSTER ({jobs or '?'} jobs /bin/true, max_job_running = 16 per node, 32 connections; one PostgreSQL)"
        rows.append((title, "", "", "", "", ""))
        if skipped:
            rows.append((f"  not run: {skipped}", "-", "-", "-", "", ""))

        def sts(res):
            if not res:
                return "-"
            return f"{res['s2xx']}/{res['s4xx']}/{res['s5xx']}" + (f" (+{res['errors']} err)" if res.get("errors") else "")

        a1, a3, a0 = c1.get("accepted_per_sec"), c3.get("accepted_per_sec"), cs.get("accepted_per_sec")
        row("accepted triggers/s (200): 1 node vs single node", a1, a0, ratio(a1, a0))
        row("accepted triggers/s (200): 3 nodes vs 1 node", a3, a1, ratio(a3, a1))
        u1, u3, u0 = c1.get("runs_per_sec"), c3.get("runs_per_sec"), cs.get("runs_per_sec")
        row("runs ended successfully/s, until drained: 1 node vs single", u1, u0, ratio(u1, u0))
        row("runs ended successfully/s, until drained: 3 nodes vs 1", u3, u1, ratio(u3, u1))
        row("requests/s (all answers): 1 node vs single node", c1.get("rps"), cs.get("rps"), ratio(c1.get("rps"), cs.get("rps")))
        row("requests/s (all answers): 3 nodes vs 1 node", c3.get("rps"), c1.get("rps"), ratio(c3.get("rps"), c1.get("rps")))
        rows.append(("status 200/4xx (429)/5xx: 1 node; single", sts(c1), sts(cs), "-", "", ""))
        rows.append(("status 200/4xx (429)/5xx: 3 nodes; 1 node", sts(c3), sts(c1), "-", "", ""))
        for label, res in (("single node", cs), ("1 node", c1), ("3 nodes", c3)):
            if res:
                drained = (
                    f"drained {fmt(res.get('drain_s'), ' s')} after the load"
                    if res.get("drained")
                    else f"NOT drained, {res.get('pending_at_end')} left"
                )
                row(f"{label}: runs ended successfully; accepted ({drained})", res["runs"], res["s2xx"])
        bad = [res.get("s5xx", 0) + res.get("errors", 0) for res in (cs, c1, c3) if res]
        row("5xx answers and errors (all three)", sum(bad) if bad else None, "-", None, "= 0", bool(bad) and sum(bad) == 0)
        row("runs vs accepted triggers (all three, after drain)", sum(x.get("runs", 0) for x in (cs, c1, c3)), sum(x.get("s2xx", 0) for x in (cs, c1, c3)))
        row("PostgreSQL connections of svc (peak): 3 nodes; 1 node", c3.get("pg_connections_peak"), c1.get("pg_connections_peak"))

        def cpu(res, key):
            value = res.get(key)
            return sum(value) if isinstance(value, list) else value

        row("CPU s in the load, nodes: 1 node; single node", cpu(c1, "node_cpu_s"), cpu(cs, "node_cpu_s"), unit=" s")
        row("CPU s in the load, nodes: 3 nodes; 1 node", cpu(c3, "node_cpu_s"), cpu(c1, "node_cpu_s"), unit=" s")
        row("CPU s in the load, PostgreSQL: 3 nodes; 1 node", c3.get("pg_cpu_s"), c1.get("pg_cpu_s"), unit=" s")
        row("latency p99 (worst node): 3 nodes; 1 node", c3.get("p99_ms_max"), c1.get("p99_ms_max"), unit=" ms")
        row("latency p99: 1 node; single node", c1.get("p99_ms_max"), cs.get("p99_ms_max"), unit=" ms")

    sc = r.get("cluster_scale")
    if sc:
        d, sl, cl, mn = sc["sync_job_defs"], sc["claim_slot"], sc["claim_runs"], sc["many_nodes"]
        rows.append((f"CLUSTER SCALE (store calls; {d['jobs']:,} jobs, {mn['nodes']} nodes)", "", "", "", "", ""))
        row("sync_job_defs: first node; second node", d["nodes_ms"][0], d["nodes_ms"][1] if len(d["nodes_ms"]) > 1 else None, unit=" ms")
        row(f"sync_job_defs: node {len(d['nodes_ms'])}; restart of the first", d["nodes_ms"][-1], d["restart_ms"], unit=" ms")
        row(f"sync_job_defs with {d['differing_jobs']:,} differing", d["differing_ms"], unit=" ms")
        row("svc_job_defs rows; size", d["def_rows"], d["def_table_bytes"] / 1048576, unit="", other_unit=" MiB")
        row(f"claim_slot: {sl['jobs']:,} due at once x {sl['nodes']} nodes, offers/s", sl["offers_per_sec"])
        row("claim_slot: all offered in; offer p99", sl["all_ms"], sl["offer_latency"].get("p99_ms"), unit=" ms")
        row(f"claim_runs ({cl['limit']}) + finish_run, {cl['nodes']} nodes: runs/s", cl["runs_per_sec"])
        row(f"claim_runs p50; p99 ({cl['queued_at_start']:,} queued)", cl["claim_latency"].get("p50_ms"), cl["claim_latency"].get("p99_ms"), unit=" ms")
        row("enqueue/s (10 at once); p99", cl["enqueue_per_sec"], cl["enqueue_latency"].get("p99_ms"), other_unit=" ms")
        row(f"heartbeat p50; p99 ({mn['nodes']} nodes, every {mn['beat_every_s']} s)", mn["spread"].get("p50_ms"), mn["spread"].get("p99_ms"), unit=" ms")
        row(f"heartbeat p99; max, all {mn['nodes']} at once", mn["burst"].get("p99_ms"), mn["burst"].get("max_ms"), unit=" ms")
        row("PostgreSQL CPU share during the heartbeats", mn["pg_cpu_share"] and mn["pg_cpu_share"] * 100, unit=" %")
        row(f"NOTIFY heard by all {mn['nodes']} listeners p50; max", mn["notify_all_heard"].get("p50_ms"), mn["notify_all_heard"].get("max_ms"), unit=" ms")
        row("connections open; max_connections", mn["connections_open"], mn["max_connections"])
        row("PostgreSQL memory (PSS) per connection", mn["pss_per_connection_kb"] and mn["pss_per_connection_kb"] / 1024, unit=" MiB")
        idle = sc.get("idle", {})
        if idle:
            row(f"paused_states ({idle['paused_states_rows']:,} jobs, each node at start and every 10 min) p50; PG CPU", idle["paused_states"].get("p50_ms"), idle.get("paused_states_pg_cpu_ms"), unit=" ms")
            if "pause_changes" in idle:
                row("pause_changes since the last read (each node every 5 s) p50; PG CPU", idle["pause_changes"].get("p50_ms"), idle.get("pause_changes_pg_cpu_ms"), unit=" ms")
            row("claim_runs on an empty queue (each node every 250 ms) p50; PG CPU", idle["empty_claim"].get("p50_ms"), idle.get("empty_claim_pg_cpu_ms"), unit=" ms")
        row("cluster-scale run took", sc["seconds"], unit=" s")

    rows.append(("BASELINES", "", "", "", "", ""))
    row("spawn loop: /bin/sh -c /bin/true per second", "-", spawn)
    row("floor server idle RSS", "-", mib(get(t_floor, "rss_before_kb")), unit=" MiB")

    headers = ("figure", "svc", "peer / baseline", "ratio", "target", "result")
    shown = [
        (f"**{cells[0]}**", "", "", "", "", "") if cells[1:] == ("", "", "", "", "") else cells
        for cells in rows
    ]
    widths = [max(len(str(cells[i])) for cells in shown + [headers]) for i in range(6)]
    lines = []

    def line(cells):
        lines.append(
            "| " + " | ".join(str(c).ljust(widths[i]) for i, c in enumerate(cells)) + " |"
        )

    line(headers)
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for cells in shown:
        line(cells)
    met = sum(1 for c in rows if c[5] == "met")
    not_run = sum(1 for c in rows if c[5] == "not run")
    missed, section = [], ""
    for c in rows:
        if c[1:] == ("", "", "", "", ""):
            section = c[0].split(" (")[0].lower()
        elif c[5] == "MISSED":
            missed.append(f"{section}: {c[0]}")
    lines.append("")
    lines.append(
        f"targets: {met} met, {len(missed)} missed"
        + (f", {not_run} not run (parts left out of this run)" if not_run else "")
    )
    lines += [f"  missed: {name}" for name in missed]
    print("\n".join(lines))


# ----- main ------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("free-port")
    s.set_defaults(func=lambda a: print(free_port()))

    s = sub.add_parser("gen-svc")
    s.add_argument("--dir", required=True)
    s.add_argument("--kind", required=True, choices=["trigger", "idle", "overhead", "timer", "env", "scale", "scale-timer"])
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--secret", required=True)
    s.add_argument("--runner", required=True)
    s.add_argument("--jobs", type=int, default=16)
    s.add_argument("--logs", type=int, default=5)
    s.add_argument("--max-running", type=int, default=1)
    s.add_argument("--lead", type=int, default=2, help="timer: seconds before t0")
    s.add_argument("--database-url", help="cluster mode: the [svc] database_url")
    s.add_argument("--node-name", help="cluster mode: the [svc] node_name")
    s.set_defaults(func=cmd_gen_svc)

    s = sub.add_parser("gen-webhook")
    s.add_argument("--dir", required=True)
    s.add_argument("--secret", required=True)
    s.add_argument("--jobs", type=int, default=16)
    s.add_argument("--sync", type=int, default=0)
    s.set_defaults(func=cmd_gen_webhook)

    s = sub.add_parser("gen-reqs")
    s.add_argument("--out", required=True)
    s.add_argument("--prefix", required=True)
    s.add_argument("--secret", required=True)
    s.add_argument("--header", default="x-svc-sign")
    s.add_argument("--jobs", type=int, default=16)
    s.add_argument("--bad", action="store_true")
    s.add_argument("--rotate", type=int, default=0, help="start the round at this job")
    s.set_defaults(func=cmd_gen_reqs)

    s = sub.add_parser("wait")
    s.add_argument("--url", required=True)
    s.add_argument("--pid", type=int, default=0)
    s.add_argument("--timeout", type=float, default=15)
    s.add_argument("--method", default="GET", help="GET: wait for a 200; ANY: any answer")
    s.set_defaults(func=cmd_wait)

    s = sub.add_parser("startup")
    s.add_argument("--url", required=True)
    s.add_argument("--pidfile", required=True)
    s.add_argument("--stdout", required=True)
    s.add_argument("--stderr", required=True)
    s.add_argument("--timeout", type=float, default=15)
    s.add_argument("command", nargs="+")
    s.set_defaults(func=cmd_startup)

    s = sub.add_parser("mem")
    s.add_argument("--pid", type=int, required=True)
    s.set_defaults(func=cmd_mem)

    s = sub.add_parser("stop")
    s.add_argument("--grace", type=float, default=10)
    s.add_argument("pids", type=int, nargs="*")
    s.set_defaults(func=cmd_stop)

    s = sub.add_parser("load")
    s.add_argument("--label", required=True)
    s.add_argument("--res", required=True)
    s.add_argument("--url", required=True)
    s.add_argument("--script", required=True)
    s.add_argument("--reqs")
    s.add_argument("--header", action="append")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--connections", type=int, default=32)
    s.add_argument("--seconds", type=int, default=10)
    s.add_argument("--pid", type=int, default=0)
    s.add_argument("--metrics", help="svc metrics URL: count runs from svc_runs_total")
    s.add_argument("--count-file", help="count runs as lines of this file")
    s.add_argument("--after", type=float, default=0, help="seconds to wait, then RSS again")
    s.add_argument("--drain", type=float, default=0, help="wait (max) until runs settle")
    s.set_defaults(func=cmd_load)

    s = sub.add_parser("cluster-load")
    s.add_argument("--label", required=True)
    s.add_argument("--urls", required=True, help="comma-separated base URLs, one per node")
    s.add_argument("--reqs", required=True, help="comma-separated gen-reqs files, one per node")
    s.add_argument("--script", required=True)
    s.add_argument("--connections", type=int, default=32)
    s.add_argument("--seconds", type=int, default=10)
    s.add_argument("--pids", help="comma-separated pids of the nodes (CPU time)")
    s.add_argument("--db-url", help="cluster mode: count runs in this database's svc_runs")
    s.add_argument("--psql", default="psql")
    s.add_argument("--pg-pid", type=int, help="PostgreSQL's postmaster (its CPU time)")
    s.add_argument("--drain", type=float, default=30, help="wait (max) for the queue to drain")
    s.add_argument("--jobs", type=int, help="how many jobs the requests go to (for the table)")
    s.set_defaults(func=cmd_cluster_load)

    s = sub.add_parser("slow-clients")
    s.add_argument("--url", required=True)
    s.add_argument("--path", required=True)
    s.add_argument("--secret", required=True)
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--slow", type=int, default=4000)
    s.add_argument("--seconds", type=float, default=10)
    s.set_defaults(func=cmd_slow_clients)

    s = sub.add_parser("overhead")
    s.add_argument("--url", required=True)
    s.add_argument("--path", required=True)
    s.add_argument("--secret", required=True)
    s.add_argument("--file", required=True)
    s.add_argument("--metrics", required=True)
    s.add_argument("--count", type=int, default=200)
    s.add_argument("--pause", type=float, default=0.02)
    s.set_defaults(func=cmd_overhead)

    s = sub.add_parser("latency-stats")
    s.add_argument("file")
    s.set_defaults(func=cmd_latency_stats)

    s = sub.add_parser("timer-analyze")
    s.add_argument("--file", required=True)
    s.add_argument("--t0", type=float, required=True)
    s.add_argument("--jobs", type=int, required=True)
    s.add_argument("--ticks", type=int, required=True)
    s.set_defaults(func=cmd_timer_analyze)

    s = sub.add_parser("burst-analyze")
    s.add_argument("--file", required=True)
    s.set_defaults(func=cmd_burst_analyze)

    s = sub.add_parser("timer-lateness")
    s.add_argument("--metrics", required=True)
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--seconds", type=float, required=True)
    s.add_argument("--jobs", type=int, required=True)
    s.add_argument("--ticks", type=int, required=True)
    s.set_defaults(func=cmd_timer_lateness)

    s = sub.add_parser("env-size")
    s.add_argument("--url", required=True)
    s.set_defaults(func=cmd_env_size)

    s = sub.add_parser("report")
    s.add_argument("--res", required=True)
    s.set_defaults(func=cmd_report)

    args = p.parse_args()
    args.func(args)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
