#pragma once
// Runs the checkpoint reader (checkpoint_reader.h) in a forked child and replays what it
// finds into a ReadSink in this process (internal to io/). libhdf5 1.10 is not hardened
// against hostile files: a damaged chunk index makes it read out of bounds and crash, or
// loop forever (our fuzzer found both in seconds). In the child that costs the child only.
// The file is parsed once, there: the child streams what it reads over a pipe in small
// frames, and this process checks every frame as if the child could be corrupted (it can).
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "io/checkpoint.h"
#include "io/checkpoint_reader.h"

namespace io::detail {

// What the child reads: an open regular file of `size` bytes (the child maps it, sending
// progress as its pages come in), or bytes already in memory (`bytes`, shared by the fork).
struct ReadInput {
  int fd = -1;
  const std::string* bytes = nullptr;
  uint64_t size = 0;
};

// When the child is taken to be stuck. Progress is any byte it sends, and it sends as it
// reads the file and as it decodes data (every 4 MiB either way), so a file of any size
// keeps progress coming; only a library stuck inside one call stops it. The limit is in the
// child's own CPU time, which a slow disk or a throttled or busy machine does not use up;
// the wall-clock limit catches a child that cannot run at all (a deadlock).
struct ChildLimits {
  double stall_cpu_s = 3.0;    // the child's CPU time without progress
  double stall_wall_s = 60.0;  // wall time without progress
  // At most this much CPU time in all, however steady the progress (a file of quadratic
  // cost): 30 s plus 1 s for every 10 MB of file.
  double total_cpu_s(uint64_t file_bytes) const {
    return 30.0 + static_cast<double>(file_bytes) / 10e6;
  }
  // For tests: the child's pid as soon as it exists; something to run in the child before it
  // reads (to play a library that spins, hangs or crashes).
  std::function<void(pid_t)> on_start;
  std::function<void()> in_child;
};

// Reads input in a child and tells out what it found, ending with done() (or stopping
// early once out.wants_more() turns false). CheckpointError naming source when the child
// crashes (a signal, a sanitizer report), makes no progress, ends early or sends a frame
// that does not parse or does not fit what came before.
void read_in_child(const ReadInput& input, const std::string& source, ReadRequest request,
                   ReadSink& out, const ChildLimits& limits = {});

// The bytes of an open file, in a buffer not cleared before it is filled.
struct FileBytes {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  std::string_view view() const { return {data.get(), size}; }
};
// The `size` bytes of an open file (fewer if it shrank), read in pieces with progress told
// to sink, for a read in this process; std::runtime_error with the reason when a read fails.
FileBytes read_open_file(int fd, uint64_t size, ReadSink& sink);

// load_checkpoint with limits of the caller's choosing (tests).
Checkpoint load_checkpoint(const std::string& path, const LoadOptions& options,
                           const ChildLimits& limits);

}  // namespace io::detail
