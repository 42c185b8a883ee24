#!/usr/bin/env bash
# End-to-end tests of `attograd serve` (docs/serving.md) with curl, raw HTTP on loopback:
#   serve_test.sh SCENARIO PATH/TO/attograd
# Each scenario trains a small model, starts the server on a free port and talks to it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)  # before scenario_lib.sh moves into its work folder
source "$here/scenario_lib.sh" "$@"
command -v curl > /dev/null || { echo "skipped: no curl"; exit 77; }

small=(--context-length 16 --d-model 32 --n-heads 2 --n-layers 2 --batch-size 8 --dropout 0
       --eval-windows 5 --log-interval 100 --threads 2 --sample-tokens 0 --eval-interval 0)
train_small() {  # train_small OUT.h5 [options]
  for i in $(seq 1 200); do printf 'line %d: the naïve café and the dog ran home.\n' "$i"; done > text.txt
  "$bin" train "${small[@]}" --data text.txt --steps 120 --out "$1" "${@:2}" > /dev/null
}

# big_model OUT.h5: a model slow enough to decode that a 20000-token stream is still going
# when the test acts on it; its weights need no training, so one step of one sequence and
# one evaluation window (under the sanitizers a step of 16 sequences and 78 windows of
# evaluation took 45 of the scenario's 50 s)
big_model() {
  "$bin" train --context-length 256 --d-model 128 --n-heads 4 --n-layers 4 --steps 1 \
    --batch-size 1 --eval-windows 1 --sample-tokens 0 --eval-interval 0 --out "$1" > /dev/null
}

server_pid=
stop_server() { [ -z "$server_pid" ] || kill "$server_pid" 2> /dev/null || true; }
trap 'stop_server; rm -rf "$work"' EXIT

# start_server CHECKPOINT [options]: serves on a free port ($port), waits until it listens
start_server() {
  : > serve.err  # before the server's shell opens it: the loop below may read it first
  "$bin" serve "$@" --port 0 2> serve.err &
  server_pid=$!
  for _ in $(seq 1 200); do
    port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\)/v1.*|\1|p' serve.err)
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2> /dev/null || fail "the server ended: $(cat serve.err)"
    sleep 0.05
  done
  fail "the server did not listen: $(cat serve.err)"
}
url() { echo "http://127.0.0.1:$port$1"; }
# post PATH BODY: the body of the answer on stdout, its status in status.txt
post() { curl -sS -o - -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "$(url "$1")" > post.out;
         tail -c 3 post.out > status.txt; head -c -3 post.out; }
status() { cat status.txt; }
text_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["'"$1"'"], end="")'; }

# openai_fixtures: $fixtures, the folder whose node_modules/ holds OpenAI's npm client
# (tools/npm_fixtures.sh), or the scenario is skipped (exit 77) without it or without node
openai_fixtures() {
  command -v node > /dev/null || { echo "skipped: node is not installed"; exit 77; }
  fixtures=$(bash "$here/../../tools/npm_fixtures.sh" \
             "${ATTOGRAD_NPM_FIXTURES:-$(dirname "$bin")/npm-fixtures}" 2> /dev/null || true)
  [ -n "$fixtures" ] && [ -f "$fixtures/node_modules/openai/package.json" ] ||
    { echo "skipped: the npm package openai is not installed (tools/npm_fixtures.sh)"; exit 77; }
}

case "$scenario" in
greedy_equals_sample)
  # /v1/completions at temperature 0 gives `sample --temperature 0`'s text (after its
  # prompt) byte for byte, past the context (16) and through window moves, alone and with
  # four requests decoded together.
  train_small run.h5
  "$bin" sample run.h5 --prompt 'the dog' --temperature 0 --tokens 50 > sample.txt 2> /dev/null
  start_server run.h5 --max-concurrent 4
  post /v1/completions '{"prompt": "the dog", "temperature": 0, "max_tokens": 50}' | text_of text > served.txt
  [ "$(status)" = 200 ] || fail "status $(status)"
  # sample prints the prompt, the text and a line break
  python3 -c 'import sys; s, t = (open(f, encoding="utf-8").read() for f in sys.argv[1:])
sys.exit(s != "the dog" + t + "\n")' sample.txt served.txt ||
    fail "served '$(cat served.txt)' vs sampled '$(cat sample.txt)'"
  for i in 1 2 3 4; do
    curl -sS -d '{"prompt": "the dog", "temperature": 0, "max_tokens": 50}' "$(url /v1/completions)" > "many$i.json" &
  done
  wait $(jobs -p | grep -v "^$server_pid$") 2> /dev/null || true
  for i in 1 2 3 4; do
    text_of text < "many$i.json" | cmp -s - served.txt || fail "request $i of 4 differs: $(cat "many$i.json")"
  done
  ;;
http_errors)
  # Each refusal is an OpenAI-shaped JSON error with its status, and the server answers
  # the next request.
  train_small run.h5
  start_server run.h5
  post /v1/completions '{"prompt": "the", ' > err.json; [ "$(status)" = 400 ] || fail "malformed: $(status)"
  grep -q '"type":"invalid_request_error"' err.json || fail "no error body: $(cat err.json)"
  post /v1/completions '{"prompt": "the", "temperature": -1}' > err.json; [ "$(status)" = 400 ] || fail "temperature: $(status)"
  grep -q '"param":"temperature"' err.json || fail "not named: $(cat err.json)"
  post /v1/completions '{"prompt": "the", "max_tokens": 1e999}' > /dev/null; [ "$(status)" = 400 ] || fail "huge: $(status)"
  post /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}]}' > err.json
  [ "$(status)" = 400 ] && grep -q 'completions only' err.json || fail "chat on a plain model: $(cat err.json)"
  post /v1/nothing '{}' > /dev/null; [ "$(status)" = 404 ] || fail "unknown path: $(status)"
  post /v1/completions "{\"prompt\": \"$(printf 'the dog %.0s' $(seq 1 10))\"}" > err.json
  grep -q context_length_exceeded err.json || fail "a prompt past the context: $(cat err.json)"
  truncate -s 100M big.json
  code=$(curl -sS -o big.out -w '%{http_code}' --data-binary @big.json "$(url /v1/completions)" || true)
  [ "$code" = 413 ] || fail "a 100 MB body: status $code"
  post /v1/completions '{"prompt": "the", "max_tokens": 3, "whatever": {"x": [1]}}' > ok.json
  [ "$(status)" = 200 ] || fail "after the errors: $(status) $(cat ok.json)"
  curl -sS "$(url /v1/models)" | grep -q '"id":"run"' || fail "no model listed"
  ;;
api_key)
  train_small run.h5
  echo secret > key.txt
  start_server run.h5 --api-key-file key.txt
  post /v1/completions '{"prompt": "the", "max_tokens": 2}' > /dev/null; [ "$(status)" = 401 ] || fail "no key: $(status)"
  code=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer secret' \
              -d '{"prompt": "the", "max_tokens": 2}' "$(url /v1/completions)")
  [ "$code" = 200 ] || fail "with the key: $code"
  ;;
slowloris)
  # A client sending its head a byte a second is cut off at --request-timeout while
  # another client's request completes.
  train_small run.h5
  start_server run.h5 --request-timeout 2
  exec 3<> "/dev/tcp/127.0.0.1/$port"
  ( for c in P O S T ' ' / v 1; do printf '%s' "$c" >&3 || exit 0; sleep 1; done ) &
  slow=$!
  post /v1/completions '{"prompt": "the", "max_tokens": 5}' > ok.json
  [ "$(status)" = 200 ] || fail "another client: $(status)"
  timeout 5 cat <&3 > slow.out || fail "the slow connection was not closed within 5 s"
  kill "$slow" 2> /dev/null || true
  ;;
pipelined)
  # Requests one connection carries back to back: two sent in one write, the first with a
  # body past the server's 4 KB receive buffer, then a head trickled in pieces of a few
  # bytes. Each is answered, in order, whole (a request's bytes received with the one
  # before it are kept for it, not dropped with that request's stream).
  train_small run.h5
  start_server run.h5
  python3 - "$port" <<'EOF' || fail "pipelined requests (above)"
import json, socket, sys, time
port = int(sys.argv[1])
def request(body, close=False):
    data = json.dumps(body).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n%s\r\n%s"
            % (len(data), b"Connection: close\r\n" if close else b"", data))
first = request({"prompt": "the", "max_tokens": 2, "user": "u" * 6000})
second = request({"prompt": "the dog", "max_tokens": 3})
third = request({"prompt": "a", "max_tokens": 1}, close=True)
c = socket.create_connection(("127.0.0.1", port), timeout=20)
c.sendall(first + second)
time.sleep(0.2)
for i in range(0, len(third), 7):
    c.sendall(third[i:i + 7])
    time.sleep(0.01)
answer = b""
while chunk := c.recv(65536):
    answer += chunk
replies = answer.split(b"HTTP/1.1 ")[1:]
if len(replies) != 3 or not all(r.startswith(b"200") for r in replies):
    sys.exit(f"{len(replies)} replies: {answer[:600]!r}")
for reply, tokens in zip(replies, (2, 3, 1)):
    usage = json.loads(reply.split(b"\r\n\r\n", 1)[1])["usage"]
    if usage["completion_tokens"] != tokens:
        sys.exit(f"a reply out of order or cut: {reply[:300]!r}")
EOF
  ;;
seeds)
  # A request's seed makes its sampled text again; requests that name none differ (each
  # draws its own seed), on a barely trained model whose every token is a near-even draw.
  big_model big.h5
  start_server big.h5
  for i in 1 2; do
    post /v1/completions '{"prompt": "a", "max_tokens": 40, "temperature": 1, "seed": 7}' | text_of text > "seeded$i.txt"
    post /v1/completions '{"prompt": "a", "max_tokens": 40, "temperature": 1}' | text_of text > "unseeded$i.txt"
  done
  cmp -s seeded1.txt seeded2.txt || fail "one seed, two texts: $(cat seeded1.txt) / $(cat seeded2.txt)"
  ! cmp -s unseeded1.txt unseeded2.txt || fail "two requests without a seed, one text: $(cat unseeded1.txt)"
  ! cmp -s seeded1.txt unseeded1.txt || fail "a request without a seed took seed 7's text"
  ;;
connections_at_once)
  # 40 clients connecting at once while the server cannot accept (stopped): the kernel's
  # backlog completes them all and each is answered once the server runs again (cpp-httplib's
  # own backlog of 5 dropped the SYNs past it, each such client waiting for TCP's 1 s retry).
  # A second server on the same port is refused: the port is the first's alone (cpp-httplib's
  # SO_REUSEPORT had let a second server listen and take a share of the connections).
  train_small run.h5
  start_server run.h5
  status=0
  timeout 20 "$bin" serve run.h5 --port "$port" > second.out 2>&1 || status=$?
  [ "$status" != 124 ] || fail "a second server listened on the first's port $port"
  { [ "$status" != 0 ] && grep -q "cannot listen on 127.0.0.1:$port" second.out; } ||
    fail "a second server on port $port: exit $status, $(cat second.out)"
  python3 - "$port" "$server_pid" <<'EOF' || fail "connections at once (above)"
import os, signal, socket, sys
port, pid = int(sys.argv[1]), int(sys.argv[2])
clients = []
os.kill(pid, signal.SIGSTOP)
try:
    for i in range(40):
        c = socket.socket()
        c.settimeout(0.5)  # under TCP's 1 s retry of a dropped SYN
        try:
            c.connect(("127.0.0.1", port))
        except OSError as e:
            sys.exit(f"connection {i + 1} of 40 not completed while the server was stopped: {e}")
        c.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        clients.append(c)
finally:
    os.kill(pid, signal.SIGCONT)
for i, c in enumerate(clients):
    c.settimeout(20)
    answer = b""
    while chunk := c.recv(4096):
        answer += chunk
    if not answer.startswith(b"HTTP/1.1 200"):
        sys.exit(f"connection {i + 1}: {answer[:80]!r}")
EOF
  ;;
busy_and_disconnect)
  # Past --max-concurrent and --max-queue: 429 with Retry-After; a client that leaves
  # mid-stream frees its slot.
  big_model big.h5
  start_server big.h5 --max-concurrent 1 --max-queue 0 --max-tokens 20000
  curl -sSN -d '{"prompt": "a", "max_tokens": 20000, "stream": true}' "$(url /v1/completions)" > stream.out &
  streamer=$!
  for _ in $(seq 1 100); do grep -q data: stream.out && break; sleep 0.05; done
  code=$(curl -sS -D headers.txt -o busy.json -w '%{http_code}' -d '{"prompt": "a", "max_tokens": 2}' "$(url /v1/completions)")
  [ "$code" = 429 ] || fail "past the queue: $code $(cat busy.json)"
  grep -qi '^Retry-After:' headers.txt || fail "no Retry-After: $(cat headers.txt)"
  kill "$streamer"
  ok=
  for _ in $(seq 1 50); do
    code=$(curl -sS -o /dev/null -w '%{http_code}' -d '{"prompt": "a", "max_tokens": 2}' "$(url /v1/completions)")
    [ "$code" = 200 ] && ok=1 && break
    sleep 0.1
  done
  [ -n "$ok" ] || fail "the slot of the client that left was not freed"
  ;;
sigterm_mid_stream)
  # SIGTERM mid-stream: the stream in flight finishes within --drain-timeout, the server
  # exits 0 and takes no new request.
  big_model big.h5
  start_server big.h5 --max-tokens 20000 --drain-timeout 2
  curl -sSN -d '{"prompt": "a", "max_tokens": 20000, "stream": true}' "$(url /v1/completions)" > stream.out &
  streamer=$!
  for _ in $(seq 1 100); do grep -q data: stream.out && break; sleep 0.05; done
  kill -TERM "$server_pid"
  rc=0; wait "$server_pid" || rc=$?
  server_pid=
  [ "$rc" = 0 ] || fail "exit $rc after SIGTERM: $(cat serve.err)"
  grep -q "SIGTERM received" serve.err || fail "no drain line: $(cat serve.err)"
  wait "$streamer" || true
  tail -1 stream.out | grep -q 'data: \[DONE\]' || grep -q finish_reason stream.out ||
    fail "the stream did not end cleanly: $(tail -c 300 stream.out)"
  ! curl -sS -o /dev/null "$(url /health)" 2> /dev/null || fail "still answering after exit"
  ;;
openai_client)
  # OpenAI's official npm client (tools/npm_fixtures.sh; skipped without it) against a
  # chat model: its completion, chat reply and streamed chat reply at temperature 0 are
  # `sample`'s greedy output byte for byte; n choices; an error as the client raises it.
  openai_fixtures
  for pair in France:Paris Italy:Rome Spain:Madrid Japan:Tokyo; do
    printf '{"messages": [{"role": "user", "content": "What is the capital of %s?"}, {"role": "assistant", "content": "%s"}]}\n' "${pair%:*}" "${pair#*:}"
  done > chats.jsonl
  "$bin" train --task chat --tokenizer char --context-length 64 --d-model 32 --n-heads 2 \
    --n-layers 2 --batch-size 4 --dropout 0 --val-fraction 0 --eval-interval 0 --sample-tokens 0 \
    --steps 60 --data chats.jsonl --out chat.h5 > /dev/null
  train_small run.h5  # completions: a plain model (sample stops at no chat token)
  question='What is the capital of Spain?'
  "$bin" sample run.h5 --prompt 'the dog' --temperature 0 --tokens 20 > sample.txt 2> /dev/null
  "$bin" sample chat.h5 --chat "$question" --temperature 0 --tokens 20 > reply.txt 2> /dev/null
  start_server run.h5
  plain=$(url /v1) plain_pid=$server_pid
  trap 'kill "$plain_pid" 2> /dev/null; stop_server; rm -rf "$work"' EXIT
  start_server chat.h5
  cp "$here/../serve/openai_client.mjs" .
  ln -s "$fixtures/node_modules" node_modules  # an ES module finds its imports beside it
  node openai_client.mjs "$plain" run 'the dog' "$(url /v1)" chat "$question" 20 > client.json 2> client.err ||
    fail "the client failed: $(cat client.err)"
  python3 - "$question" << 'PY' || fail "$(cat client.json)"
import json, sys
out = json.load(open("client.json"))
sample = open("sample.txt", encoding="utf-8").read()
reply = open("reply.txt", encoding="utf-8").read()
assert sample == "the dog" + out["completion"] + "\n", (sample, out["completion"])
assert reply == out["chat"] + "\n", (reply, out["chat"])
assert out["chat"] and out["stream"] == out["chat"], out
assert out["n"] == [out["completion"]] * 3, out["n"]
assert out["error"] == "400 temperature", out["error"]
assert out["models"] == ["run"] and out["chat_models"] == ["chat"], out
assert out["stream_usage"]["completion_tokens"] >= 1, out
PY
  ;;
load_sockets | load_openai)
  # bench/serve_load.py runs end to end, small: its socket clients, or OpenAI's npm client
  # (load_openai, skipped without tools/npm_fixtures.sh's packages), every stream's tokens
  # counted and the report's lines printed
  client=(--client socket)
  if [ "$scenario" = load_openai ]; then
    openai_fixtures
    client=(--client openai --warmups 1 --npm-fixtures "$fixtures")
  fi
  train_small run.h5
  python3 "$here/../../bench/serve_load.py" "$bin" run.h5 --clients 3 --tokens 24 --repeats 2 \
    --timeout 60 "${client[@]}" > load.txt 2> load.err || fail "serve_load.py: $(cat load.err)"
  grep -q '^one stream of 24 tokens: [0-9.]* tokens/s' load.txt || fail "$(cat load.txt)"
  grep -q '^3 streams: [0-9.]* tokens/s in aggregate' load.txt || fail "$(cat load.txt)"
  grep -q '^time to first token with 3 streams: p50' load.txt || fail "$(cat load.txt)"
  if [ "$scenario" = load_openai ]; then
    grep -q "^the client's own CPU: [0-9.]* us a token" load.txt || fail "$(cat load.txt)"
  fi
  ;;
*)
  fail "unknown scenario"
  ;;
esac
echo "ok: $scenario"
