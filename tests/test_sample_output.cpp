// What `sample` prints (cli/sample_output.h): stop texts across tokens, characters split
// over tokens never cut in half (nor their escapes), samples in order, failed writes.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <sstream>

#include "base/utf8.h"
#include "cli/sample_output.h"
#include "support.h"

namespace {

// Everything a writer wrote to a file, after `feed` ran on it.
template <typename Feed>
std::string sample_written(int64_t samples, std::vector<std::string> stops, bool escape,
                           const std::string& prompt, Feed feed) {
  ag_test::TempDir dir;
  const std::string path = dir.file("out.txt");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  {
    cli::SampleWriter out(fd, samples, std::move(stops), escape, prompt);
    feed(out);
    out.finish();
    CHECK(out.failed() == 0);
  }
  ::close(fd);
  std::stringstream s;
  s << std::ifstream(path, std::ios::binary).rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a character split over tokens is written whole and escaped as a whole", "[sample]") {
  // é split in two, an escape sequence, a byte that starts no character, a 4-byte emoji cut
  // in three: escaped token by token, the output is printable() of the whole text
  const std::vector<std::string> tokens{"caf", "\xC3",     "\xA9 ", "\x1b[31m", "\xE6",
                                        "a",   "\xF0\x9F", "\x98",  "\x80",     "\xE2\x80"};
  std::string whole = "p";
  for (const auto& t : tokens) whole += t;
  const std::string escaped = sample_written(1, {}, true, "p", [&](cli::SampleWriter& out) {
    for (const auto& t : tokens) out.add(0, t);
  });
  CHECK(escaped == base::printable(whole, true) + "\n");
  CHECK(escaped.find("\\x1b[31m") != std::string::npos);
  const std::string raw = sample_written(1, {}, false, "p", [&](cli::SampleWriter& out) {
    for (const auto& t : tokens) out.add(0, t);
  });
  CHECK(raw == whole + "\n");
}

TEST_CASE("a stop text ends a sample even when it spans tokens", "[sample]") {
  std::vector<bool> accepted;
  const std::string out = sample_written(1, {"o w", "zz"}, false, ">", [&](cli::SampleWriter& w) {
    for (const char* t : {"hel", "lo w", "orld"}) accepted.push_back(w.add(0, t));
  });
  CHECK(out == ">hell\n");
  CHECK(accepted == std::vector<bool>{true, false, false});
  // a prefix of a stop text that goes another way is written after all
  CHECK(sample_written(1, {"lo!"}, false, "", [](cli::SampleWriter& w) {
          w.add(0, "hel");
          w.add(0, "lo");
          w.add(0, " x");
        }) == "hello x\n");
}

TEST_CASE("samples are written in order and whole whatever order their tokens come in",
          "[sample]") {
  const std::string out = sample_written(3, {"."}, false, "P:", [](cli::SampleWriter& w) {
    w.add(1, "b1 ");
    w.add(2, "c1 ");
    w.add(0, "a1 ");
    w.add(2, "c2.");  // sample 2 ends before 0 and 1
    w.add(1, "b2 ");
    w.add(0, "a2");
  });
  CHECK(out ==
        "--- sample 1 of 3 ---\nP:a1 a2\n--- sample 2 of 3 ---\nP:b1 b2 \n"
        "--- sample 3 of 3 ---\nP:c1 c2\n");
}

TEST_CASE("a failed write ends every sample and says why", "[sample]") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  ::close(fds[0]);  // nobody reads: writes fail with EPIPE (SIGPIPE ignored here)
  auto old = std::signal(SIGPIPE, SIG_IGN);
  cli::SampleWriter out(fds[1], 2, {}, false, "x");
  CHECK_FALSE(out.add(0, "y"));
  CHECK_FALSE(out.add(1, "z"));
  CHECK(out.failed() == EPIPE);
  std::signal(SIGPIPE, old);
  ::close(fds[1]);
}

TEST_CASE("a sample the generator ends is written whole and the next goes on live", "[sample]") {
  // sample 0 ends at its end-of-text token (end_sample) while a stop text may still begin
  // in what it holds: that is written, then sample 1's kept text and the rest of it
  const std::string out = sample_written(2, {"##"}, false, "", [&](cli::SampleWriter& w) {
    CHECK(w.add(0, "ab#"));
    CHECK(w.add(1, "cd"));
    w.end_sample(0);
    w.end_sample(0);  // a second time: nothing more
    CHECK_FALSE(w.add(0, "zz"));
    CHECK(w.add(1, "e"));
  });
  CHECK(out == "--- sample 1 of 2 ---\nab#\n--- sample 2 of 2 ---\ncde\n");
}
