#!/usr/bin/env bash
# The training report end to end (docs/report.md), one scenario per ctest entry:
#   report_test.sh SCENARIO PATH/TO/attograd
#   report_errors   what `report` refuses, and how: bad metrics lines, outputs over inputs
#   attention       `attention` prints each head's weights (rows sum to 1, the future is 0)
#                   and writes one SVG heat map
#   train_report    `train --report`: the page at every evaluation, never half written, and
#                   the same checkpoint bits as a run without it
#   browser         a real run's report opened from disk by headless chromium: the DOM it
#                   built (charts, heat maps, paths, axis labels, hostile names and prompt as
#                   text), every control worked (smoothing, x axis, zoom by drag, buttons,
#                   typed range and keys, the CSV download, the samples' slider), no console
#                   message, no request of the page's own, readable at 1280x800 and 390 wide
#                   (skipped, exit 77, without chromium)
set -euo pipefail
source "$(dirname "$0")/scenario_lib.sh" "$@"

# A tiny byte-level model (so that any prompt, "<script>" included, encodes) in seconds.
tiny=(--context-length 32 --d-model 32 --n-heads 4 --n-layers 2 --batch-size 8 --tokenizer byte
      --eval-windows 10 --threads 2 --sample-tokens 40)

# One complete page: the doctype first, the closing tag last.
complete_page() { head -c 15 "$1" | grep -q '<!DOCTYPE html>' && tail -c 8 "$1" | grep -q '</html>'; }

case "$scenario" in
report_errors)
  "$bin" train "${tiny[@]}" --steps 6 --log-interval 2 --metrics m.jsonl --out run.h5 > /dev/null
  expect_error 2 "nothing to report" "$bin" report --out r.html
  expect_error 2 "--prompt needs --checkpoint" "$bin" report --metrics m.jsonl --prompt hi --out r.html
  expect_error 2 "is the same file as --metrics" "$bin" report --metrics m.jsonl --out m.jsonl
  expect_error 2 "is the same file as --checkpoint" "$bin" report --checkpoint run.h5 --out run.h5
  expect_error 2 "missing.jsonl" "$bin" report --metrics missing.jsonl --out r.html
  expect_error 2 "--prompt is 40 tokens" "$bin" report --checkpoint run.h5 \
    --prompt "$(printf 'x%.0s' {1..40})" --out r.html
  { head -2 m.jsonl; echo '{"step": 3, "loss": "low"}'; tail -n +3 m.jsonl; } > bad.jsonl
  expect_error 2 "bad.jsonl:3: 'loss' must be a number" "$bin" report --metrics bad.jsonl --out r.html
  [ ! -e r.html ] || fail "a failed report left r.html behind"
  # an unfinished last line (a run still writing) is skipped, and the page says so
  { cat m.jsonl; printf '{"step": 7, "lo'; } > live.jsonl
  "$bin" report --metrics live.jsonl --out r.html > /dev/null
  grep -q "not valid JSON yet" r.html || fail "the skipped line is not noted on the page"
  # --metrics repeated, or naming several files: every run is overlaid
  "$bin" report --metrics m.jsonl --metrics live.jsonl --out two.html > /dev/null
  "$bin" report --metrics m.jsonl live.jsonl --out two_b.html > /dev/null
  for page in two.html two_b.html; do
    [ "$(grep -o '<li><svg class="swatch"' $page | wc -l)" -eq 2 ] || fail "$page does not show both runs"
  done
  # the page is replaced whole: no temporary file left, the old one gone; a file attograd
  # did not write is replaced only with --overwrite
  echo "old" > r.html
  expect_usage_error "already holds a file of 4 bytes" \
    "$bin" report --metrics m.jsonl --checkpoint run.h5 --prompt "hi" --out r.html
  [ "$(cat r.html)" = "old" ] || fail "a refused report replaced r.html"
  "$bin" report --metrics m.jsonl --checkpoint run.h5 --prompt "hi" --out r.html --overwrite > /dev/null
  complete_page r.html || fail "r.html is not one complete page"
  [ "$(ls -A | grep -c partial)" -eq 0 ] || fail "a temporary file was left: $(ls -A)"
  ;;
attention)
  "$bin" train "${tiny[@]}" --steps 30 --log-interval 10 --out run.h5 > /dev/null
  "$bin" attention --checkpoint run.h5 --prompt "one step" > all.txt
  [ "$(grep -c '^layer .*, head ' all.txt)" -eq 8 ] || fail "expected 2 x 4 maps: $(head -5 all.txt)"
  grep -q '^8 tokens: 0:o 1:n 2:e 3:' all.txt || fail "no token line: $(head -2 all.txt)"
  "$bin" attention --checkpoint run.h5 --prompt "one step" --layer 1 --head 3 > one.txt
  [ "$(grep -c '^layer 1, head 3' one.txt)" -eq 1 ] && [ "$(grep -c '^layer' one.txt)" -eq 1 ] ||
    fail "--layer 1 --head 3 printed: $(grep '^layer' one.txt)"
  # the matrix as printed: 8 rows, each summing to 1 (to the printed 4 decimals), 0 above
  # the diagonal
  grep -E '^(tensor\(\[\[| +\[)' one.txt | tr -d 'tensor([]),' > rows.txt
  [ "$(wc -l < rows.txt)" -eq 8 ] || fail "expected 8 rows: $(cat one.txt)"
  awk '{ s = 0; for (j = 1; j <= NF; j++) { s += $j; if (j > NR && $j != 0) bad = 1 }
         if (s < 0.9995 || s > 1.0005) bad = 1 } END { exit bad }' rows.txt ||
    fail "a row does not sum to 1 or a future weight is not 0: $(cat rows.txt)"
  "$bin" attention --checkpoint run.h5 --prompt "<b>&" --layer 0 --head 1 --svg map.svg > /dev/null
  head -c 200 map.svg | grep -q '^<svg class="heat-map" id="map-l0h1" xmlns="http://www.w3.org/2000/svg"' ||
    fail "map.svg is not an SVG heat map: $(head -c 200 map.svg)"
  grep -q '>&lt;</text>' map.svg && grep -q '>&amp;</text>' map.svg ||
    fail "the prompt's tokens are not escaped in map.svg"
  expect_error 2 "--svg draws one heat map" "$bin" attention --checkpoint run.h5 --prompt x --svg a.svg
  expect_error 2 "--layer 2: the model has 2 layers (0 to 1)" "$bin" attention --checkpoint run.h5 --prompt x --layer 2
  expect_error 2 "--head -1" "$bin" attention --checkpoint run.h5 --prompt x --head -1
  expect_error 2 "same file as --checkpoint" "$bin" attention --checkpoint run.h5 --prompt x \
    --layer 0 --head 0 --svg run.h5
  ;;
train_report)
  # the page at every evaluation: poll it while the run goes on; every version seen whole
  args=("${tiny[@]}" --steps 120 --eval-interval 20 --log-interval 10)
  "$bin" train "${args[@]}" --out plain.h5 > /dev/null
  "$bin" train "${args[@]}" --out run.h5 --report live.html --report-prompt "the hat" > log.txt &
  pid=$!
  seen=0
  while kill -0 "$pid" 2> /dev/null; do
    if [ -e live.html ]; then
      cp live.html copy.html 2> /dev/null || continue
      complete_page copy.html || fail "a reader saw a half-written page ($(wc -c < copy.html) bytes)"
      seen=$((seen + 1))
    fi
    sleep 0.05
  done
  wait "$pid" || fail "train --report failed: $(tail -3 log.txt)"
  [ "$seen" -gt 0 ] || fail "the page never appeared during the run"
  complete_page live.html || fail "the final page is not complete"
  grep -q 'at step 120 of 120' live.html || fail "the final page is not of step 120"
  ! grep -q 'http-equiv="refresh"' live.html || fail "the final page still reloads itself"
  [ "$(grep -o '<svg class="heat-map"' live.html | wc -l)" -eq 8 ] || fail "expected 8 heat maps"
  diff <(hashes plain.h5) <(hashes run.h5) > /dev/null ||
    fail "--report changed the trained weights"
  [ "$(hashes run.h5 | wc -l)" -gt 10 ] || fail "no parameters compared"
  expect_error 2 "is the same file as --out" "$bin" train "${tiny[@]}" --out a.h5 --report a.h5
  expect_error 2 "refusing to overwrite an input" "$bin" resume --checkpoint run.h5 --report run.h5
  ;;
browser)
  # what the self-test saw the controls do (report.js, selftestControls)
  check_controls() {  # check_controls DOM SELFTEST
    local dom=$1 seen=$2 want
    for want in '"shown":true' '"value":"0.90","dynamic":true,"raw":' '"static_again":true' \
                '"label":"tokens trained on","readout":"tokens 15360 ' '"unit":"tokens"' \
                '"label":"wall time (seconds)","readout":"wall time ' '"unit":"seconds"' \
                '"label":"step","readout":"step 60 ' '"band":1' \
                '"ratios":{"drag":0.5,"in":0.5,"out":1,"plus":0.5}' '"linked":true' \
                '"typed":{"from":"10","to":"20","x":[10,20],"width":10,"dynamic":true' \
                '"href":"blob:","download":"metrics.csv"' \
                '"header":"run,step,tokens,wall_s,loss,val_loss,val_bits_per_byte,lr,grad_norm,tokens_per_s,elapsed_s"' \
                '"names":["\"run &lt;img src=x onerror=alert(1)&gt;' \
                "\"\\\"'=1+2 \\\"\\\"q\\\"\\\" &lt;b&gt;x&lt;/b&gt;\\\"\"]"; do
      grep -qF -- "$want" <<< "$seen" || fail "$dom: the controls' self-test lacks $want: $seen"
    done
    for zoom in reset escape minus; do
      grep -q "\"$zoom\":{\"from\":\"\",\"to\":\"\",[^}]*\"dynamic\":false" <<< "$seen" ||
        fail "$dom: $zoom did not show everything again: $seen"
    done
    grep -q '"drag":{"from":"[0-9.]*","to":"[0-9.]*",[^}]*"dynamic":true' <<< "$seen" ||
      fail "$dom: dragging did not zoom: $seen"
    # the CSV holds every line of both metrics files
    local lines; lines=$(cat "$work/$hostile.jsonl" "$work/other.jsonl" | grep -v '"event"' | grep -c '"step"')
    grep -q "\"rows\":$lines," <<< "$seen" || fail "$dom: the CSV lacks rows ($lines expected): $seen"
    # the smoothed last train loss is TensorBoard's debiased moving average of the file's
    local ema; ema=$(grep -v '"event"' "$work/$hostile.jsonl" | grep -o '"loss": *[-0-9.e+]*' | sed 's/.*: *//' |
      awk '{ last = last * 0.9 + 0.1 * $1; n++ } END { printf "%.5g", last / (1 - 0.9 ^ n) }')
    local shown; shown=$(grep -o '"smoothing":{[^}]*' <<< "$seen" | grep -o 'train loss [0-9.]* nats (smoothed [0-9.]*' |
      head -1 | sed 's/.*smoothed //')
    awk -v a="$ema" -v b="$shown" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b != "" && d <= 2e-4 * a) }' ||
      fail "$dom: smoothed loss $shown, expected $ema: $seen"
    # the samples: each run's last shown first, one at a time; the slider goes to the first
    grep -qE '"samples":\[\{"last":"step 60 \(([0-9]+) of \1\)","visible_last":1,"first":"step 20 \(1 of \1\)","visible_first":1,"control_shown":true\}' \
      <<< "$seen" || fail "$dom: the samples' slider: $seen"
  }
  chromium=$(command -v chromium || command -v chromium-browser || true)
  [ -n "$chromium" ] || { echo "skipped: no chromium"; exit 77; }
  args=("${tiny[@]}" --steps 60 --eval-interval 20 --log-interval 5)
  hostile='run <img src=x onerror=alert(1)>'  # the metrics file's and the checkpoint's name
  "$bin" train "${args[@]}" --metrics "$hostile.jsonl" --out "$hostile.h5" > /dev/null
  "$bin" train "${args[@]}" --lr 3e-3 --metrics other.jsonl --out other.h5 > /dev/null
  # a run named in its run record (train --name) with a name a spreadsheet would run as a
  # formula, and a sample at step 20 that is markup and a bidirectional override
  name='=1+2 \"q\" <b>x</b>'  # as JSON writes it
  sed_name=${name//\\/\\\\}
  sed -i -E "/\"event\": ?\"start\"/{ /\"name\": ?\"/ s|\"name\": ?\"[^\"]*\"|\"name\": \"$sed_name\"|; t
             s|^\{|{\"name\": \"$sed_name\", | }" other.jsonl
  grep -qF "\"name\": \"$name\"" other.jsonl || fail "could not name the run: $(head -c 300 other.jsonl)"
  awk -v sample='{"event": "sample", "step": 20, "text": "<script>alert(3)</script> \\u202e"}' \
    '{ print } /"step": ?20,/ { print sample }' "$hostile.jsonl" > sampled.jsonl
  mv sampled.jsonl "$hostile.jsonl"
  "$bin" report --metrics "$hostile.jsonl" other.jsonl --checkpoint "$hostile.h5" \
    --prompt "<script>alert(2)</script>" --out report.html > /dev/null
  chrome() {  # chrome LOG NETLOG ARGS...: chromium on its own fresh profile, output on stdout
    local log=$1 netlog=$2; shift 2
    local profile; profile=$(mktemp -d "$work/profile.XXXXXX")
    HOME="$work/home.${log%.log}" timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
      --disable-background-networking --disable-component-update --disable-sync \
      --user-data-dir="$profile" --enable-logging=stderr --v=0 --log-net-log="$netlog" "$@" 2> "$log"
  }
  page="file://$work/report.html"
  # the self-test clicks the CSV link: virtual time lets the download finish before the dump
  chrome wide.log wide.json --window-size=1280,800 --virtual-time-budget=5000 --dump-dom "$page#selftest" > wide.html
  chrome phone.log phone.json --window-size=390,844 --dump-dom "$page#selftest" > phone.html
  chrome shot.log shot.json --window-size=1280,800 --screenshot="$work/shot.png" "$page" > /dev/null
  # a view named in the address opens as named
  chrome view.log view.json --window-size=1280,800 --dump-dom "$page#smoothing=0.5&axis=tokens&zoom=2000,9000" > view.html
  grep -q '<output id="smoothing-value" for="smoothing">0.50</output>' view.html &&
    grep -q '<span id="zoom-unit">tokens</span>' view.html &&
    [ "$(grep -o 'class="axis-label"[^>]*>tokens trained on</text>' view.html | wc -l)" -eq 5 ] &&
    [ "$(grep -o '<path class="line raw"' view.html | wc -l)" -ge 10 ] &&
    grep -q 'class="tick"[^>]*>8000</text>' view.html ||
    fail "the view in the address was not the one shown: $(grep -o '<div class="chart-controls".\{600\}' view.html)"
  for dom in wide.html phone.html; do
    grep -q 'data-selftest="done"' "$dom" || fail "the page's self-test did not finish in $dom: $(grep -o '<div id="page-errors".*' "$dom" | head -c 600)"
    selftest=$(sed -n 's/.*<pre id="selftest"[^>]*>\([^<]*\)<\/pre>.*/\1/p' "$dom")
    for want in '"errors":0' '"overflow":false' '"charts":5' '"maps":8' '"empty_paths":0' \
                '"scripts":2' '"log_shown":true' '"lin_hidden":true'; do
      grep -qF "$want" <<< "$selftest" || fail "$dom: the self-test lacks $want: $selftest"
    done
    # each chart's hover readout names the step and values; each map's names the weight
    charts=$(grep -o '^{"charts":\[.*\],"maps"' <<< "$selftest")  # not the controls' readouts
    [ "$(grep -o '"readout":"step [0-9][0-9]* [^"]*[0-9]' <<< "$charts" | wc -l)" -eq 5 ] ||
      fail "$dom: a chart's readout lacks the step or its values: $selftest"
    grep -qE '"readout":"step [0-9]* ([^"]|\\")*train loss [0-9.]* nats ([^"]|\\")*validation loss [0-9.]* nats' \
      <<< "$selftest" || fail "$dom: no exact loss values under the cursor: $selftest"
    [ "$(grep -o '"below":"query [0-9]* [^"]*: [01]\.[0-9]\{4\}"' <<< "$selftest" | wc -l)" -eq 8 ] ||
      fail "$dom: the heat maps' readouts lack weights: $selftest"
    [ "$(grep -o '"above":"[^"]*masked' <<< "$selftest" | wc -l)" -eq 8 ] ||
      fail "$dom: the masked cells are not reported as masked"
    check_controls "$dom" "$selftest"
  done
  # what the browser built, read from its own serialisation of the DOM
  dom=wide.html
  [ "$(grep -o '<svg class="chart"' $dom | wc -l)" -eq 5 ] || fail "expected 5 charts"
  [ "$(grep -o '<svg class="heat-map"' $dom | wc -l)" -eq 8 ] || fail "expected 2 x 4 heat maps"
  [ "$(grep -o '<path class="line[^>]* d="M[0-9]' $dom | wc -l)" -ge 12 ] || fail "too few drawn lines"
  ! grep -q ' d=""' $dom || fail "an empty path"  # the attribute d, not checked=""
  [ "$(grep -o 'class="axis-label"[^>]*>step</text>' $dom | wc -l)" -eq 5 ] || fail "charts without a step axis label"
  grep -q 'class="axis-label"[^>]*>loss (nats per token)</text>' $dom || fail "no loss axis label"
  grep -q '<title id="chart-loss-t">Loss</title><desc id="chart-loss-d">' $dom || fail "no title and description"
  [ "$(grep -o '<script' $dom | wc -l)" -eq 2 ] || fail "a script element that is not the page's own"
  ! grep -q '<img' $dom || fail "a run name became an element"
  grep -q 'run &lt;img src=x onerror=alert(1)&gt;' $dom || fail "the run name is not shown as text"
  grep -qF '<strong>=1+2 "q" &lt;b&gt;x&lt;/b&gt;</strong>' $dom || fail "the legend lacks the recorded name"
  ! grep -q '<b>' $dom || fail "a run name became markup"
  grep -qF '&lt;script&gt;alert(3)&lt;/script&gt; \u{202e}</pre>' $dom || fail "a sample is not shown as text"
  grep -q '<div class="chart-controls" id="chart-controls"[^>]*>' $dom && ! grep -q '<div class="chart-controls" id="chart-controls"[^>]*hidden' $dom ||
    fail "the charts' controls are not shown"
  grep -q '&lt;script&gt;alert(2)&lt;/script&gt;' $dom || fail "the prompt is not shown as text"
  grep -q '<div id="page-errors" role="alert" hidden="">' $dom || fail "the page lists errors"
  grep -q 'lr=0.003' $dom || fail "the legend does not name the runs' difference"
  # nothing printed on the console; no request but chromium's own (its update and time
  # services, whose initiator is "not an origin"; a page's would be "null", a file's origin)
  for log in wide.log phone.log shot.log view.log; do
    ! grep -E 'CONSOLE|Refused to' "$log" || fail "console messages in $log"
  done
  for netlog in wide.json phone.json shot.json view.json; do
    [ -s "$netlog" ] || fail "chromium wrote no net log $netlog"
    others=$(grep -o '"initiator":"[^"]*"' "$netlog" | grep -v '"not an origin"' || true)
    [ -z "$others" ] || fail "the page attempted requests: $others"
  done
  [ "$(wc -c < shot.png)" -gt 20000 ] || fail "the screenshot is empty"
  # what the CSV link downloaded: every point of both files, the losses exactly the files'
  csv="$work/home.wide/Downloads/metrics.csv"
  [ -s "$csv" ] || fail "the CSV link downloaded nothing: $(ls -R "$work/home.wide" | head)"
  [ "$(head -1 "$csv")" = $'run,step,tokens,wall_s,loss,val_loss,val_bits_per_byte,lr,grad_norm,tokens_per_s,elapsed_s\r' ] ||
    fail "the CSV's header: $(head -1 "$csv")"
  [ "$(($(wc -l < "$csv") - 1))" -eq "$(cat "$hostile.jsonl" other.jsonl | grep -v '"event"' | grep -c '"step"')" ] ||
    fail "the CSV has $(wc -l < "$csv") lines"
  grep -qF "\"'=1+2 \"\"q\"\" <b>x</b>\",60,15360," "$csv" || fail "the named run's last row is not in the CSV, guarded"
  diff <(grep -v '"event"' "$hostile.jsonl" | grep -o '"loss": *[-0-9.e+]*' | sed 's/.*: *//' | awk '{ printf "%.17g\n", $1 }') \
    <(grep '^"run ' "$csv" | awk -F, '{ printf "%.17g\n", $5 }') > /dev/null || fail "the CSV's losses are not the file's"
  ;;
*)
  fail "unknown scenario"
  ;;
esac
echo "ok: $scenario"
