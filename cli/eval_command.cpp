// `eval`: the spec's evaluation loss of a checkpoint on a text file.
#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/command_support.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "train/train.h"

namespace cli {

namespace {

struct EvalOptions {
  std::string path, data_path, dump;
  int64_t context = 0;
  int threads = ag::kDefaultThreads;
};

po::options_description eval_options(EvalOptions& o) {
  po::options_description desc("eval options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&o.path)->required(), "checkpoint to evaluate");
  add("data", po::value(&o.data_path)->required(), "UTF-8 text file");
  add("context-length", po::value(&o.context)->default_value(0),
      "window length T (0: the model's)");
  add("json", "print one JSON object as the last line");
  add("dump-grads", po::value(&o.dump), "also write d loss / d parameter to this HDF5 file");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads), "threads");
  add("config", po::value<std::string>(), "read options from an INI file");
  return desc;
}

// The text's token ids under the checkpoint's tokenizer; text problems name the file.
std::vector<int64_t> read_ids(const data::Tokenizer& tok, const std::string& data_path) {
  try {
    return tok.encode(
        io::read_input_file(data_path, "data file", std::numeric_limits<int64_t>::max()));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", data_path, e.what()));
  }
}

void print_result(const train::EvalResult& r, const EvalOptions& o, bool json) {
  fmt::print("loss {:.4f}\n", r.loss);
  if (!o.dump.empty()) fmt::print("gradients written to {}\n", o.dump);
  if (json)
    fmt::print("{}\n", nlohmann::json{{"loss", r.loss},
                                      {"tokens", r.tokens},
                                      {"windows", r.windows},
                                      {"checkpoint", o.path},
                                      {"data", o.data_path}}
                           .dump());
}

}  // namespace

int eval_command(const Args& args) {
  return guarded("eval", [&] {
    EvalOptions o;
    auto desc = eval_options(o);
    auto vm = parse_options(args, desc);
    if (wants_help(vm, "eval", desc)) return 0;
    if (!vm.count("dump-grads")) o.dump.clear();
    if (o.threads < 1) throw UsageError(fmt::format("--threads must be >= 1, got {}", o.threads));
    require_file(o.path, "checkpoint");
    require_file(o.data_path, "data file");
    require_outputs(
        {{"--dump-grads", o.dump}},
        {{"--checkpoint", o.path}, {"--data", o.data_path}, {"--config", config_file(vm)}});
    ag::set_num_threads(o.threads);
    io::Checkpoint ckpt = io::load_checkpoint(o.path);
    auto model = train::model_from_checkpoint(ckpt);
    const int64_t model_T = model->config().context_length;
    if (o.context < 0 || o.context > model_T)
      throw UsageError(fmt::format("--context-length {} must be between 1 and the model's {}",
                                   o.context, model_T));
    const std::vector<int64_t> ids = read_ids(*io::make_tokenizer(ckpt.tokenizer), o.data_path);
    auto result = train::evaluate_with_grads(*model, ids, o.context,
                                             vm.count("dump-grads") ? &o.dump : nullptr);
    if (result.tokens == 0)
      throw std::runtime_error(fmt::format("'{}' has {} tokens, fewer than one window of {} + 1",
                                           o.data_path, ids.size(),
                                           o.context ? o.context : model_T));
    print_result(result, o, vm.count("json") > 0);
    return 0;
  });
}

}  // namespace cli
