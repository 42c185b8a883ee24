// Config files (--config FILE): a value may hold '#' and ';' when quoted, and an option that
// collects values (report's --metrics, sample's --stop, prepare's --data) may repeat, in the
// file and on the command line.
#include <catch2/catch.hpp>

#include "cli/options.h"
#include "support.h"

using ag_test::TempDir;
using Catch::Matchers::Contains;

namespace {

namespace po = cli::po;

// Options shaped like the commands': one value each, and ones that collect values.
struct Parsed {
  std::string prompt, out;
  int64_t steps = 0;
  std::vector<std::string> stops, data;
};

po::options_description options_of(Parsed& p) {
  po::options_description desc("test options");
  auto add = desc.add_options();
  add("config", po::value<std::string>(), "read options from an INI file");
  add("prompt", po::value(&p.prompt), "text");
  add("out", po::value(&p.out), "a file");
  add("steps", po::value(&p.steps), "a count");
  add("stop", po::value(&p.stops)->composing(), "repeatable");
  add("data", po::value(&p.data)->multitoken()->composing(), "repeatable, several at once");
  return desc;
}

Parsed parse(const std::vector<std::string>& args) {
  Parsed p;
  const auto desc = options_of(p);
  cli::parse_options(args, desc);
  return p;
}

std::string config_error_of(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const cli::UsageError& e) {
    return e.what();
  }
  return "(it parsed)";
}

}  // namespace

TEST_CASE("a quoted config value keeps its hash and semicolon characters") {
  TempDir dir;
  const std::string cfg =
      dir.write("q.cfg",
                "# a comment line\n"
                "; another\n"
                "\n"
                "prompt = \"Act 1 # Scene 2; enter \\\"Hamlet\\\" \\\\ exit\"  # why\n"
                "out = \"run#2.h5\";why\n"
                "steps = 5 ; five, as before\n");
  const Parsed p = parse({"--config", cfg});
  REQUIRE(p.prompt == "Act 1 # Scene 2; enter \"Hamlet\" \\ exit");
  REQUIRE(p.out == "run#2.h5");
  REQUIRE(p.steps == 5);
}

TEST_CASE("an unquoted config value still ends at a comment as before") {
  TempDir dir;
  REQUIRE(parse({"--config", dir.write("a.cfg", "prompt = to be # or not\n")}).prompt == "to be");
  REQUIRE(parse({"--config", dir.write("b.cfg", "prompt = say \"hi\" there\n")}).prompt ==
          "say \"hi\" there");  // a quote inside a value is a character like another
  REQUIRE(parse({"--config", dir.write("c.cfg", "prompt = \"\"\n")}).prompt.empty());
  REQUIRE(parse({"--config", dir.write("d.cfg", "prompt = C:\\\\data\\\\x\n")}).prompt ==
          "C:\\\\data\\\\x");  // backslashes escape only inside quotes
}

TEST_CASE("a config value quoted badly is named with its file and line") {
  TempDir dir;
  REQUIRE(config_error_of(
              {"--config", dir.write("open.cfg", "steps = 1\nprompt = \"never closed # x\n")}) ==
          dir.file("open.cfg") + ":2: the value's opening quote is never closed");
  REQUIRE(config_error_of({"--config", dir.write("after.cfg", "prompt = \"ok\" junk\n")}) ==
          dir.file("after.cfg") + ":1: 'junk' after the value's closing quote");
  REQUIRE_THAT(config_error_of({"--config", dir.write("hash.cfg", "steps # = 5\n")}),
               Contains("hash.cfg:1: expected 'key = value', got 'steps'"));
}

TEST_CASE("an option that collects values repeats in a config file and on the command line") {
  TempDir dir;
  const std::string cfg =
      dir.write("r.cfg", "stop = END\nstop = \"a;b\"\ndata = one.txt\ndata = two words.txt\n");
  const Parsed from_file = parse({"--config", cfg});
  REQUIRE(from_file.stops == std::vector<std::string>{"END", "a;b"});
  REQUIRE(from_file.data == std::vector<std::string>{"one.txt", "two words.txt"});
  // given twice on the command line, both are kept (not the last alone)
  REQUIRE(parse({"--data", "a.txt", "--data", "b.txt", "c.txt"}).data ==
          std::vector<std::string>{"a.txt", "b.txt", "c.txt"});
  // the command line's values, then the file's
  REQUIRE(parse({"--stop", "x", "--config", cfg, "--stop", "y"}).stops ==
          std::vector<std::string>{"x", "y", "END", "a;b"});
  // an option that takes one value still may not be set twice in a file
  REQUIRE(
      config_error_of({"--config", dir.write("twice.cfg", "stop = a\nsteps = 1\nsteps = 2\n")}) ==
      dir.file("twice.cfg") + ":3: 'steps' is already set on line 2");
}
