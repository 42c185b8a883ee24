// base/posix_file.h, base/atomic_file.h and io/files.h, tried as a hostile neighbour would: links,
// FIFOs, folders and stray files planted in an output's folder never redirect or block a save;
// names stay within NAME_MAX; permission bits are those of a created file or of the file replaced;
// an output never names an input or another output; one run writes an output at a time; and an
// input that is not a regular file is refused without blocking.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/files.h"
#include "support.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A temporary folder that can list what is in it.
struct FilesTestDir : ag_test::TempDir {
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

void put(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string contents(const std::string& path) {
  return base::read_input_file(path, "file");
}

mode_t permission_bits(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

// The umask for one test, restored afterwards.
struct UmaskScope {
  mode_t old;
  explicit UmaskScope(mode_t mask) : old(::umask(mask)) {}
  ~UmaskScope() { ::umask(old); }
};

// An environment variable for one test, restored afterwards.
struct EnvScope {
  std::string name;
  std::optional<std::string> old;
  EnvScope(const std::string& n, const std::string& value) : name(n) {
    if (const char* v = std::getenv(n.c_str())) old = v;
    ::setenv(n.c_str(), value.c_str(), 1);
  }
  ~EnvScope() { old ? ::setenv(name.c_str(), old->c_str(), 1) : ::unsetenv(name.c_str()); }
};

// A forked child that is killed and reaped if the test ends before it does.
struct Child {
  pid_t pid = -1;
  ~Child() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  int wait() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
};

// A PID that no process has: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// A child that takes the lock on out, says so on a pipe, and holds it until killed.
pid_t fork_lock_holder(const std::string& out, Child& child) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  child.pid = ::fork();
  if (child.pid == 0) {
    ::close(ready[0]);
    try {
      io::OutputLock lock(out);
      if (::write(ready[1], "k", 1) != 1) ::_exit(1);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(2);
    }
  }
  ::close(ready[1]);
  char c = 0;
  const bool locked = ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
  REQUIRE(locked);
  return child.pid;
}

// Fails the test instead of hanging it if a FIFO open blocks after all.
struct AlarmScope {
  explicit AlarmScope(unsigned seconds) { ::alarm(seconds); }
  ~AlarmScope() { ::alarm(0); }
};

}  // namespace

TEST_CASE("files for an output name of 250 to 255 characters stay within NAME_MAX", "[files]") {
  FilesTestDir dir;
  const size_t length = GENERATE(size_t{250}, size_t{255});
  const std::string name = std::string(length - 3, 'n') + ".h5";
  const std::string out = dir.file(name);
  REQUIRE_NOTHROW(base::check_can_write(out));
  base::write_file_atomically(out, "first");
  base::write_file_atomically(out, "second");
  REQUIRE(contents(out) == "second");
  {
    io::OutputLock lock(out);
    REQUIRE(fs::exists(lock.lock_path()));
    REQUIRE(fs::path(lock.lock_path()).filename().string().size() <= NAME_MAX);
  }
  const std::string rescue = io::make_rescue_path(out);
  REQUIRE(fs::path(rescue).filename().string().size() <= NAME_MAX);
  base::write_file_atomically(rescue, "state");
  REQUIRE(contents(rescue) == "state");
  fs::remove_all(fs::path(rescue).parent_path());
  REQUIRE(dir.names() == std::vector<std::string>{name});
}

TEST_CASE("a long name is cut on a character boundary and long names with one start differ",
          "[files]") {
  FilesTestDir dir;
  std::string name = "x";
  for (int i = 0; i < 83; ++i) name += "\xE2\x82\xAC";  // 83 x U+20AC, 3 bytes each
  const io::OutputLock a(dir.file(name + "-a.h5"));
  const io::OutputLock b(dir.file(name + "-b.h5"));  // the same first 250 bytes, another lock
  const std::string lock = fs::path(a.lock_path()).filename().string();
  REQUIRE(lock.size() <= NAME_MAX);
  const std::string kept = lock.substr(1, lock.find('~') - 1);  // ".<kept>~<hash>.lock"
  REQUIRE((kept.size() - 1) % 3 == 0);                          // "x" and whole characters only
  REQUIRE(name.rfind(kept, 0) == 0);
  REQUIRE(a.lock_path() != b.lock_path());
}

TEST_CASE("planted symlinks named like temporary files never redirect a save", "[files]") {
  FilesTestDir dir;
  const std::string victim = dir.file("victim");
  put(victim, "precious");
  const std::string out = dir.file("run.h5");
  std::vector<std::string> planted;
  for (pid_t pid : {::getpid(), dead_pid(), ::getpid() + 1, pid_t{1}}) {
    planted.push_back(fmt::format(".run.h5.partial-{}", pid));
    for (const char* suffix : {"XXXXXX", "000000", "aaaaaa", "AAAAAA", "a1B2c3"})
      planted.push_back(fmt::format(".run.h5.partial-{}-{}", pid, suffix));
  }
  std::sort(planted.begin(), planted.end());  // the dead PID may well be getpid() + 1
  planted.erase(std::unique(planted.begin(), planted.end()), planted.end());
  for (size_t i = 0; i < planted.size(); ++i) {
    // half point at the victim, half at a file a save must not create
    const std::string target = i % 2 ? victim : dir.file("created-through-a-link");
    fs::create_symlink(target, dir.file(planted[i]));
  }

  base::check_can_write(out);
  base::write_file_atomically(out, "new");
  base::write_file_atomically(out, "newer");

  REQUIRE(contents(out) == "newer");
  REQUIRE_FALSE(fs::is_symlink(out));
  REQUIRE(contents(victim) == "precious");
  REQUIRE_FALSE(fs::exists(dir.file("created-through-a-link")));
  for (const auto& name : planted) {
    INFO(name);
    REQUIRE(fs::is_symlink(dir.file(name)));  // never followed, and never removed either
  }
  REQUIRE(dir.names().size() == planted.size() + 2);
}

TEST_CASE("stray partial files folders and FIFOs never block a save and only dead ones go",
          "[files]") {
  FilesTestDir dir;
  const std::string out = dir.file("run.h5");
  const pid_t gone = dead_pid();
  const std::string own_folder = dir.file(fmt::format(".run.h5.partial-{}", ::getpid()));
  const std::string dead_folder = dir.file(fmt::format(".run.h5.partial-{}-abcdef", gone));
  const std::string dead_fifo = dir.file(fmt::format(".run.h5.partial-{}", gone));
  const std::string live_file = dir.file(".run.h5.partial-1-abcdef");  // PID 1 never dies
  const std::string stale_old = dir.file(fmt::format(".run.h5.partial-{}-zzzzzz", gone));
  const std::string other_output = dir.file(fmt::format(".other.h5.partial-{}-abcdef", gone));
  const std::string not_a_pid = dir.file(".run.h5.partial-12ab");
  fs::create_directory(own_folder);
  fs::create_directory(dead_folder);
  REQUIRE(::mkfifo(dead_fifo.c_str(), 0600) == 0);
  for (const auto& f : {live_file, stale_old, other_output, not_a_pid}) put(f, "leftover");

  base::write_file_atomically(out, "data");

  REQUIRE(contents(out) == "data");
  REQUIRE(fs::is_directory(own_folder));
  REQUIRE(fs::is_directory(dead_folder));
  REQUIRE(fs::is_fifo(dead_fifo));
  REQUIRE(fs::exists(live_file));
  REQUIRE(fs::exists(other_output));
  REQUIRE(fs::exists(not_a_pid));
  REQUIRE_FALSE(fs::exists(stale_old));  // a killed writer's file: removed

  SECTION("the old name format of a killed writer is removed too") {
    fs::remove(dead_fifo);
    put(dead_fifo, "leftover");
    base::write_file_atomically(out, "again");
    REQUIRE_FALSE(fs::exists(dead_fifo));
  }
}

TEST_CASE("a partial file still locked by its writer is kept even when its PID looks dead",
          "[files]") {
  FilesTestDir dir;
  const std::string out = dir.file("run.h5");
  const std::string partial = dir.file(fmt::format(".run.h5.partial-{}-abcdef", dead_pid()));
  put(partial, "being written in another PID namespace");
  const int fd = ::open(partial.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  base::write_file_atomically(out, "one");
  REQUIRE(fs::exists(partial));
  ::close(fd);
  base::write_file_atomically(out, "two");
  REQUIRE_FALSE(fs::exists(partial));
}

TEST_CASE("a new output gets 0666 less the umask and a replaced one keeps its permission bits",
          "[files]") {
  FilesTestDir dir;
  SECTION("new files") {
    for (mode_t mask : {mode_t{022}, mode_t{027}, mode_t{077}, mode_t{002}}) {
      UmaskScope scope(mask);
      const std::string path = dir.file(fmt::format("new-{:o}.h5", mask));
      base::write_file_atomically(path, "x");
      INFO("umask " << std::oct << mask);
      REQUIRE(permission_bits(path) == (0666 & ~mask));
    }
  }
  SECTION("replaced files") {
    UmaskScope scope(022);
    for (mode_t kept : {mode_t{0640}, mode_t{0600}, mode_t{0660}, mode_t{0644}, mode_t{0400}}) {
      const std::string path = dir.file(fmt::format("old-{:o}.h5", kept));
      put(path, "old");
      REQUIRE(::chmod(path.c_str(), kept) == 0);
      base::write_file_atomically(path, "new");
      INFO("mode " << std::oct << kept);
      REQUIRE(permission_bits(path) == kept);
      REQUIRE(contents(path) == "new");
    }
  }
}

TEST_CASE("an output that is a folder FIFO device or symlink is refused by name", "[files]") {
  FilesTestDir dir;
  const std::string victim = dir.file("victim");
  put(victim, "precious");
  fs::create_directory(dir.file("folder.h5"));
  REQUIRE(::mkfifo(dir.file("fifo.h5").c_str(), 0600) == 0);
  fs::create_symlink(victim, dir.file("link.h5"));
  fs::create_symlink(dir.file("nowhere"), dir.file("dangling.h5"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir.file("folder.h5"), "it is a folder"},
      {dir.file("fifo.h5"), "it is a FIFO, not a regular file"},
      {"/dev/null", "it is a character device, not a regular file"},
      {dir.file("link.h5"), "it is a symbolic link"},
      {dir.file("dangling.h5"), "it is a symbolic link"},
      {dir.path.string() + "/", "it names a folder"},
  };
  AlarmScope no_hang(20);
  for (const auto& [path, reason] : cases) {
    INFO(path);
    const std::string named = fmt::format("cannot write '{}'", path);
    REQUIRE_THROWS_WITH(base::check_can_write(path), Contains(named) && Contains(reason));
    REQUIRE_THROWS_WITH(base::write_file_atomically(path, "x"),
                        Contains(named) && Contains(reason));
  }
  REQUIRE(contents(victim) == "precious");
  REQUIRE(fs::is_symlink(dir.file("link.h5")));
  REQUIRE(fs::is_fifo(dir.file("fifo.h5")));
  REQUIRE(fs::is_character_file("/dev/null"));
  REQUIRE_FALSE(fs::exists(dir.file("nowhere")));
  REQUIRE(dir.names() ==
          std::vector<std::string>{"dangling.h5", "fifo.h5", "folder.h5", "link.h5", "victim"});
}

TEST_CASE("the write check leaves nothing behind and names a missing folder", "[files]") {
  FilesTestDir dir;
  const std::string victim = dir.file("victim");
  put(victim, "precious");
  fs::create_symlink(victim, dir.file(fmt::format(".run.h5.partial-{}", ::getpid())));
  base::check_can_write(dir.file("run.h5"));
  REQUIRE(contents(victim) == "precious");
  REQUIRE(dir.names().size() == 2);
  const std::string missing = dir.file("no/such/run.h5");
  REQUIRE_THROWS_WITH(base::check_can_write(missing),
                      Contains(fmt::format("cannot write '{}' (creating a file in '{}')", missing,
                                           dir.file("no/such"))) &&
                          Contains("No such file or directory"));
}

TEST_CASE("the rescue copy goes into a fresh private folder", "[files]") {
  FilesTestDir dir;
  EnvScope tmpdir("TMPDIR", dir.path.string());
  const std::string a = io::make_rescue_path("some/where/run.h5");
  const std::string b = io::make_rescue_path("run.h5");
  REQUIRE(fs::path(a).filename() == "run.h5");
  REQUIRE(fs::path(a).parent_path().parent_path() == dir.path);
  REQUIRE(fs::path(a).parent_path() != fs::path(b).parent_path());
  struct stat st;
  REQUIRE(::lstat(fs::path(a).parent_path().c_str(), &st) == 0);
  REQUIRE(S_ISDIR(st.st_mode));
  REQUIRE((st.st_mode & 0777) == 0700);
  REQUIRE(st.st_uid == ::geteuid());
  base::write_file_atomically(a, "state");
  REQUIRE(contents(a) == "state");

  SECTION("an unusable TMPDIR falls back to /tmp") {
    EnvScope missing("TMPDIR", dir.file("gone"));
    const std::string c = io::make_rescue_path("run.h5");
    REQUIRE(c.rfind("/tmp/attograd-rescue-", 0) == 0);
    fs::remove_all(fs::path(c).parent_path());
  }
}

TEST_CASE("an output naming an input by path hard link or symlink is refused", "[files]") {
  FilesTestDir dir;
  const std::string data = dir.file("corpus.txt");
  put(data, "the corpus");
  const std::string config = dir.file("run.cfg");
  put(config, "steps = 1\n");
  const io::NamedPaths inputs = {{"--config", config}, {"--data", data}, {"--init-from", ""}};

  SECTION("the same path, however spelled") {
    REQUIRE_THROWS_AS(io::refuse_output_over_inputs(data, "--out", inputs), std::invalid_argument);
    REQUIRE_THROWS_WITH(
        io::refuse_output_over_inputs(data, "--out", inputs),
        fmt::format("--out '{}' is the same file as --data '{}'; refusing to overwrite an input",
                    data, data));
    const std::string dotted = dir.file("./corpus.txt");
    REQUIRE_THROWS_WITH(io::refuse_output_over_inputs(dotted, "--metrics", inputs),
                        Contains("--metrics") && Contains("--data"));
  }
  SECTION("a hard link") {
    const std::string out = dir.file("out.txt");
    fs::create_hard_link(data, out);
    REQUIRE_THROWS_WITH(io::refuse_output_over_inputs(out, "--out", inputs),
                        Contains(fmt::format("--out '{}' is the same file as --data", out)));
  }
  SECTION("a symbolic link, either way round") {
    const std::string out = dir.file("out.h5");
    fs::create_symlink(config, out);
    REQUIRE_THROWS_WITH(io::refuse_output_over_inputs(out, "--dump-grads", inputs),
                        Contains("--dump-grads") && Contains("--config"));
    const std::string link_in = dir.file("corpus-link.txt");
    fs::create_symlink(data, link_in);
    REQUIRE_THROWS_WITH(io::refuse_output_over_inputs(data, "--out", {{"--data", link_in}}),
                        Contains("--data"));
  }
  SECTION("an output not there yet or another file is fine") {
    REQUIRE_NOTHROW(io::refuse_output_over_inputs(dir.file("new.h5"), "--out", inputs));
    put(dir.file("other.h5"), "x");
    REQUIRE_NOTHROW(io::refuse_output_over_inputs(dir.file("other.h5"), "--out", inputs));
    REQUIRE_NOTHROW(io::refuse_output_over_inputs("", "--metrics", inputs));
  }
  REQUIRE(contents(data) == "the corpus");
}

TEST_CASE("two outputs naming one file are refused whether it exists yet or not", "[files]") {
  FilesTestDir dir;
  fs::create_directory(dir.file("sub"));
  const std::string out = dir.file("run.h5");
  REQUIRE_THROWS_WITH(
      io::refuse_shared_outputs({{"--out", out}, {"--metrics", dir.file("sub/../run.h5")}}),
      Contains("--metrics") && Contains(fmt::format("is the same file as --out '{}'", out)) &&
          Contains("give each output its own file"));
  put(out, "x");
  fs::create_symlink(out, dir.file("link.h5"));
  REQUIRE_THROWS_AS(
      io::refuse_shared_outputs({{"--out", out}, {"--dump-grads", dir.file("link.h5")}}),
      std::invalid_argument);
  REQUIRE_NOTHROW(io::refuse_shared_outputs(
      {{"--out", out}, {"--metrics", dir.file("m.jsonl")}, {"--dump-grads", ""}}));
}

TEST_CASE("a second writer of one output is refused with the first one's PID", "[files]") {
  FilesTestDir dir;
  const std::string out = dir.file("run.h5");

  SECTION("in this process: a separate open file description conflicts") {
    auto first = std::make_unique<io::OutputLock>(out);
    const std::string lock_path = first->lock_path();
    REQUIRE(lock_path == dir.file(".run.h5.lock"));
    REQUIRE(contents(lock_path) == fmt::format("{}\n", ::getpid()));
    REQUIRE_THROWS_WITH(io::OutputLock(out),
                        fmt::format("'{}' is being written by another attograd run (PID {}); "
                                    "wait for it or choose another --out",
                                    out, ::getpid()));
    REQUIRE_THROWS_WITH(io::OutputLock(out, "--dump-grads"),
                        Contains("choose another --dump-grads"));
    first.reset();
    REQUIRE_FALSE(fs::exists(lock_path));  // released and removed
    REQUIRE_NOTHROW(io::OutputLock(out));
  }
  SECTION("in another process") {
    Child child;
    const pid_t holder = fork_lock_holder(out, child);
    REQUIRE_THROWS_WITH(io::OutputLock(out), Contains(fmt::format("(PID {})", holder)));
    ::kill(holder, SIGKILL);  // the kernel releases a dead holder's lock
    child.wait();
    REQUIRE(fs::exists(dir.file(".run.h5.lock")));  // left behind, and taken over
    io::OutputLock mine(out);
    REQUIRE(contents(mine.lock_path()) == fmt::format("{}\n", ::getpid()));
  }
  SECTION("a latecomer holding the old lock file after a release shares nothing") {
    int old = -1;
    {
      io::OutputLock first(out);
      old = ::open(first.lock_path().c_str(), O_RDONLY | O_CLOEXEC);
    }
    // the old file was removed while locked: locking it now guards nothing, and a new
    // OutputLock takes a fresh file instead of being blocked by it
    REQUIRE(::flock(old, LOCK_EX | LOCK_NB) == 0);
    REQUIRE_NOTHROW(io::OutputLock(out));
    ::close(old);
  }
}

TEST_CASE("a lock file that is a symlink or not a regular file is refused", "[files]") {
  FilesTestDir dir;
  const std::string victim = dir.file("victim");
  put(victim, "precious");
  AlarmScope no_hang(20);
  fs::create_symlink(victim, dir.file(".a.h5.lock"));
  REQUIRE_THROWS_WITH(io::OutputLock(dir.file("a.h5")),
                      Contains(dir.file(".a.h5.lock")) && Contains("is a symbolic link"));
  fs::create_symlink(dir.file("nowhere"), dir.file(".b.h5.lock"));
  REQUIRE_THROWS_WITH(io::OutputLock(dir.file("b.h5")), Contains("is a symbolic link"));
  fs::create_directory(dir.file(".c.h5.lock"));
  REQUIRE_THROWS_WITH(io::OutputLock(dir.file("c.h5")), Contains("is a folder"));
  REQUIRE(::mkfifo(dir.file(".d.h5.lock").c_str(), 0600) == 0);
  REQUIRE_THROWS_WITH(io::OutputLock(dir.file("d.h5")), Contains("is a FIFO"));
  REQUIRE(contents(victim) == "precious");
  REQUIRE_FALSE(fs::exists(dir.file("nowhere")));
}

TEST_CASE("a hard link planted as the lock file is refused and its target left untouched",
          "[files]") {
  FilesTestDir dir;
  const std::string victim = dir.file("victim");
  put(victim, "precious");
  REQUIRE(::link(victim.c_str(), dir.file(".a.h5.lock").c_str()) == 0);
  REQUIRE_THROWS_WITH(io::OutputLock(dir.file("a.h5")),
                      Contains(dir.file(".a.h5.lock")) && Contains("has 2 names (hard links)"));
  REQUIRE(contents(victim) == "precious");
  REQUIRE(fs::exists(dir.file(".a.h5.lock")));  // not ours to remove
}

TEST_CASE("a lock file left behind is replaced by a file of this run, never written into",
          "[files]") {
  FilesTestDir dir;
  const std::string lock = dir.file(".a.h5.lock");
  put(lock, "precious");
  const base::UniqueFd old(::open(lock.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(old.valid());
  io::OutputLock mine(dir.file("a.h5"));
  REQUIRE(contents(lock) == fmt::format("{}\n", ::getpid()));
  char text[16] = {};
  REQUIRE(::pread(old.get(), text, sizeof text, 0) == 8);  // the old file, unchanged
  REQUIRE(std::string(text) == "precious");
  struct stat by_fd, by_name;
  REQUIRE(::fstat(old.get(), &by_fd) == 0);
  REQUIRE(::stat(lock.c_str(), &by_name) == 0);
  REQUIRE(by_fd.st_ino != by_name.st_ino);
}

TEST_CASE("an input's name is escaped in every error about it", "[files]") {
  FilesTestDir dir;
  const std::string name = dir.file("d\x1b]0;pwned\x07\x1b[2J.txt");  // a title, a clear
  const auto escaped = [](const std::function<void()>& call) {
    std::string message;
    try {
      call();
    } catch (const std::exception& e) {
      message = e.what();
    }
    REQUIRE_THAT(message, Contains("d\\x1b]0;pwned\\x07\\x1b[2J.txt"));
    REQUIRE(message.find('\x1b') == std::string::npos);
  };
  escaped([&] { base::read_input_file(name, "data file"); });  // missing
  escaped([&] { base::regular_file_size(name, "data file"); });
  fs::create_directory(name);
  escaped([&] { base::read_input_file(name, "data file"); });  // not a file
  fs::remove(name);
  put(name, "hello");
  escaped([&] { base::read_input_file(name, "data file", 2); });  // too large
}

TEST_CASE("input files that are folders FIFOs or devices are refused without blocking", "[files]") {
  FilesTestDir dir;
  const std::string fifo = dir.file("fifo.txt");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directory(dir.file("folder"));
  const std::string text = dir.file("text.txt");
  put(text, "hello");
  fs::create_symlink(text, dir.file("link.txt"));
  AlarmScope no_hang(20);

  REQUIRE_THROWS_WITH(base::read_input_file(fifo, "data file"),
                      fmt::format("data file '{}' is not a regular file (a FIFO)", fifo));
  REQUIRE_THROWS_WITH(base::read_input_file("/dev/zero", "data file"),
                      "data file '/dev/zero' is not a regular file (a character device)");
  REQUIRE_THROWS_WITH(base::read_input_file(dir.file("folder"), "config file"),
                      Contains("config file") && Contains("is not a regular file (a folder)"));
  REQUIRE_THROWS_WITH(base::regular_file_size("/dev/zero", "data file"),
                      Contains("(a character device)"));
  REQUIRE_THROWS_WITH(base::regular_file_size(fifo, "data file"), Contains("(a FIFO)"));
  REQUIRE_THROWS_WITH(base::read_input_file(fifo, "file"), Contains(fifo) && Contains("(a FIFO)"));
  REQUIRE_THROWS_WITH(base::read_input_file(dir.file("missing.txt"), "data file"),
                      Contains("data file '" + dir.file("missing.txt") + "'") &&
                          Contains("No such file or directory"));

  REQUIRE(base::read_input_file(text, "data file") == "hello");
  REQUIRE(base::read_input_file(dir.file("link.txt"), "data file") == "hello");  // links are fine
  REQUIRE(base::regular_file_size(text, "data file") == 5);
  REQUIRE(base::read_input_file(text, "file") == "hello");
  REQUIRE(base::read_input_file(text, "config file", 5) == "hello");
  REQUIRE_THROWS_WITH(base::read_input_file(text, "config file", 4),
                      Contains("config file") && Contains("is 5 bytes, more than the 4 bytes"));
  put(dir.file("empty.txt"), "");
  REQUIRE(base::read_input_file(dir.file("empty.txt"), "data file").empty());
}

TEST_CASE("an input is read to its end, not to the size it states, under its cap", "[files]") {
  // /proc files state a size of 0
  const std::string status = base::read_input_file("/proc/self/status", "status file");
  REQUIRE_THAT(status, Contains("Umask:"));
  REQUIRE_THROWS_WITH(
      base::read_input_file("/proc/self/status", "status file", 10),
      Contains("status file '/proc/self/status' is") && Contains("more than the 10 bytes allowed"));
}

TEST_CASE("a name in a folder is opened only as a regular file and never through a link",
          "[files]") {
  FilesTestDir dir;
  put(dir.file("text.txt"), "hello");
  fs::create_symlink(dir.file("text.txt"), dir.file("link.txt"));
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  AlarmScope no_hang(20);
  const base::UniqueFd folder(::open(dir.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st;
  REQUIRE(base::open_regular("text.txt", "'text.txt'", &st, folder.get()).valid());
  REQUIRE(st.st_size == 5);
  auto kind_of_refusal = [&](const std::string& name) {
    try {
      base::open_regular(name, "'" + name + "'", &st, folder.get());
    } catch (const base::FileError& e) {
      return e.kind == base::FileError::Kind::not_regular ? base::file_kind(e.mode) : e.what();
    }
    return std::string("opened");
  };
  REQUIRE(kind_of_refusal("link.txt") == "a symbolic link");
  REQUIRE(kind_of_refusal("fifo") == "a FIFO");
  // without a folder, a link to a regular file is followed (a user's input)
  REQUIRE(base::open_regular(dir.file("link.txt"), "'link.txt'", &st).valid());
}

TEST_CASE("exclusive creation makes a new file under a fresh name and never opens one", "[files]") {
  FilesTestDir dir;
  const base::UniqueFd folder(::open(dir.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string a, b;
  const base::UniqueFd fa(base::create_exclusive(folder.get(), ".x.partial-", O_WRONLY, 0600, &a));
  const base::UniqueFd fb(base::create_exclusive(folder.get(), ".x.partial-", O_WRONLY, 0600, &b));
  REQUIRE(fa.valid());
  REQUIRE(fb.valid());
  REQUIRE(a != b);
  REQUIRE(a.rfind(fmt::format(".x.partial-{}-", ::getpid()), 0) == 0);
  REQUIRE(a.size() <= std::string(".x.partial-").size() + base::kExclusiveSuffixBytes);
  REQUIRE(fs::is_regular_file(dir.file(a)));
  // a missing folder: -1 and the errno that says so
  std::string none;
  REQUIRE(base::create_exclusive(AT_FDCWD, dir.file("missing/.x-"), O_WRONLY, 0600, &none) == -1);
  REQUIRE(errno == ENOENT);
  REQUIRE(none.empty());
}

TEST_CASE("an append output is opened safely and never through a link", "[files]") {
  FilesTestDir dir;
  AlarmScope no_hang(20);

  SECTION("appends to a regular file created with 0666 less the umask") {
    UmaskScope scope(027);
    const std::string path = dir.file("m.jsonl");
    for (const char* line : {"a\n", "b\n"}) {
      const int fd = io::open_append_output(path, "metrics file");
      REQUIRE(::write(fd, line, 2) == 2);
      REQUIRE((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
      REQUIRE((::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
      REQUIRE((::fcntl(fd, F_GETFL) & O_APPEND) != 0);
      ::close(fd);
    }
    REQUIRE(contents(path) == "a\nb\n");
    REQUIRE(permission_bits(path) == 0640);
  }
  SECTION("a symbolic link is never followed") {
    put(dir.file("victim"), "precious");
    fs::create_symlink(dir.file("victim"), dir.file("link.jsonl"));
    fs::create_symlink(dir.file("nowhere"), dir.file("dangling.jsonl"));
    for (const char* name : {"link.jsonl", "dangling.jsonl"}) {
      REQUIRE_THROWS_WITH(
          io::open_append_output(dir.file(name), "metrics file"),
          Contains(fmt::format("metrics file '{}' is a symbolic link", dir.file(name))));
    }
    REQUIRE(contents(dir.file("victim")) == "precious");
    REQUIRE_FALSE(fs::exists(dir.file("nowhere")));
  }
  SECTION("a FIFO a device a folder or a missing folder is refused by name") {
    REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
    fs::create_directory(dir.file("folder"));
    REQUIRE_THROWS_WITH(io::open_append_output(dir.file("fifo"), "metrics file"),
                        Contains("is not a regular file (a FIFO)"));
    REQUIRE_THROWS_WITH(io::open_append_output("/dev/null", "metrics file"),
                        "metrics file '/dev/null' is not a regular file (a character device)");
    REQUIRE_THROWS_WITH(io::open_append_output(dir.file("folder"), "metrics file"),
                        Contains("(a folder)"));
    REQUIRE_THROWS_WITH(io::open_append_output(dir.file("no/m.jsonl"), "metrics file"),
                        Contains("no/m.jsonl") && Contains("No such file or directory"));
  }
}
