#!/usr/bin/env python3
"""Load test of `attograd serve` on loopback: N concurrent streaming clients against one.

    python3 bench/serve_load.py build/attograd CHECKPOINT [--clients 8] [--tokens 128]

Starts the server (--port 0, --max-concurrent N) on 127.0.0.1 only, then, from an empty
prompt (a line break, as `sample`'s),
  1. one streaming completion alone: its tokens/s (the single-stream rate), and
  2. N streaming completions at once (the same prompt, each its own seed, sampled):
     each client's time to first token (p50, p99) and the aggregate tokens/s,
each measured --repeats times, alternating (the machine's load changes under them), and prints
the medians: the aggregate against N x the single-stream rate. Every
request asks for exactly --tokens tokens (the end of text is not an end for a plain model);
the counts are bounded (--clients <= 64, --tokens <= 4096) and so is each run's time
(--timeout seconds), so a stuck server fails the test rather than hanging it. Only the
standard library; each client is a thread reading its server-sent events off a raw socket
as they come (counting events, not parsing them: the client must not be what is measured).

--client openai runs the same schedule with OpenAI's official npm client instead
(bench/serve_load_openai.mjs in one Node process, after --warmups single requests and one of
N streams that warm its JIT; the package from --npm-fixtures, tools/npm_fixtures.sh): what an application built
on the client sees, its parsing of every chunk on the same cores as the server. It also
prints the client's own CPU a token.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from serve_process import start_serve  # noqa: E402


def stream(port, prompt, tokens, seed, timeout, result):
    """One streaming completion over a raw socket (a light client: a Python HTTP client's
    per-line parsing would be the bottleneck at thousands of tokens a second); result gets
    (time to first token, tokens, seconds, error). A token is an event whose choice has no
    finish reason yet."""
    marker = b'"finish_reason":null'
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "stream": True, "seed": seed,
                       "temperature": 1.0}).encode()
    start = time.perf_counter()
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (len(body), body))
    first, count, tail, head = None, 0, b"", b""
    while True:
        data = sock.recv(65536)
        if not data:
            break
        if len(head) < 12:
            head += data[:12]
        text = tail + data
        found = text.count(marker)
        if found and first is None:
            first = time.perf_counter() - start
        count += found
        tail = text[-(len(marker) - 1):]
    sock.close()
    status = head[9:12].decode("ascii", "replace")
    result.append((first, count, time.perf_counter() - start,
                   None if status == "200" else f"status {status}"))


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


def run_sockets(port, a):
    """The schedule with socket clients: [result of one stream], [(results, elapsed)]."""
    singles, manys = [], []
    # warm-up, not measured: pages touched, and each size of step and prefill timed both
    # ways by the decoder's pace (a first single stream of 60 tokens ran at a quarter to half
    # the later ones' rate while its paces timed the team and one thread in turn)
    run_clients(port, 1, a.tokens, a.timeout)
    run_clients(port, a.clients, a.tokens, a.timeout)
    for _ in range(a.repeats):  # alternating, so that a change of load hits both
        singles.append(run_clients(port, 1, a.tokens, a.timeout)[0][0])
        manys.append(run_clients(port, a.clients, a.tokens, a.timeout))
    return singles, manys


def run_openai(port, a):
    """The same schedule in bench/serve_load_openai.mjs, and the client's CPU a token (one
    stream, many: medians)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "serve_load_openai.mjs")
    runs = 2 * a.repeats  # printed: the warm-ups are not
    done = subprocess.run(
        ["node", script, a.npm_fixtures, f"http://127.0.0.1:{port}/v1", str(a.clients),
         str(a.tokens), str(a.repeats), str(a.warmups), str(int(a.timeout))],
        capture_output=True, text=True, timeout=a.timeout * (a.warmups + 1 + runs))
    measured = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(measured) != runs:
        sys.exit(f"the openai client failed: {done.stderr.strip()[-2000:]}")
    singles = [tuple(r["results"][0]) + (None,) for r in measured[0::2]]
    manys = [([tuple(x) + (None,) for x in r["results"]], r["elapsed"]) for r in measured[1::2]]
    for results, _ in [(singles, 0)] + manys:
        if any(r[0] is None or r[1] != a.tokens for r in results):
            sys.exit(f"the openai client got other than {a.tokens} tokens a stream")
    per_token = [[r["cpu"] / sum(x[1] for x in r["results"]) for r in measured[i::2]]
                 for i in (0, 1)]
    return singles, manys, [statistics.median(v) for v in per_token]


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
    ap.add_argument("--repeats", type=int, default=3,
                    help="each measurement this many times, alternating; the medians are shown")
    ap.add_argument("--client", choices=["socket", "openai"], default="socket")
    ap.add_argument("--warmups", type=int, default=15,
                    help="--client openai: single requests before the measured ones")
    ap.add_argument("--npm-fixtures", default=os.environ.get("ATTOGRAD_NPM_FIXTURES",
                                                              "build/npm-fixtures"))
    a = ap.parse_args()
    if not 1 <= a.clients <= 64 or not 1 <= a.tokens <= 4096 or not 1 <= a.repeats <= 10:
        sys.exit("--clients must be 1 to 64, --tokens 1 to 4096 and --repeats 1 to 10")
    if not 0 <= a.warmups <= 100:
        sys.exit("--warmups must be 0 to 100")
    if a.client == "openai" and not os.path.isfile(
            os.path.join(a.npm_fixtures, "node_modules", "openai", "package.json")):
        sys.exit(f"--client openai: no openai package under {a.npm_fixtures}/node_modules "
                 "(tools/npm_fixtures.sh installs it)")
    try:
        proc, port = start_serve(a.binary, a.checkpoint, "--max-concurrent", str(a.clients),
                                 "--max-queue", str(a.clients), "--threads", str(a.threads))
    except RuntimeError as e:
        sys.exit(str(e))
    try:
        if a.client == "openai":
            singles, manys, cpu = run_openai(port, a)
        else:
            (singles, manys), cpu = run_sockets(port, a), None
    finally:
        proc.terminate()
        proc.wait(30)
    one_rates = [r[1] / r[2] for r in singles]
    one_rate = statistics.median(one_rates)
    rates = [sum(r[1] for r in many) / elapsed for many, elapsed in manys]
    rate = statistics.median(rates)
    ttft = [r[0] for many, _ in manys for r in many]
    print(f"one stream of {a.tokens} tokens: {one_rate:.1f} tokens/s (median of "
          f"{', '.join(f'{x:.0f}' for x in one_rates)}), first token after "
          f"{statistics.median(r[0] for r in singles) * 1e3:.0f} ms")
    print(f"{a.clients} streams: {rate:.1f} tokens/s in aggregate (median of "
          f"{', '.join(f'{x:.0f}' for x in rates)}), {rate / one_rate:.2f}x one stream "
          f"(N x one stream: {a.clients * one_rate:.1f} tokens/s)")
    print(f"time to first token with {a.clients} streams: p50 {statistics.median(ttft) * 1e3:.0f} "
          f"ms, p99 {percentile(ttft, 99) * 1e3:.0f} ms")
    if cpu:
        print(f"the client's own CPU: {cpu[0] * 1e6:.1f} us a token with one stream, "
              f"{cpu[1] * 1e6:.1f} with {a.clients} (medians)")


if __name__ == "__main__":
    main()
