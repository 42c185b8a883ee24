// `sample`: text generated from a checkpoint.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

#include "cli/cli.h"
#include "cli/command_support.h"
#include "data/utf8.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "train/train.h"

namespace cli {

namespace {

struct SampleOptions {
  std::string path, prompt;
  int64_t tokens = 200, top_k = 0;
  double temperature = 1.0;
  uint64_t seed = 0;
  int threads = ag::kDefaultThreads;
};

po::options_description sample_options(SampleOptions& o) {
  po::options_description desc("sample options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&o.path)->required(), "checkpoint to sample from");
  add("prompt", po::value(&o.prompt)->default_value(""), "text to continue (default: newline)");
  add("tokens", po::value(&o.tokens)->default_value(200), "tokens to generate");
  add("temperature", po::value(&o.temperature)->default_value(1.0),
      "softmax temperature (0: greedy)");
  add("top-k", po::value(&o.top_k)->default_value(0), "keep the k likeliest tokens (0: all)");
  add("seed", po::value(&o.seed)->default_value(0), "sampling seed");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  add("config", po::value<std::string>(), "read options from an INI file");
  return desc;
}

void check_sample_options(const SampleOptions& o) {
  if (o.tokens < 0) throw UsageError(fmt::format("--tokens must be >= 0, got {}", o.tokens));
  if (!(o.temperature >= 0 && std::isfinite(o.temperature)))
    throw UsageError(fmt::format("--temperature must be >= 0 and finite, got {}", o.temperature));
  if (o.top_k < 0) throw UsageError(fmt::format("--top-k must be >= 0, got {}", o.top_k));
  if (o.threads < 1) throw UsageError(fmt::format("--threads must be >= 1, got {}", o.threads));
}

std::vector<int64_t> encode_prompt(const data::Tokenizer& tok, const std::string& prompt) {
  try {
    return tok.encode(prompt.empty() ? "\n" : prompt);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--prompt: {}", e.what()));
  }
}

}  // namespace

int sample_command(const Args& args) {
  return guarded("sample", [&] {
    SampleOptions o;
    auto desc = sample_options(o);
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "sample", desc)) return 0;
    check_sample_options(o);
    require_file(o.path, "checkpoint");
    ag::set_num_threads(o.threads);
    io::Checkpoint ckpt = io::load_checkpoint(o.path);
    auto model = train::model_from_checkpoint(ckpt);
    model->eval();
    auto tok = io::make_tokenizer(ckpt.tokenizer);
    const std::vector<int64_t> ids = encode_prompt(*tok, o.prompt);
    ag::Generator gen(o.seed);
    ag::Tensor out = model->generate(ag::from_vector(ids, {1, static_cast<int64_t>(ids.size())}),
                                     o.tokens, o.temperature, o.top_k, gen);
    std::vector<int64_t> all;
    for (double v : out.to_vector()) all.push_back(static_cast<int64_t>(v));
    if (o.prompt.empty()) all.erase(all.begin());
    // a vocabulary from a file may hold escape sequences: a terminal is shown them escaped
    const std::string text = tok->decode(all);
    fmt::print("{}\n",
               isatty(STDOUT_FILENO) ? data::printable(text, /*keep_line_breaks=*/true) : text);
    return 0;
  });
}

}  // namespace cli
