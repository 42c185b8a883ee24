#!/usr/bin/env python3
"""The cost model of docs/scaling.md: bytes each step sends and the time of attograd's
gradient reduction (tree: all-to-all + combine + all-gather per bucket; allreduce: MPI's
Rabenseifner reduce-scatter + all-gather) for N processes on a network of latency alpha
and bandwidth beta, and the predicted scaling efficiency of data-parallel training.

    python3 tools/scaling_model.py            # the tables of docs/scaling.md (markdown)
"""

# name: (parameters, tokens per process and step, seconds of compute per step on one
# 2-thread process of this machine, measured or extrapolated at 180 GFLOP/s)
MODELS = {
    "tiny (bench)": (107_968, 16 * 64, None),
    "small (bench)": (816_512, 16 * 128, None),
    "base (bench)": (4_816_640, 8 * 256, None),
    "GPT-2 small": (124_439_808, 8 * 1024, None),
}
GFLOPS_PER_PROCESS = 180e9  # base config, 2 threads (docs/performance.md)
NETWORKS = {  # name: (alpha seconds per message, beta bytes per second achieved)
    "10 Gbit/s TCP": (25e-6, 1.1e9),
    "25 Gbit/s TCP": (20e-6, 2.8e9),
    "100 Gbit/s RDMA": (3e-6, 11.0e9),
}
BUCKET_BYTES = 4 << 20
WORLD_SIZES = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def step_seconds(params, tokens):
    # 6 FLOPs per parameter and token (forward + backward); attention ignored (small here)
    return 6 * params * tokens / GFLOPS_PER_PROCESS


def tree_seconds(grad_bytes, n, alpha, beta, bucket=BUCKET_BYTES):
    """All-to-all (pairwise: n-1 messages) then all-gather (ring: n-1 steps) per bucket."""
    buckets = max(1, -(-grad_bytes // bucket))
    latency = buckets * 2 * (n - 1) * alpha
    bandwidth = 2 * (n - 1) / n * grad_bytes / beta
    return latency + bandwidth


def allreduce_seconds(grad_bytes, n, alpha, beta, bucket=BUCKET_BYTES):
    """MPI's large-message all-reduce (Rabenseifner): 2 log2 n messages per bucket."""
    buckets = max(1, -(-grad_bytes // bucket))
    steps = (n - 1).bit_length()
    return buckets * 2 * steps * alpha + 2 * (n - 1) / n * grad_bytes / beta


# A node 32 times faster than one 2-thread process here (a 64-core server): the same
# communication against a 32 times shorter step.
FAST_NODE = 32.0


def efficiency(compute, comm, last_bucket):
    # backward (2/3 of the step) hides the communication of every bucket but the last
    hidden = 2.0 / 3.0 * compute
    exposed = max(last_bucket, comm - hidden)
    return compute / (compute + exposed)


def main():
    print("| model | parameters | gradient bytes | sent per process and step (N = 2 / 8 / 1024) |")
    print("|---|---:|---:|---:|")
    for name, (params, tokens, _) in MODELS.items():
        g = 4 * params
        sent = [2 * (n - 1) / n * g for n in (2, 8, 1024)]
        print(f"| {name} | {params:,} | {g / 1e6:.1f} MB | "
              + " / ".join(f"{s / 1e6:.1f} MB" for s in sent) + " |")
    for name, (params, tokens, _) in MODELS.items():
        if not name.startswith(("base", "GPT-2")):
            continue
        g = 4 * params
        compute = step_seconds(params, tokens)
        print(f"\n**{name}** ({tokens} tokens per process and step): reduction time per step, "
              "tree / allreduce, then the predicted efficiency of the tree for a process as "
              f"fast as this machine ({compute:.2f} s per step) / a node {FAST_NODE:.0f} times "
              "faster\n")
        print("| N | " + " | ".join(NETWORKS) + " |")
        print("|---:|" + "---|" * len(NETWORKS))
        for n in WORLD_SIZES:
            cells = []
            for alpha, beta in NETWORKS.values():
                t = tree_seconds(g, n, alpha, beta)
                a = allreduce_seconds(g, n, alpha, beta)
                last = tree_seconds(min(g, BUCKET_BYTES), n, alpha, beta)
                e = efficiency(compute, t, last)
                fast = efficiency(compute / FAST_NODE, t, last)
                cells.append(f"{t * 1e3:.0f} / {a * 1e3:.0f} ms, {100 * e:.0f}% / {100 * fast:.0f}%")
            print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
