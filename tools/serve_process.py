"""`attograd serve` on a free loopback port, for the scripts that talk to it over HTTP
(bench/serve_load.py, tests/reference/gguf_blocks_reference.py).

    proc, port = start_serve("build/attograd", "run.h5", "--threads", "2")

The server prints its address on its first line of stderr; a server that does not start is
killed and its stderr raised in a RuntimeError. The caller ends the process.
"""
import re
import subprocess


def start_serve(binary, checkpoint, *options):
    proc = subprocess.Popen(
        [binary, "serve", checkpoint, "--port", "0", "--host", "127.0.0.1", *options],
        stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    match = re.search(r"http://127\.0\.0\.1:(\d+)/v1", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"attograd serve did not start: {line}{proc.stderr.read()}")
    return proc, int(match.group(1))
