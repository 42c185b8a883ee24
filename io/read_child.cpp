#include "io/read_child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <vector>

#include "io/checkpoint_builder.h"
#include "io/read_frames.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTOGRAD_HAS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(ATTOGRAD_HAS_ASAN)
#define ATTOGRAD_CHILD_ASAN 1
extern "C" void __sanitizer_set_death_callback(void (*callback)(void));
#endif

namespace io::detail {

namespace {

constexpr int kSanitizerExit = 70;  // the child's exit status after a sanitizer report
constexpr int kParentGoneExit = 71;
constexpr size_t kChildReadBytes = 4 << 20;

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ------------------------------------------------------------------ the child
// A hostile file can make libhdf5 allocate what it declares before it finds the data
// missing: the child's address space is capped at what it has plus 8 times the file plus
// 2 GiB, so such an allocation fails in the child instead of pressing on the machine.
// (Not under AddressSanitizer, whose shadow memory needs terabytes of address space.)
void limit_memory(uint64_t file_bytes) {
#ifndef ATTOGRAD_CHILD_ASAN
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char text[128] = {};
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  const uint64_t pages = n > 0 ? std::strtoull(text, nullptr, 10) : 0;
  if (pages == 0) return;
  struct rlimit limit;
  if (::getrlimit(RLIMIT_AS, &limit) != 0) return;
  const uint64_t want =
      pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) + 8 * file_bytes + (uint64_t{2} << 30);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur <= want) return;
  limit.rlim_cur = want;
  ::setrlimit(RLIMIT_AS, &limit);
#else
  (void)file_bytes;
#endif
}

void prepare_child(pid_t parent, uint64_t file_bytes) {
  // die of a crash so the parent sees the signal: no handler of a debugger, fuzzer or
  // sanitizer may turn it into a report of this child
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGSYS}) std::signal(sig, SIG_DFL);
#ifdef ATTOGRAD_CHILD_ASAN
  __sanitizer_set_death_callback([] { ::_exit(kSanitizerExit); });
#endif
  // the program's handlers (the trainer saves and stops on these) belong to the parent: a
  // Ctrl-C reaches the whole process group and the parent decides what it means
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM})
    std::signal(sig, SIG_IGN);
  std::signal(SIGPIPE, SIG_IGN);  // a parent that stopped listening: write() fails, the child ends
  std::signal(SIGCHLD, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // a parent killed outright takes the child with it (even one spinning inside libhdf5)
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(kParentGoneExit);
  limit_memory(file_bytes);
}

}  // namespace

FileBytes read_open_file(int fd, uint64_t size, ReadSink& sink) {
  FileBytes bytes{std::unique_ptr<char[]>(new char[size]), 0};
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n =
        ::pread(fd, bytes.data.get() + done, std::min<uint64_t>(size - done, kChildReadBytes),
                static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::strerror(errno));
    if (n == 0) break;  // it shrank: what is there is read (and found truncated)
    done += static_cast<uint64_t>(n);
    sink.progress(static_cast<uint64_t>(n));
  }
  bytes.size = done;
  return bytes;
}

namespace {

// The child's view of the file: mapped, not copied, its page tables filled a window at a time
// (with progress after each), so the bytes cost neither a copy nor a page fault per 4 KiB.
// A read of part of the file (the weights without the optimizer's state, two thirds of a
// training checkpoint) fills none: the pages it reads fault in, and the rest is never read
// from the disk nor counted in the child's memory.
class MappedFile {
 public:
  MappedFile(int fd, uint64_t size, ReadSink& sink, bool whole) {
    if (size == 0) return;
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) throw std::runtime_error(std::strerror(errno));
    data_ = static_cast<const char*>(p), size_ = mapped_ = size;
    if (!whole) return;
    constexpr uint64_t kWindow = 32 << 20;
    for (uint64_t at = 0; at < size; at += kWindow) {
      const uint64_t n = std::min(kWindow, size - at);
#ifdef MADV_POPULATE_READ
      // before Linux 5.14 (EINVAL) the pages fault in as they are read instead
      if (::madvise(const_cast<char*>(data_) + at, n, MADV_POPULATE_READ) != 0) {
        const int err = errno;
        if (err == EFAULT) shrunk(fd);  // cut short since it was opened
        if (err != EINTR && err != EAGAIN) break;
      }
#endif
      sink.progress(n);
    }
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), mapped_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view view() const {
    return {data_, size_};
  }

 private:
  void shrunk(int fd) {
    struct stat st;
    if (::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) < size_) size_ = st.st_size;
  }
  const char* data_ = nullptr;
  uint64_t size_ = 0, mapped_ = 0;
};

[[noreturn]] void run_child(int out, const ReadInput& input, const std::string& source,
                            ReadRequest request, pid_t parent, const ChildLimits& limits) {
  prepare_child(parent, input.size);
  if (limits.in_child) limits.in_child();
  FrameWriter writer(out, kParentGoneExit);
  try {
    std::optional<MappedFile> file;
    if (!input.bytes) {
      try {
        file.emplace(input.fd, input.size, writer, request.verify || request.optimizer);
      } catch (const std::exception& e) {
        writer.fatal(fmt::format("cannot read '{}': {}", source, e.what()));
        writer.done();
        ::_exit(0);
      }
    }
    read_checkpoint_image(input.bytes ? std::string_view(*input.bytes) : file->view(), source,
                          request, writer);
    writer.flush();
    ::_exit(0);
  } catch (...) {
    ::_exit(kParentGoneExit + 1);
  }
}

// ------------------------------------------------------------------ the parent
// The child's CPU time in seconds, by its CPU clock (or /proc when that is unavailable).
class ChildClock {
 public:
  explicit ChildClock(pid_t pid) : pid_(pid), clock_ok_(::clock_getcpuclockid(pid, &clock_) == 0) {}
  double seconds() const {
    timespec ts;
    if (clock_ok_ && ::clock_gettime(clock_, &ts) == 0)
      return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
    return from_proc();
  }

 private:
  double from_proc() const {
    const int fd = ::open(fmt::format("/proc/{}/stat", pid_).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[1024] = {};
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    const char* p = n > 0 ? std::strrchr(text, ')') : nullptr;  // the name may hold spaces
    unsigned long long utime = 0, stime = 0;
    if (!p || std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                          &stime) != 2)
      return 0;
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

  pid_t pid_;
  clockid_t clock_{};
  bool clock_ok_;
};

enum class Ending { finished, stopped_early, stalled_cpu, stalled_wall, too_much_cpu };

struct Pumped {
  Ending ending = Ending::finished;
  bool reaped = false;  // status holds the child's end
  int status = 0;
};

// One read from the pipe into reader: bytes read, 0 at its end, -1 when there was nothing.
ssize_t read_some(int fd, FrameReader& reader) {
  const size_t want = reader.wanted();
  const ssize_t n = ::read(fd, reader.space(want), want);
  if (n > 0) reader.commit(static_cast<size_t>(n));
  return n < 0 && errno != EINTR && errno != EAGAIN ? 0 : n;
}

// Whatever is still in the pipe of a child that has ended.
void drain(int fd, FrameReader& reader) {
  for (pollfd ready{fd, POLLIN, 0}; ::poll(&ready, 1, 0) > 0; ready.revents = 0)
    if (read_some(fd, reader) <= 0) return;
}

// Feeds the child's frames to reader until it ends or is taken to be stuck. Its end is its
// exit, not the end of the pipe: a child that closed the pipe and spins on is caught too.
Pumped pump(pid_t pid, int fd, FrameReader& reader, const ReadSink& out, const ChildLimits& limits,
            uint64_t file_bytes) {
  const ChildClock clock(pid);
  double last_wall = steady_seconds(), last_cpu = clock.seconds();
  for (bool open = true;;) {
    pollfd wait_for_data{fd, POLLIN, 0};
    const int r = ::poll(&wait_for_data, open ? 1 : 0, open ? 100 : 10);
    const ssize_t n = r > 0 ? read_some(fd, reader) : -1;
    if (n > 0 && !out.wants_more()) return {Ending::stopped_early};
    if (n > 0) {
      last_wall = steady_seconds(), last_cpu = clock.seconds();
      continue;
    }
    if (n == 0) open = false;
    Pumped ended{Ending::finished, true, 0};
    if (::waitpid(pid, &ended.status, WNOHANG) == pid) {
      if (open) drain(fd, reader);
      return ended;
    }
    const double cpu = clock.seconds();
    if (cpu - last_cpu > limits.stall_cpu_s) return {Ending::stalled_cpu};
    if (steady_seconds() - last_wall > limits.stall_wall_s) return {Ending::stalled_wall};
    if (cpu > limits.total_cpu_s(file_bytes)) return {Ending::too_much_cpu};
  }
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;  // reaped by someone else: nothing more to learn
  return status;
}

// Throws what a child that ended as it did means for the file.
void judge_ending(Ending ending, int status, bool finished, const std::string& source,
                  const ChildLimits& limits, uint64_t file_bytes) {
  const std::string damaged = fmt::format("'{}' is damaged: the HDF5 library", source);
  if (ending == Ending::stalled_cpu)
    throw CheckpointError(
        fmt::format("{} did not finish reading it (no progress in {:g} s of CPU time)", damaged,
                    limits.stall_cpu_s));
  if (ending == Ending::stalled_wall)
    throw CheckpointError(fmt::format("{} did not finish reading it (no progress in {:g} s)",
                                      damaged, limits.stall_wall_s));
  if (ending == Ending::too_much_cpu)
    throw CheckpointError(fmt::format("{} did not finish reading it in {:.0f} s of CPU time",
                                      damaged, limits.total_cpu_s(file_bytes)));
  if (ending == Ending::stopped_early) return;
  if (status != -1 && WIFSIGNALED(status))
    throw CheckpointError(fmt::format("{} crashed reading it (signal {}, {})", damaged,
                                      WTERMSIG(status), strsignal(WTERMSIG(status))));
  if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == kSanitizerExit)
    throw CheckpointError(
        fmt::format("{} crashed reading it (a memory error caught by the sanitizer)", damaged));
  if (status != -1 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
    throw CheckpointError(fmt::format("{} failed reading it (exit status {})", damaged,
                                      WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  if (!finished)
    throw CheckpointError(fmt::format("{} stopped before it finished reading it", damaged));
}

// Kills and reaps the child unless it was reaped already.
struct ChildGuard {
  pid_t pid;
  int fd;
  bool reaped = false;
  ~ChildGuard() {
    ::close(fd);
    if (!reaped) ::kill(pid, SIGKILL), reap(pid);
  }
};

}  // namespace

void read_in_child(const ReadInput& input, const std::string& source, ReadRequest request,
                   ReadSink& out, const ChildLimits& limits) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw CheckpointError(fmt::format("cannot read '{}': no pipe for the process that reads it: {}",
                                      source, std::strerror(errno)));
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]), ::close(fds[1]);
    throw CheckpointError(
        fmt::format("cannot read '{}': cannot start the process that reads it: {}", source,
                    std::strerror(err)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(fds[1], input, source, request, parent, limits);
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);  // fewer, larger reads (best effort)
  ChildGuard child{pid, fds[0]};
  if (limits.on_start) limits.on_start(pid);
  FrameReader reader(out);
  Pumped pumped;
  try {
    pumped = pump(pid, fds[0], reader, out, limits, input.size);
  } catch (const StreamError& e) {
    throw CheckpointError(fmt::format(
        "'{}' is damaged: the process reading it sent malformed data ({})", source, e.what()));
  }
  if (!pumped.reaped) {
    if (pumped.ending != Ending::finished) ::kill(pid, SIGKILL);
    pumped.status = reap(pid);
  }
  child.reaped = true;
  judge_ending(pumped.ending, pumped.status, reader.done(), source, limits, input.size);
}

}  // namespace io::detail
