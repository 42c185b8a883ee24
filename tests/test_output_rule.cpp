// io/output_rule.h, base/partial_outputs.h and base::write_folder_atomically: the one rule
// every writing command follows, tried as a careless user and a hostile neighbour would: an
// output over an input (inside an input folder too), over what someone had, over a folder
// holding an input, beside a running writer; and what is left after a fatal signal.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/abandoned_partials.h"
#include "base/atomic_file.h"
#include "base/partial_outputs.h"
#include "base/posix_file.h"
#include "io/output_rule.h"
#include "support.h"

using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using io::OutputKind;

constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\nrest";

void claim(const std::vector<io::Output>& outputs, const io::NamedPaths& inputs,
           bool overwrite = false) {
  io::ClaimedOutputs held(outputs, inputs, {.overwrite = overwrite});
}

std::vector<std::string> names_in(const fs::path& folder) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(folder)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Runs body in a forked child and returns its wait status.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// The PID of a child that has exited and been reaped: a writer that is gone.
pid_t pid_of_a_process_gone() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace

TEST_CASE("an existing checkpoint or model file is replaced only with --overwrite", "[output]") {
  ag_test::TempDir dir;
  const std::string ckpt = dir.write("run.h5", kHdf5Signature);
  const std::string gguf = dir.write("m.gguf", "GGUF....");
  const std::string input = dir.write("in.h5", "x");
  REQUIRE_THROWS_WITH(claim({{"--out", ckpt, OutputKind::checkpoint}}, {{"--checkpoint", input}}),
                      Contains("--out '" + ckpt + "' already holds an HDF5 file") &&
                          Contains("give --overwrite to replace it"));
  REQUIRE_THROWS_WITH(claim({{"--out", gguf, OutputKind::model_file}}, {}),
                      Contains("already holds a GGUF model file"));
  REQUIRE_NOTHROW(claim({{"--out", ckpt, OutputKind::checkpoint}}, {}, true));
  REQUIRE_NOTHROW(claim({{"--out", gguf, OutputKind::model_file}}, {}, true));
  // an output named after another option's value says which option moves it
  REQUIRE_THROWS_WITH(
      claim({{"--keep-best", ckpt, OutputKind::checkpoint, "--out"}}, {}),
      Contains("--keep-best '" + ckpt + "' already holds") && Contains("or choose another --out"));
  // nothing there, or nothing in it: nothing to lose
  REQUIRE_NOTHROW(claim({{"--out", dir.file("new.h5"), OutputKind::checkpoint}}, {}));
  REQUIRE_NOTHROW(claim({{"--out", dir.write("empty.h5", ""), OutputKind::checkpoint}}, {}));
}

TEST_CASE("a page attograd wrote is replaced freely and any other file only with --overwrite",
          "[output]") {
  ag_test::TempDir dir;
  const std::string page = dir.write(
      "r.html", "<!DOCTYPE html>\n<html lang=\"en\"><head><title>attograd report: x</title>");
  const std::string svg = dir.write("m.svg", "<svg class=\"heat-map\" id=\"map-l0h0\" xmlns=");
  const std::string notes = dir.write("notes.html", "<!DOCTYPE html>\n<html><title>mine</title>");
  REQUIRE_NOTHROW(claim({{"--out", page, OutputKind::page}}, {}));
  REQUIRE_NOTHROW(claim({{"--svg", svg, OutputKind::page}}, {}));
  REQUIRE_THROWS_WITH(claim({{"--out", notes, OutputKind::page}}, {}),
                      Contains("already holds a file of"));
  REQUIRE_NOTHROW(claim({{"--out", notes, OutputKind::page}}, {}, true));
  // a checkpoint where a page is asked for is never a page
  const std::string ckpt = dir.write("run.h5", kHdf5Signature);
  REQUIRE_THROWS_WITH(claim({{"--report", ckpt, OutputKind::page}}, {}),
                      Contains("already holds an HDF5 file"));
}

TEST_CASE("an output that is a file of an input folder is refused even with --overwrite",
          "[output]") {
  ag_test::TempDir dir;
  const std::string model = (dir.path / "model").string();
  const std::string index = dir.write("model/model.safetensors.index.json", "{}");
  const std::string shard = dir.write("model/weights-part-1.bin", "x");
  for (const std::string& out : {index, shard})
    REQUIRE_THROWS_WITH(claim({{"--out", out, OutputKind::checkpoint}}, {{"PATH", model}}, true),
                        Contains("of PATH '" + model + "', which this command reads"));
  // a hard link elsewhere to one of its files is that file
  fs::create_hard_link(shard, dir.file("elsewhere.h5"));
  REQUIRE_THROWS_WITH(
      claim({{"--out", dir.file("elsewhere.h5"), OutputKind::checkpoint}}, {{"PATH", model}}, true),
      Contains("'weights-part-1.bin' of PATH"));
  // a new file in the folder reads nothing and replaces nothing
  REQUIRE_NOTHROW(
      claim({{"--out", dir.file("model/imported.h5"), OutputKind::checkpoint}}, {{"PATH", model}}));
}

TEST_CASE("a folder output is replaced only with --overwrite, holding files alone and no input",
          "[output]") {
  ag_test::TempDir dir;
  const std::string out = (dir.path / "hf").string();
  dir.write("hf/config.json", "{}");
  REQUIRE_THROWS_WITH(claim({{"--out", out, OutputKind::folder}}, {}),
                      Contains("already holds a folder that is not empty"));
  REQUIRE_NOTHROW(claim({{"--out", out, OutputKind::folder}}, {}, true));
  const std::string ckpt = dir.write("hf/run.h5", kHdf5Signature);
  REQUIRE_THROWS_WITH(claim({{"--out", out, OutputKind::folder}}, {{"--checkpoint", ckpt}}, true),
                      Contains("holds --checkpoint '" + ckpt + "', which this command reads"));
  fs::remove(ckpt);
  fs::create_directories(dir.path / "hf" / "notes");
  REQUIRE_THROWS_WITH(claim({{"--out", out, OutputKind::folder}}, {}, true),
                      Contains("holds 'notes' (a folder)") && Contains("a folder of files only"));
  fs::create_directories(dir.path / "empty");
  REQUIRE_NOTHROW(claim({{"--out", (dir.path / "empty").string(), OutputKind::folder}}, {}));
  REQUIRE_THROWS_WITH(claim({{"--out", dir.write("file", "x"), OutputKind::folder}}, {}, true),
                      Contains("is a regular file, not a folder"));
}

TEST_CASE("an output being written by another command is refused naming its PID", "[output]") {
  ag_test::TempDir dir;
  const std::string out = dir.file("run.h5");
  io::ClaimedOutputs first({{"--out", out, OutputKind::run}}, {}, {});
  REQUIRE_THROWS_WITH(claim({{"--out", out, OutputKind::checkpoint}}, {}),
                      Contains(fmt::format("(PID {})", ::getpid())));
  // a rank that does not write takes no lock
  REQUIRE_NOTHROW(io::ClaimedOutputs({{"--out", out, OutputKind::run}}, {}, {.lock = false}));
}

TEST_CASE("a fatal signal removes what was begun, lock files included, and still ends the process",
          "[output]") {
  ag_test::TempDir dir;
  const std::string file = dir.write(".run.h5.partial-1-abcdef", "half");
  const std::string folder = (dir.path / ".hf.partial-1-abcdef").string();
  dir.write(".hf.partial-1-abcdef/config.json", "{}");
  dir.write(".hf.partial-1-abcdef/.model.safetensors.partial-1-xyzabc", "half");
  const std::string kept = dir.write("kept.txt", "mine");
  const int status = in_child([&] {
    ::signal(SIGTERM, SIG_DFL);  // as a command starts (Catch2 has a handler of its own)
    base::remove_partials_on_fatal_signals();
    base::PartialPath a(file);
    base::PartialPath b(folder, base::PartialPath::Kind::folder);
    base::PartialPath released(kept);
    released.release();
    ::raise(SIGTERM);
    ::_exit(3);  // not reached: the signal ends the process
  });
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGTERM);
  REQUIRE(names_in(dir.path) == std::vector<std::string>{"kept.txt"});
}

TEST_CASE("an ignored signal stays ignored and removes nothing", "[output]") {
  ag_test::TempDir dir;
  const std::string file = dir.write(".run.h5.partial-1-abcdef", "half");
  const int status = in_child([&] {
    ::signal(SIGHUP, SIG_IGN);  // nohup
    base::remove_partials_on_fatal_signals();
    base::PartialPath a(file);
    ::raise(SIGHUP);
    ::_exit(0);
  });
  REQUIRE(WIFEXITED(status));
  REQUIRE(fs::exists(file));
}

TEST_CASE("a folder written whole replaces the old one in one step and leaves nothing beside",
          "[output]") {
  ag_test::TempDir dir;
  const std::string out = (dir.path / "hf").string();
  const auto write_one = [](const std::string& text) {
    return [text](const std::string& folder) { std::ofstream(folder + "/config.json") << text; };
  };
  base::write_folder_atomically(out, write_one("first"));
  REQUIRE_THROWS_WITH(base::write_folder_atomically(out, write_one("second")),
                      Contains("a folder that is not empty"));
  base::write_folder_atomically(out, write_one("second"), /*replace=*/true);
  REQUIRE(base::read_input_file(out + "/config.json", "config") == "second");
  REQUIRE(names_in(dir.path) == std::vector<std::string>{"hf"});
  // a failed write leaves the old folder and nothing else
  REQUIRE_THROWS_WITH(
      base::write_folder_atomically(
          out, [](const std::string&) { throw std::runtime_error("disk full"); }, true),
      Contains("disk full"));
  REQUIRE(base::read_input_file(out + "/config.json", "config") == "second");
  REQUIRE(names_in(dir.path) == std::vector<std::string>{"hf"});
}

TEST_CASE(
    "a partial folder of a writer that is gone is removed by the next writer, a live one's "
    "kept",
    "[output]") {
  ag_test::TempDir dir;
  const pid_t gone = pid_of_a_process_gone();
  const std::string stale = fmt::format(".hf.partial-{}-abcdef", gone);
  const std::string live = fmt::format(".hf.partial-{}-abcdef", ::getppid());
  dir.write(stale + "/model.safetensors", "half");
  dir.write(live + "/model.safetensors", "half");
  base::write_folder_atomically((dir.path / "hf").string(), [](const std::string&) {});
  REQUIRE(names_in(dir.path) == std::vector<std::string>{live, "hf"});
}

TEST_CASE(
    "a folder holding only the partial files of writers that are gone is written without "
    "--overwrite; a live writer's or a locked one's is something",
    "[output]") {
  ag_test::TempDir dir;
  const pid_t gone = pid_of_a_process_gone();
  // a prepare killed outright (SIGKILL, the OOM killer) leaves its folder holding these
  const std::string out = (dir.path / "prep").string();
  dir.write(fmt::format("prep/.train.bin.partial-{}-abcdef", gone), "half");
  dir.write(fmt::format("prep/.meta.json.partial-{}-ghijkl", gone), "half");
  REQUIRE(base::is_abandoned_partial(fmt::format("{}/.train.bin.partial-{}-abcdef", out, gone)));
  REQUIRE_NOTHROW(claim({{"--out", out, OutputKind::folder}}, {}));
  // the next folder writer removes them and writes
  base::write_folder_atomically(out, [](const std::string& f) { std::ofstream(f + "/a") << "a"; });
  REQUIRE(names_in(out) == std::vector<std::string>{"a"});
  // a file of a writer still running is its, as is one locked by a writer whose PID means
  // nothing here (another PID namespace)
  const std::string live =
      dir.write(fmt::format("busy/.train.bin.partial-{}-abcdef", ::getppid()), "");
  REQUIRE_FALSE(base::is_abandoned_partial(live));
  REQUIRE_THROWS_WITH(claim({{"--out", (dir.path / "busy").string(), OutputKind::folder}}, {}),
                      Contains("already holds a folder that is not empty"));
  const std::string locked = dir.write(fmt::format("held/.train.bin.partial-{}-abcdef", gone), "");
  const base::UniqueFd fd(::open(locked.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(::flock(fd.get(), LOCK_EX) == 0);
  REQUIRE_FALSE(base::is_abandoned_partial(locked));
  // a name of the pattern alone is not enough: anything else in the folder is someone's
  dir.write("prep2/notes.txt", "mine");
  dir.write(fmt::format("prep2/.train.bin.partial-{}-abcdef", gone), "half");
  REQUIRE_THROWS_WITH(claim({{"--out", (dir.path / "prep2").string(), OutputKind::folder}}, {}),
                      Contains("already holds a folder that is not empty"));
}
