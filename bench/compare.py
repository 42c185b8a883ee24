#!/usr/bin/env python3
"""attograd against PyTorch at its best, side by side.

PyTorch's best is searched, not assumed: for every config and dropout each variant of
  threads 1 or 2
  x kernels: the environment as given (which may pin OPENBLAS_CORETYPE, e.g. Haswell),
             OpenBLAS's own choice (OPENBLAS_CORETYPE unset), or AVX-512 forced
             (OPENBLAS_CORETYPE=SkylakeX and ATEN_CPU_CAPABILITY=avx512, where the CPU has it)
  x precision: fp32, or torch.autocast("cpu", dtype=torch.bfloat16)
is timed once briefly (a probe running past 3 times the fastest probe's wall time is stopped:
it cannot be the best, and where every bf16 probe is, the table says "stopped"); then the
fastest fp32 variant and the fastest bf16 variant are run interleaved with attograd in both
precisions (--precision fp32 and bf16) for --rounds rounds, so all see the same machine. Medians over rounds; the speed-up is attograd's faster
precision against PyTorch's faster one ("best/best") and fp32 against fp32; RSS is compared
between those two fastest variants.

usage: compare.py [--attograd build/attograd] [--configs tiny,small,base,gpt2]
                  [--dropouts 0,0.1] [--rounds 3] [--steps 20] [--threads 2] [--json OUT]
                  [--background-load] [--lora-rank R]

--configs may name the Llama family's shapes too (smollm2-135m, qwen2.5-0.5b, llama3.2-1b:
B 4, T 256), usually with --lora-rank 8 --dropouts 0.

--background-load runs every timed process, attograd's and PyTorch's (the search for
PyTorch's best included), beside one more busy process: a spinning loop pinned to the last
core this one may use, started before and killed after each run (as `attograd bench
--background-load` does within one run), so both sides meet the same load.

Prints one table (ms/step, tokens/s, speed-ups, GFLOP/s, peak RSS and its ratio against
the variant PyTorch was fastest with), then the cblas_sgemm peak on 2 threads and the base
and gpt2 configs' share of it.

gpt2 is GPT-2 124M at llm.c's CPU shape (B 4, T 64; bench/gpt2_scale.py adds llm.c and the
memory of a save): about a second a step, PyTorch's up to three, so it is timed over at most
QUICK's steps and probed with one warm-up step and two timed ones (the search takes minutes).
"""
import argparse
import contextlib
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
def cpu_has(flag):
    """Whether /proc/cpuinfo lists the flag (False where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and flag in line.split() for line in f)
    except OSError:
        return False


KERNELS = {  # name: environment changes (None removes the variable)
    "as-given": {},
    "openblas-auto": {"OPENBLAS_CORETYPE": None},
}
# AVX-512 forced only where the CPU has it: elsewhere PyTorch dies of SIGILL (an AMD EPYC Zen 3)
if cpu_has("avx512f"):
    KERNELS["avx512"] = {"OPENBLAS_CORETYPE": "SkylakeX", "ATEN_CPU_CAPABILITY": "avx512"}
# The configs timed briefly: their steps take seconds (PyTorch's up to half a minute at the
# Llama family's shapes), so few steps, one warm-up, and at those shapes PyTorch is searched
# on 1 and 2 threads as the others are (PyTorch fp32 measured faster on 1 thread than on 2
# at smollm2-135m on Zen 4).
QUICK = {"gpt2": dict(steps=6, warmup=3, probe_steps=2, probe_warmup=1, threads=(1, 2))}
for _name in ("smollm2-135m", "qwen2.5-0.5b", "llama3.2-1b"):
    QUICK[_name] = dict(steps=3, warmup=1, probe_steps=1, probe_warmup=1, threads=(1, 2))


def steps_for(a, config):
    return min(a.steps, QUICK[config]["steps"]) if config in QUICK else a.steps


def environment(env_changes=None):
    """This process's environment with the changes made (a value None removes it)."""
    env = dict(os.environ)
    for k, v in (env_changes or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


BACKGROUND_LOAD = False  # --background-load: a spinning process beside every timed run
SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def die_with_parent():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: never outlive compare.py


@contextlib.contextmanager
def background_load(on):
    """A busy process pinned to the last core this process may use, while the block runs."""
    if not on:
        yield
        return
    cpu = max(os.sched_getaffinity(0))
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)], preexec_fn=die_with_parent)
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def run_json(cmd, env_changes=None, load=None, timeout=None):
    """The JSON lines cmd prints; None where it ran past timeout seconds (then stopped)."""
    with background_load(BACKGROUND_LOAD if load is None else load):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True,
                                 env=environment(env_changes), timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def torch_cmd(a, common, threads, precision):
    return [a.python, os.path.join(HERE, "torch_reference.py"), "--threads", str(threads),
            "--precision", precision] + common


LORA_RANK = 0  # --lora-rank: adapters on every projection, the base frozen (both sides)


def common_args(config, dropout, steps):
    args = ["--config", config, "--dropout", dropout, "--steps", str(steps), "--json",
            "--lora-rank", str(LORA_RANK)]
    if config in QUICK:
        args += ["--warmup", str(QUICK[config]["warmup"])]
    return args


# A probe that runs past this many times the fastest probe's wall time so far is stopped: it
# cannot be PyTorch's best. (On a CPU without BF16 units autocast's bfloat16 emulates them:
# one probe of smollm2-135m took minutes on an AMD EPYC Zen 3, and four of them most of the
# search's half hour.)
PROBE_BOUND = 3


def best_variants(a, config, dropout):
    """The fastest (threads, kernels) for each precision, from one short run of each; a
    precision whose every probe was stopped (PROBE_BOUND) maps to the seconds it was given."""
    probe = common_args(config, dropout, max(3, a.steps // 4))
    threads_tried = (1, 2)
    if config in QUICK:
        probe = common_args(config, dropout, QUICK[config]["probe_steps"])
        probe[probe.index("--warmup") + 1] = str(QUICK[config]["probe_warmup"])
        threads_tried = QUICK[config]["threads"]
    best, fastest_wall = {}, None
    for precision in ("fp32", "bf16"):
        timed = []
        for threads in threads_tried:
            for kernels, env in KERNELS.items():
                bound = fastest_wall and PROBE_BOUND * fastest_wall
                start = time.monotonic()
                rows = run_json(torch_cmd(a, probe, threads, precision), env, timeout=bound)
                if rows is None:
                    print(f"PyTorch {precision} {threads}t {kernels}: stopped after {bound:.0f} s",
                          file=sys.stderr)
                    continue
                wall = time.monotonic() - start
                fastest_wall = min(wall, fastest_wall or wall)
                timed.append((rows[0]["ms_per_step"], threads, kernels))
        best[precision] = min(timed)[1:] if timed else PROBE_BOUND * fastest_wall
    return best


def measure(a, config, dropout):
    common = common_args(config, dropout, steps_for(a, config))
    best = best_variants(a, config, dropout)
    ours, theirs = {"fp32": [], "bf16": []}, {"fp32": [], "bf16": []}
    for _ in range(a.rounds):
        for precision in ours:
            ours[precision] += run_json([a.attograd, "bench", "--threads", str(a.threads),
                                         "--precision", precision] + common)
        for precision, variant in best.items():
            if isinstance(variant, tuple):
                threads, kernels = variant
                theirs[precision] += run_json(torch_cmd(a, common, threads, precision),
                                              KERNELS[kernels])
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    o_ms = {p: med(ours[p], "ms_per_step") for p in ours}
    t_ms = {p: med(theirs[p], "ms_per_step") for p in theirs if theirs[p]}
    mine, fastest = min(o_ms, key=o_ms.get), min(t_ms, key=t_ms.get)
    describe = lambda p: (f"{p} {best[p][0]}t {best[p][1]}" if isinstance(best[p], tuple) else
                          f"{p}: every probe stopped after {best[p]:.0f} s")
    row = dict(config=config, dropout=float(dropout), ours_fp32_ms=o_ms["fp32"],
               ours_bf16_ms=o_ms["bf16"], ours_best=mine, ours_ms=o_ms[mine],
               torch_fp32_ms=t_ms.get("fp32"), torch_bf16_ms=t_ms.get("bf16"),
               torch_fp32_variant=describe("fp32"), torch_bf16_variant=describe("bf16"),
               torch_best=describe(fastest), speedup=t_ms[fastest] / o_ms[mine],
               speedup_fp32=t_ms["fp32"] / o_ms["fp32"] if "fp32" in t_ms else None,
               ours_tok=med(ours[mine], "tokens_per_s"),
               torch_tok=med(theirs[fastest], "tokens_per_s"),
               ours_gflops=med(ours[mine], "gflops"), ours_rss=med(ours[mine], "peak_rss_mb"),
               torch_rss=med(theirs[fastest], "peak_rss_mb"), background_load=BACKGROUND_LOAD,
               ours_rss_of_plan=med(ours[mine], "peak_rss_mb") / (
                   ours[mine][0]["plan_state_mb"] + ours[mine][0]["plan_activations_mb"]))
    return row, ours["fp32"] + ours["bf16"] + theirs["fp32"] + theirs["bf16"]


def cell(value, width, suffix=""):
    """value to 2 decimals (and suffix) in width, or "stopped" where PyTorch's probes were."""
    return f"{value:{width - len(suffix)}.2f}{suffix}" if value is not None else f"{'stopped':>{width}}"


def print_table(rows, peak):
    if BACKGROUND_LOAD:
        print("under load: a busy process pinned to one core beside every run")
    print(f"{'config':12} {'drop':>4} | {'ours fp32 ms':>12} {'ours bf16 ms':>12} | "
          f"{'torch fp32 ms':>13} {'torch bf16 ms':>13} | {'best/best':>9} {'fp32/fp32':>9} | "
          f"{'tok/s ours':>10} {'torch':>7} | {'GFLOP/s':>7} | {'RSS MB ours':>11} {'torch':>7} "
          f"{'ratio':>6}")
    for r in rows:
        print(f"{r['config']:12} {r['dropout']:4.1f} | {r['ours_fp32_ms']:12.2f} "
              f"{r['ours_bf16_ms']:12.2f} | "
              f"{cell(r['torch_fp32_ms'], 13)} {cell(r['torch_bf16_ms'], 13)} | "
              f"{r['speedup']:8.2f}x {cell(r['speedup_fp32'], 9, 'x')} | "
              f"{r['ours_tok']:10.0f} {r['torch_tok']:7.0f} | "
              f"{r['ours_gflops']:7.1f} | {r['ours_rss']:11.1f} {r['torch_rss']:7.1f} "
              f"{r['ours_rss'] / r['torch_rss']:6.2f}")
    for r in rows:
        print(f"  {r['config']} {r['dropout']}: attograd's faster: {r['ours_best']}; PyTorch fp32 "
              f"{r['torch_fp32_variant']}, bf16 {r['torch_bf16_variant']}; fastest "
              f"{r['torch_best']}")
    for r in rows:
        if r["config"] in ("base", "gpt2"):
            print(f"{r['config']} dropout {r['dropout']}: {r['ours_gflops']:.1f} GFLOP/s = "
                  f"{100 * r['ours_gflops'] / peak:.0f}% of the 2-thread cblas_sgemm peak "
                  f"({peak:.0f} GFLOP/s)")
        if r["config"] == "gpt2":
            print(f"gpt2 dropout {r['dropout']}: attograd's peak RSS {r['ours_rss']:.0f} MB = "
                  f"{r['ours_rss_of_plan']:.2f}x its memory plan (16 bytes per parameter + the "
                  f"activations)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--attograd", default=os.path.join(HERE, "..", "build", "attograd"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--configs", default="tiny,small,base")
    ap.add_argument("--dropouts", default="0,0.1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lora-rank", type=int, default=0,
                    help="LoRA adapters of this rank on every projection, base frozen")
    ap.add_argument("--json", help="also write every measurement here")
    ap.add_argument("--background-load", action="store_true",
                    help="a busy process pinned to one core beside every timed run")
    a = ap.parse_args()
    global BACKGROUND_LOAD, LORA_RANK
    BACKGROUND_LOAD = a.background_load
    LORA_RANK = a.lora_rank

    rows, raw = [], []
    for config in a.configs.split(","):
        for dropout in a.dropouts.split(","):
            row, measured = measure(a, config, dropout)
            rows.append(row)
            raw += measured
            print(f"measured {config} dropout {dropout}", file=sys.stderr)
    micro = run_json([a.attograd, "bench", "--micro", "--threads", "2", "--json"], load=False)
    peak = next(m["gflops"] for m in micro if m["kernel"].startswith("cblas_sgemm"))
    print_table(rows, peak)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(rows=rows, raw=raw, sgemm_peak_gflops=peak), f, indent=1)


if __name__ == "__main__":
    main()
