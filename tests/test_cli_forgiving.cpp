// A command line that forgives: a bare argument is a command's checkpoint,
// --help shows defaults as typed, an error line says error once, --version names the
// build, and a stop names the signal that asked for it. The whole commands are exercised by
// tests/cli/forgiving_test.sh.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <sstream>
#include <thread>

#include "base/error_text.h"
#include "cli/cli.h"
#include "cli/option_aliases.h"
#include "cli/options.h"
#include "train/stop_reason.h"
#include "train/stop_signals.h"

using Catch::Matchers::Contains;

TEST_CASE("an error line says error once: a library's own prefix is dropped") {
  REQUIRE(base::without_error_prefix("filesystem error: cannot create directories: x") ==
          "cannot create directories: x");
  REQUIRE(base::without_error_prefix("Error: error: twice") == "twice");
  REQUIRE(base::without_error_prefix("the error: stays inside") == "the error: stays inside");
  REQUIRE(base::without_error_prefix("") == "");
}

TEST_CASE("a bare argument is the value of the command's positional option") {
  std::string checkpoint;
  int64_t tokens = 0;
  cli::po::options_description desc;
  desc.add_options()("checkpoint", cli::po::value(&checkpoint))(
      "tokens", cli::po::value(&tokens)->default_value(200));
  cli::parse_options({"run.h5", "--tokens", "5"}, desc, "checkpoint");
  REQUIRE(checkpoint == "run.h5");
  REQUIRE(tokens == 5);
  REQUIRE_THROWS_WITH(cli::parse_options({"a.h5", "b.h5"}, desc, "checkpoint"),
                      Contains("more than one value without an option name: only the checkpoint"));
  REQUIRE_THROWS_WITH(cli::parse_options({"a.h5"}, desc),
                      Contains("a value without an option name: every value follows its --option"));
}

TEST_CASE("a default is shown in --help as it would be typed") {
  double fraction = 0;
  cli::po::options_description desc;
  desc.add_options()("val-fraction", cli::value_with_default(&fraction, 0.1), "held out");
  std::ostringstream help;
  help << desc;
  REQUIRE_THAT(help.str(), Contains("(=0.1)"));
  REQUIRE(fraction == 0);  // shown, and stored only when the options are parsed
}

TEST_CASE("the version text names the commit, the compiler, the kernels and MPI") {
  const std::string v = cli::version_text();
  for (const char* field :
       {"attograd ", "\ncommit:   ", "\ncompiler: ", "\nBLAS:     OpenBLAS",
        "kernel in use: ", "\noneDNN:   ", "bfloat16 matmuls: ", "\nMPI:      "})
    REQUIRE_THAT(v, Contains(field));
}

TEST_CASE("a stop signal another process sent is named as it is, even in a distributed run") {
  const train::StopSignals stop;
  ::kill(::getpid(), SIGTERM);  // from this process, not from an MPI launcher (the parent)
  for (int i = 0; i < 500 && !train::StopSignals::requested(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  REQUIRE(train::StopSignals::requested());
  REQUIRE(train::stop_reason(false) == "SIGTERM");
  REQUIRE(train::stop_reason(true) == "SIGTERM");
  // the run's exit code says so, as a shell reports a process the signal ended
  REQUIRE(train::stopped_exit_code() == 128 + SIGTERM);
  REQUIRE(train::stop_signal_of(143) == SIGTERM);
  REQUIRE(train::stop_signal_of(130) == SIGINT);
  REQUIRE(train::stop_signal_of(2) == 0);
  REQUIRE(train::stop_signal_of(128 + SIGKILL) == 0);  // not a stop: nothing caught it
}

TEST_CASE("other tools' option names and near misses are answered with attograd's") {
  const std::vector<std::string> train = {
      "steps", "lr", "context-length", "batch-size", "grad-accum-steps", "d-model", "threads"};
  CHECK(cli::option_suggestion("--max_iters", train) ==
        " (did you mean '--steps'? max_iters is nanoGPT's name for it)");
  CHECK(cli::option_suggestion("--learning_rate", train) ==
        " (did you mean '--lr'? learning_rate is nanoGPT's name for it)");
  CHECK(cli::option_suggestion("--per_device_train_batch_size", train) ==
        " (did you mean '--batch-size'? per_device_train_batch_size is Hugging Face's name "
        "for it)");
  CHECK(cli::option_suggestion("-c", train) ==
        " (did you mean '--context-length'? c is llama.cpp's name for it)");
  CHECK(cli::option_suggestion("--CTX-SIZE", train) ==
        " (did you mean '--context-length'? ctx_size is llama.cpp's name for it)");
  // num_train_epochs: --epochs where the command has it, else --steps
  CHECK_THAT(cli::option_suggestion("--num_train_epochs", train), Contains("'--steps'"));
  CHECK_THAT(cli::option_suggestion("--num_train_epochs", {"epochs", "steps"}),
             Contains("'--epochs'"));
  // an alias whose option the command lacks says nothing of it
  CHECK(cli::option_suggestion("--temp", train) == "");
  CHECK(cli::option_suggestion("--batch_size", train) == " (did you mean '--batch-size'?)");
  CHECK(cli::option_suggestion("--stpes", train) == " (did you mean '--steps'?)");
  CHECK(cli::option_suggestion("--zzzzzz", train) == "");
  for (const cli::OptionAlias& alias : cli::option_aliases()) {
    INFO(alias.name);
    CHECK(std::string(alias.option).find('_') == std::string::npos);  // attograd's spelling
  }
}
