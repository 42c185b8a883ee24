#!/usr/bin/env python3
"""Load test of `attograd serve` on loopback: N concurrent streaming clients against one.

    python3 bench/serve_load.py build/attograd CHECKPOINT [--clients 8] [--tokens 128]

Starts the server (--port 0, --max-concurrent N) on 127.0.0.1 only, then, from an empty
prompt (a line break, as `sample`'s),
  1. one streaming completion alone: its tokens/s (the single-stream rate), and
  2. N streaming completions at once (the same prompt, each its own seed, sampled):
     each client's time to first token (p50, p99) and the aggregate tokens/s,
and prints the aggregate against N x the single-stream rate and the one stream's rate. Every
request asks for exactly --tokens tokens (the end of text is not an end for a plain model);
the counts are bounded (--clients <= 64, --tokens <= 4096) and so is each run's time
(--timeout seconds), so a stuck server fails the test rather than hanging it. Only the
standard library; each client is a thread reading its server-sent events as they come.
"""
import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import threading
import time


def start_server(binary, checkpoint, clients, threads):
    proc = subprocess.Popen(
        [binary, "serve", checkpoint, "--port", "0", "--host", "127.0.0.1",
         "--max-concurrent", str(clients), "--max-queue", "0", "--threads", str(threads)],
        stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
    if not match:
        proc.kill()
        sys.exit(f"the server did not start: {line}{proc.stderr.read()}")
    return proc, int(match.group(1))


def stream(port, prompt, tokens, seed, timeout, result):
    """One streaming completion; result gets (time to first token, tokens, seconds)."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "stream": True, "seed": seed,
                       "temperature": 1.0})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        result.append((None, 0, 0.0, f"status {response.status}: {response.read()[:200]!r}"))
        return
    first, count = None, 0
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if chunk["choices"] and chunk["choices"][0].get("finish_reason") is None:
            count += 1
            if first is None:
                first = time.perf_counter() - start
    result.append((first, count, time.perf_counter() - start, None))
    conn.close()


def run_clients(port, clients, tokens, timeout, prompt=""):
    results, threads = [], []
    start = time.perf_counter()
    for i in range(clients):
        t = threading.Thread(target=stream, args=(port, prompt, tokens, i + 1, timeout, results))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(timeout)
    elapsed = time.perf_counter() - start
    errors = [r[3] for r in results if r[3]]
    if errors or len(results) != clients:
        sys.exit(f"{clients - len(results) + len(errors)} of {clients} clients failed: {errors[:3]}")
    return results, elapsed


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("checkpoint")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    if not 1 <= a.clients <= 64 or not 1 <= a.tokens <= 4096:
        sys.exit("--clients must be 1 to 64 and --tokens 1 to 4096")
    proc, port = start_server(a.binary, a.checkpoint, a.clients, a.threads)
    try:
        run_clients(port, 1, 8, a.timeout)  # warm-up: pages touched, kernels timed
        single, _ = run_clients(port, 1, a.tokens, a.timeout)
        one_rate = single[0][1] / single[0][2]
        many, elapsed = run_clients(port, a.clients, a.tokens, a.timeout)
    finally:
        proc.terminate()
        proc.wait(30)
    total = sum(r[1] for r in many)
    ttft = [r[0] for r in many]
    rate = total / elapsed
    print(f"one stream: {single[0][1]} tokens in {single[0][2]:.2f} s: {one_rate:.1f} tokens/s, "
          f"first token after {single[0][0] * 1e3:.0f} ms")
    print(f"{a.clients} streams: {total} tokens in {elapsed:.2f} s: {rate:.1f} tokens/s in "
          f"aggregate, {rate / one_rate:.2f}x one stream (N x one stream: "
          f"{a.clients * one_rate:.1f} tokens/s)")
    print(f"time to first token: p50 {statistics.median(ttft) * 1e3:.0f} ms, "
          f"p99 {percentile(ttft, 99) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
