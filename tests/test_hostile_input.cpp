// What a file or an option from someone else can do to a run, seen from train/ and data/:
// configs whose numbers do not fit their fields, configs that lie about their shapes,
// names with terminal escapes, cgroup limits, signals and outputs that fail.
#include <omp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "cli/cli.h"
#include "cli/options.h"
#include "data/identity.h"
#include "support.h"
#include "train/console.h"
#include "train/memory_plan.h"
#include "train/stop_signals.h"
#include "train/train.h"

using Catch::Matchers::Contains;

namespace {

namespace fs = std::filesystem;

using ag_test::TempDir;

train::RunConfig config_from(const std::string& json) {
  return train::RunConfig::from_json(nlohmann::json::parse(json));
}

}  // namespace

TEST_CASE("config numbers that do not fit their field are refused and never cast") {
  REQUIRE_THROWS_WITH(config_from(R"({"d_model": 16.9})"),
                      Contains("'d_model'") && Contains("integer"));
  REQUIRE_THROWS_WITH(config_from(R"({"steps": 1e19})"), Contains("'steps'") && Contains("1e+19"));
  REQUIRE_THROWS_WITH(config_from(R"({"steps": 18446744073709551615})"), Contains("'steps'"));
  REQUIRE_THROWS_WITH(config_from(R"({"seed": -1})"),
                      Contains("'seed'") && Contains("non-negative"));
  REQUIRE_THROWS_WITH(config_from(R"({"n_layers": "4"})"), Contains("'n_layers'"));
  REQUIRE_THROWS_WITH(config_from(R"({"qkv_bias": 1})"),
                      Contains("'qkv_bias'") && Contains("true or false"));
  REQUIRE_THROWS_WITH(config_from(R"({"lr": "fast"})"),
                      Contains("'lr'") && Contains("finite number"));
  REQUIRE_THROWS_WITH(config_from(R"({"data": 5})"), Contains("'data'") && Contains("string"));
  // whole numbers written as floats are what they say
  REQUIRE(config_from(R"({"d_model": 64.0, "seed": 18446744073709551615})").model.d_model == 64);
  REQUIRE(config_from(R"({"seed": 18446744073709551615})").seed == 18446744073709551615ULL);
}

TEST_CASE("non-finite hyperparameters are refused by name") {
  auto refused = [](auto set, const char* name) {
    train::RunConfig c;
    set(c);
    REQUIRE_THROWS_WITH(c.validate(), Contains(name));
  };
  refused([](auto& c) { c.min_lr = NAN; }, "min_lr");
  refused([](auto& c) { c.optimizer.weight_decay = INFINITY; }, "weight_decay");
  refused([](auto& c) { c.grad_clip = INFINITY; }, "grad_clip");
  refused([](auto& c) { c.lr = INFINITY; }, "lr");
  refused([](auto& c) { c.optimizer.eps = INFINITY; }, "eps");
  refused([](auto& c) { c.optimizer.momentum = NAN; }, "momentum");
}

TEST_CASE("the parameter shapes known from a config are those a GPT registers") {
  for (bool tie : {true, false}) {
    for (bool bias : {false, true}) {
      nn::GPTConfig cfg = ag_test::gpt_config(11, 8, 12, 3, 2, 0.0);
      cfg.tie_weights = tie, cfg.qkv_bias = bias, cfg.d_ff = 20;
      const nn::GPT model(cfg, 1);
      const auto params = model.named_parameters();
      const auto shapes = cfg.parameter_shapes();
      REQUIRE(shapes.size() == params.size());
      for (size_t i = 0; i < shapes.size(); ++i) {
        INFO(params[i].first);
        REQUIRE(shapes[i].first == params[i].first);
        REQUIRE(shapes[i].second == params[i].second.shape());
      }
    }
  }
}

TEST_CASE("a model from a checkpoint shares its weights and computes what the original does") {
  nn::GPTConfig small = ag_test::gpt_config(11, 8, 12, 3, 2, 0.0);
  nn::GPT original(small, 1);
  original.eval();
  io::Checkpoint ckpt;
  ckpt.source = "run.h5";
  for (const auto& [name, t] : original.named_parameters())
    ckpt.model.emplace_back(name, t.detach().clone());  // as a checkpoint's own tensors
  train::RunConfig cfg;
  cfg.model = small;
  ckpt.config = cfg.to_json();
  const auto model = train::model_from_checkpoint(ckpt);
  model->eval();
  const auto mine = model->named_parameters();
  REQUIRE(mine.size() == ckpt.model.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    INFO(mine[i].first);
    REQUIRE(mine[i].second.raw_data() == ckpt.model[i].second.raw_data());  // one copy
    REQUIRE(mine[i].second.requires_grad());
  }
  // the tied head reads the adopted embedding
  REQUIRE(model->head().streamed_weight().raw_data() == model->tok_emb->weight.raw_data());
  const ag::Tensor ids = ag::from_vector(std::vector<int64_t>{1, 4, 9, 2, 7}, {1, 5});
  ag::NoGradGuard no_grad;
  const auto a = original.forward(ids).logits.to_vector(),
             b = model->forward(ids).logits.to_vector();
  REQUIRE(a == b);
}

TEST_CASE("a checkpoint whose config lies about its shapes is refused before a model is built") {
  nn::GPTConfig small = ag_test::gpt_config(11, 8, 12, 3, 2, 0.0);
  const nn::GPT model(small, 1);
  io::Checkpoint ckpt;
  ckpt.source = "liar.h5";
  ckpt.model = model.named_parameters();
  train::RunConfig cfg;
  cfg.model = small;
  ckpt.config = cfg.to_json();
  REQUIRE(train::model_from_checkpoint(ckpt)->num_parameters() == model.num_parameters());
  // about 10^12 parameters if it were believed: refused at once, nothing allocated
  ckpt.config["d_model"] = 100002;
  ckpt.config["n_heads"] = 2;
  ckpt.config["n_layers"] = 8000;
  ckpt.config["d_ff"] = 0;
  REQUIRE_THROWS_WITH(
      train::model_from_checkpoint(ckpt),
      Contains("'liar.h5' disagrees with its own config") &&
          Contains("'tok_emb.weight' has shape [11, 12] in the file but [11, 100002]"));
  ckpt.config["d_model"] = 12, ckpt.config["n_heads"] = 3, ckpt.config["n_layers"] = 3;
  REQUIRE_THROWS_WITH(train::model_from_checkpoint(ckpt),
                      Contains("'blocks.2.ln1.weight' is missing"));
  ckpt.config["n_layers"] = 2;
  ckpt.model.emplace_back("extra\x1b]0;pwned\x07", ag::zeros({1}));
  REQUIRE_THROWS_WITH(train::model_from_checkpoint(ckpt),
                      Contains("the file has 'extra\\x1b]0;pwned\\x07'"));
}

TEST_CASE("the data identity is the SHA-256 of the bytes") {
  REQUIRE(data::text_identity("") ==
          "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  REQUIRE(data::text_identity("abc") ==
          "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("a cgroup memory limit lowers what the plan may use") {
  TempDir dir;
  const std::string root = dir.file("cg");
  SECTION("v2: the smallest limit of the group and its parents, less what is in use") {
    dir.write("cg/memory.max", "max\n");
    dir.write("cg/jobs/memory.max", "1000000000\n");
    dir.write("cg/jobs/memory.current", "0\n");
    dir.write("cg/jobs/run/memory.max", "max\n");
    dir.write("cg/jobs/run/memory.current", "300000000\n");
    dir.write("cg/jobs/run/memory.stat", "anon 200000000\ninactive_file 100000000\n");
    // the run's own group sets no limit; its parent allows 1 GB of which 0.2 GB is used
    // (the inactive page cache can be dropped)
    REQUIRE(train::cgroup_memory_available("0::/jobs/run\n", root) == 1000000000);
    dir.write("cg/jobs/memory.current", "200000000\n");
    REQUIRE(train::cgroup_memory_available("0::/jobs/run\n", root) == 800000000);
  }
  SECTION("v1: the memory controller's hierarchy, and a container's own root") {
    dir.write("cg/memory/memory.limit_in_bytes", "536870912\n");
    dir.write("cg/memory/memory.usage_in_bytes", "36870912\n");
    dir.write("cg/memory/memory.stat", "total_inactive_file 0\n");
    REQUIRE(train::cgroup_memory_available("4:memory:/docker/abc\n1:cpu:/\n", root) == 500000000);
  }
  SECTION("no limit anywhere") {
    dir.write("cg/memory.max", "max\n");
    REQUIRE(train::cgroup_memory_available("0::/\n", root) == -1);
    REQUIRE(train::cgroup_memory_available("", root) == -1);
  }
}

TEST_CASE("the memory plan counts the data and a checkpoint save") {
  train::RunConfig cfg;
  cfg.model.vocab_size = 65;
  const auto with = train::plan_memory(cfg, 1000, 5000);
  const auto without = train::plan_memory(cfg, 1000, 0);
  REQUIRE(with.total() - without.total() == 5000);
  // streamed: the same few MiB for a model of a thousand parameters and of a billion
  REQUIRE(with.checkpoint == train::kSaveBytes);
  REQUIRE(train::plan_memory(cfg, 1000000000, 0).checkpoint == train::kSaveBytes);
  REQUIRE(with.describe().find("data 5.0 kB") != std::string::npos);
  // before reading: at most one id a byte, 4 bytes each (char, byte), or the BPE encoder's
  // growing and split buffers of 4-byte ids
  REQUIRE(train::data_bytes_for_text(1000, data::TokenizerKind::chars) == 5000);
  REQUIRE(train::data_bytes_for_text(1000, data::TokenizerKind::bpe) ==
          1000 + 1000 * train::kBpeIdBufferBytes);
}

TEST_CASE("the memory plan counts what reading the text cost when it is more than is held") {
  train::RunConfig cfg;
  cfg.model.vocab_size = 65;
  // 1000 bytes of text read into 1000 two-byte ids: 3000 bytes at the peak, 2000 held
  const int64_t reading = train::text_reading_bytes(1000, 1000, 2, data::TokenizerKind::chars);
  REQUIRE(reading == 3000);
  const auto plan = train::plan_memory(cfg, 1000, 2000, 1, -1, reading);
  REQUIRE(plan.data == 3000);
  REQUIRE(plan.total() - train::plan_memory(cfg, 1000, 0).total() == 3000);
  REQUIRE(plan.describe().find("data 3.0 kB (reading the text; 2.0 kB held after)") !=
          std::string::npos);
  REQUIRE(train::text_reading_bytes(1000, 300, 2, data::TokenizerKind::bpe) ==
          1000 + 300 * train::kBpeIdBufferBytes);
}

TEST_CASE("config files take a byte-order mark and refuse a repeated key and a negative seed") {
  TempDir dir;
  train::RunConfig cfg;
  auto desc = cli::run_options(cfg);
  cli::parse_options({"--config", dir.write("bom.cfg", "\xEF\xBB\xBFsteps = 7\n")}, desc);
  REQUIRE(cfg.steps == 7);
  REQUIRE_THROWS_WITH(
      cli::parse_options({"--config", dir.write("twice.cfg", "lr = 1\nsteps = 2\nlr = 3\n")}, desc),
      Contains("twice.cfg:3") && Contains("'lr' is already set on line 1"));
  REQUIRE_THROWS_WITH(cli::parse_options({"--seed", "-1"}, desc),
                      Contains("--seed must be >= 0, got -1"));
  REQUIRE_THROWS_WITH(
      cli::parse_options({"--config", dir.write("neg.cfg", "corpus-seed = -3\n")}, desc),
      Contains("neg.cfg:1") && Contains("--corpus-seed must be >= 0"));
}

TEST_CASE("config and data that are not regular files are refused by name") {
  TempDir dir;
  train::RunConfig cfg;
  auto desc = cli::run_options(cfg);
  REQUIRE_THROWS_WITH(cli::parse_options({"--config", "/dev/zero"}, desc),
                      Contains("/dev/zero") && Contains("not a regular file"));
  REQUIRE_THROWS_WITH(cli::parse_options({"--config", dir.path.string()}, desc),
                      Contains(dir.path.string()));
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // opening it to read would block forever
  REQUIRE_THROWS_WITH(cli::parse_options({"--config", fifo}, desc), Contains("fifo"));
  cfg.data = fifo;
  REQUIRE_THROWS_WITH(train::data_bytes_of(cfg), Contains("fifo"));
}

namespace {

// Sends sig to this process, as kill and schedulers do, and waits until it was counted.
bool counted_after_kill(int sig, int count) {
  ::kill(::getpid(), sig);
  for (int i = 0; i < 2000 && train::StopSignals::count() < count; ++i) ::usleep(1000);
  return train::StopSignals::count() == count;
}

// Whether sig is blocked in the calling thread and in every thread of an OpenMP team.
bool blocked_in_team(int sig) {
  int blocked = 0, threads = 0;
#pragma omp parallel reduction(+ : blocked, threads)
  {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    blocked += sigismember(&now, sig);
    threads += 1;
  }
  return blocked == threads;
}

}  // namespace

TEST_CASE("stop signals are counted instead of ending the process") {
  {
    train::StopSignals guard;
    REQUIRE_FALSE(train::StopSignals::requested());
    REQUIRE(counted_after_kill(SIGHUP, 1));
    REQUIRE(train::StopSignals::first() == SIGHUP);
    std::raise(SIGPIPE);  // after a stop, a broken pipe is no second request
    REQUIRE(train::StopSignals::count() == 1);
    REQUIRE(counted_after_kill(SIGTERM, 2));
    REQUIRE(std::string(train::signal_name(train::StopSignals::first())) == "SIGHUP");
  }
  struct sigaction now;
  ::sigaction(SIGHUP, nullptr, &now);
  REQUIRE(now.sa_handler == SIG_DFL);              // restored when the run ends
  REQUIRE_FALSE(train::StopSignals::requested());  // the stop was that run's alone
}

TEST_CASE("stop signals never interrupt the threads that compute") {
  ag::set_num_threads(2);
  REQUIRE_FALSE(blocked_in_team(SIGINT));
  {
    train::StopSignals guard;
    // blocked in this thread and the OpenMP team: the guard's own thread takes them
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) REQUIRE(blocked_in_team(sig));
    REQUIRE_FALSE(blocked_in_team(SIGPIPE));  // raised in the thread whose write failed
    REQUIRE(counted_after_kill(SIGINT, 1));
  }
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) REQUIRE_FALSE(blocked_in_team(sig));
}

TEST_CASE("a metrics file that cannot be written is reported once and the run goes on") {
  TempDir dir;
  const std::string path = dir.file("m.jsonl");
  train::MetricsFile metrics(path);
  metrics.append(R"({"step": 1})");
  // a file-size limit makes the next write fail as a full disk would
  std::signal(SIGXFSZ, SIG_IGN);
  rlimit old;
  ::getrlimit(RLIMIT_FSIZE, &old);
  rlimit tight = old;
  tight.rlim_cur = 14;
  ::setrlimit(RLIMIT_FSIZE, &tight);
  REQUIRE_NOTHROW(metrics.append(R"({"step": 2})"));
  REQUIRE_NOTHROW(metrics.append(R"({"step": 3})"));
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, SIG_DFL);
  metrics.append(R"({"step": 4})");
  std::ifstream in(path);
  std::string first, second, third;
  std::getline(in, first), std::getline(in, second), std::getline(in, third);
  REQUIRE(first == R"({"step": 1})");
  REQUIRE(second == R"({")");  // the part that fitted stays on a line of its own
  REQUIRE(third == R"({"step": 4})");
}

TEST_CASE("a misspelt name is matched to the closest one, and nothing far is suggested") {
  const std::vector<std::string> names = {"steps", "seed", "lr", "sample-tokens", "stop-at"};
  CHECK(cli::closest_name("stpes", names) == "steps");  // a swap is one edit
  CHECK(cli::closest_name("step", names) == "steps");
  CHECK(cli::closest_name("sede", names) == "seed");
  CHECK(cli::closest_name("lrr", names) == "lr");
  CHECK(cli::closest_name("xyz", names).empty());
  CHECK(cli::closest_name("samples", names).empty());                 // two edits from a short name
  CHECK(cli::closest_name(std::string(100000, 's'), names).empty());  // no quadratic blow-up
}
