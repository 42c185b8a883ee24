# What every end-to-end scenario script here shares; each sources it first:
#   source "$(dirname "$0")/scenario_lib.sh" "$@"     # (SCENARIO PATH/TO/attograd)
# It names the scenario and the binary and moves into a fresh temporary folder, removed on
# exit, and defines the checks below.
# shellcheck shell=bash
scenario=$1
bin=$(readlink -f "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

fail() { echo "FAIL ($scenario): $*" >&2; exit 1; }

# expect_error CODE EXPECTED_TEXT CMD...: CMD exits CODE with one line on stderr holding
# the text.
expect_error() {
  local code=$1 expected=$2; shift 2
  local rc=0
  "$@" >out.txt 2>err.txt || rc=$?
  [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, not $code (stderr: $(cat err.txt))"
  [ "$(wc -l <err.txt)" -eq 1 ] || fail "'$*' printed $(wc -l <err.txt) lines on stderr: $(cat err.txt)"
  grep -qF -- "$expected" err.txt || fail "'$*' said '$(cat err.txt)', expected it to mention '$expected'"
}

# expect_usage_error EXPECTED_TEXT CMD...: a usage error (exit 2) with the text
expect_usage_error() { expect_error 2 "$@"; }


# hashes CHECKPOINT: each parameter's name and checksum
hashes() { "$bin" inspect "$1" --checksums | awk '/^(tok_emb|pos_emb|blocks|ln_f|lm_head|classifier)/ {print $1, $NF}'; }

# peak_rss_kb CMD...: runs CMD (stdout to run.out, stderr to run.err), prints its peak
# resident set: the kernel's count at its exit, through the tests' peak_rss helper (built
# beside the binary under test), else VmHWM sampled every 20 ms (which can miss the peak
# of a short run's last moments).
peak_rss_kb() {
  local helper
  helper="$(dirname "$bin")/peak_rss"
  if [ -x "$helper" ]; then
    "$helper" peak_rss.kb "$@" > run.out 2> run.err || fail "'$*' failed: $(tail -3 run.err)"
    cat peak_rss.kb
    return
  fi
  "$@" > run.out 2> run.err &
  local pid=$! peak=0 v
  while kill -0 "$pid" 2>/dev/null; do
    v=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    if [ -n "$v" ] && [ "$v" -gt "$peak" ]; then peak=$v; fi
    sleep 0.02
  done
  wait "$pid" || fail "'$*' failed: $(tail -3 run.err)"
  echo "$peak"
}

# mpi_leak_checks: LeakSanitizer's settings for scenarios under mpirun (the ranks inherit
# them). Open MPI holds allocations of its own until exit, suppressed by library
# (lsan_mpi.supp); with $NO_DLCLOSE_LIBRARY (tests/no_dlclose.c, set by ctest) preloaded its
# components stay mapped and are named in a stack as the allocation's own frame, else only
# the slow unwinder reaches an Open MPI library, at five times the scenario's time.
mpi_leak_checks() {
  local supp
  supp="$(dirname "${BASH_SOURCE[0]}")/lsan_mpi.supp"
  if [ -f "${NO_DLCLOSE_LIBRARY:-}" ]; then
    export LD_PRELOAD="$NO_DLCLOSE_LIBRARY${LD_PRELOAD:+:$LD_PRELOAD}"
    # (a library preloaded before the sanitizer's runtime: allowed)
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
    export LSAN_OPTIONS="suppressions=$supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  else
    export LSAN_OPTIONS="suppressions=$supp:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  fi
}
