// `serve`: a checkpoint behind serve/'s OpenAI-compatible HTTP server (docs/serving.md).
#include <fmt/format.h>

#include <cctype>
#include <filesystem>

#include "base/posix_file.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "io/checkpoint.h"
#include "io/tokenizer_section.h"
#include "serve/server.h"
#include "train/config.h"
#include "train/console.h"
#include "train/memory_plan.h"
#include "train/train.h"

namespace cli {

namespace {

struct ServeOptions {
  std::string path, key_file, chat_format, name;
  serve::ServerOptions server;
  int threads = ag::kDefaultThreads;
};

po::options_description serve_options(ServeOptions& o) {
  serve::ServerOptions& s = o.server;
  po::options_description desc("serve options");
  auto add = desc.add_options();
  add("help,h", "show this help");
  add("checkpoint", po::value(&o.path), "checkpoint to serve (also the first bare argument)");
  add("host", po::value(&s.host)->default_value(s.host),
      "address to listen on (another than loopback only when asked; without --api-key-file "
      "anyone who reaches it may use the model)");
  add("port", po::value(&s.port)->default_value(s.port), "port (0: any free one, printed)");
  add("threads", po::value(&o.threads)->default_value(ag::kDefaultThreads),
      "threads of the decoder");
  add("max-concurrent", po::value(&s.engine.slots)->default_value(s.engine.slots),
      "sequences decoded together (each a key/value cache over the context)");
  add("max-queue", po::value(&s.engine.max_queued)->default_value(s.engine.max_queued),
      "sequences waiting beyond them; past that a request is answered 429");
  add("api-key-file", po::value(&o.key_file),
      "a file holding the key clients must send (Authorization: Bearer KEY)");
  add("name", po::value(&o.name), "the model's id in /v1/models (default: the file's name)");
  add("chat-format", po::value(&o.chat_format),
      "chatml or llama3, instead of the checkpoint's chat format (one without: completions only)");
  add("max-tokens", po::value(&s.limits.max_tokens)->default_value(s.limits.max_tokens),
      "the most tokens a request may ask for per choice");
  add("max-body-bytes", po::value(&s.transport.body_bytes)->default_value(s.transport.body_bytes),
      "the largest request body taken (413 beyond)");
  add("request-timeout", po::value(&s.transport.request_seconds)->default_value(10),
      "seconds a request's head and body may take to arrive");
  add("drain-timeout", po::value(&s.drain_seconds)->default_value(10),
      "on SIGTERM or SIGINT, seconds requests in flight get to finish");
  return desc;
}

void check_serve_options(const ServeOptions& o) {
  const serve::ServerOptions& s = o.server;
  check_threads(o.threads);
  if (s.port < 0 || s.port > 65535)
    throw UsageError(fmt::format("--port must be 0 to 65535, got {}", s.port));
  if (s.engine.slots < 1 || s.engine.slots > 256)
    throw UsageError(fmt::format("--max-concurrent must be 1 to 256, got {}", s.engine.slots));
  if (s.engine.max_queued < 0 || s.engine.max_queued > 4096)
    throw UsageError(fmt::format("--max-queue must be 0 to 4096, got {}", s.engine.max_queued));
  if (s.limits.max_tokens < 1 || s.limits.max_tokens > (int64_t{1} << 20))
    throw UsageError(fmt::format("--max-tokens must be 1 to 1048576, got {}", s.limits.max_tokens));
  if (s.transport.body_bytes < 1024 || s.transport.body_bytes > (size_t{1} << 30))
    throw UsageError("--max-body-bytes must be 1024 to 1073741824");
  for (const auto& [option, seconds] : {std::pair{"--request-timeout", s.transport.request_seconds},
                                        std::pair{"--drain-timeout", s.drain_seconds}})
    if (!(seconds > 0 && seconds <= 3600))
      throw UsageError(
          fmt::format("{} must be more than 0 and at most 3600, got {}", option, seconds));
}

std::string read_key(const std::string& path) {
  std::string key = base::read_input_file(path, "--api-key-file", 4096);
  while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
  if (key.empty())
    throw UsageError(fmt::format("--api-key-file '{}' holds no key", base::printable(path)));
  return key;
}

struct ServedModel {
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<data::Tokenizer> tok;
  serve::ServedModel served;
};

ServedModel load(const ServeOptions& o) {
  ServedModel l;
  io::Checkpoint ckpt = io::load_checkpoint(o.path, io::LoadOptions{.weights_only = true});
  l.model = train::model_from_checkpoint(ckpt);
  if (l.model->config().num_classes > 0)
    throw UsageError(fmt::format("'{}' is a classifier: it gives labels, not tokens to serve",
                                 base::printable(o.path)));
  l.tok = io::make_tokenizer(ckpt.tokenizer);
  l.model->eval();
  const train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
  l.served.model = l.model.get();
  l.served.tokenizer = l.tok.get();
  l.served.name = o.name.empty() ? std::filesystem::path(o.path).stem().string() : o.name;
  l.served.chat = o.chat_format.empty()
                      ? cfg.chat_format
                      : std::optional(base::parse_choice<data::ChatFormat>(o.chat_format));
  l.served.chat_stop_ids = cfg.stop_token_ids;
  return l;
}

// The decoder's cache and scratch for every slot, against the memory left.
void check_serve_memory(const ServeOptions& o, const nn::GPTConfig& cfg) {
  const int64_t bytes = serve::Engine::memory_bytes(cfg, o.server.engine);
  const std::string short_of =
      train::memory_shortfall(bytes, o.threads, "lower --max-concurrent or --threads");
  if (!short_of.empty())
    throw UsageError(fmt::format(
        "--max-concurrent {} needs {} for its key/value caches over the context of {}: {}",
        o.server.engine.slots, train::format_bytes(bytes), cfg.context_length, short_of));
}

}  // namespace

int serve_command(const Args& args) {
  return guarded("serve", [&] {
    ServeOptions o;
    auto desc = serve_options(o);
    auto vm = parse_options(args, desc, "checkpoint");
    if (wants_help(vm, "serve", desc, "CHECKPOINT")) return 0;
    check_serve_options(o);
    if (o.path.empty()) o.path = default_checkpoint("serve");
    require_file(o.path, "checkpoint");
    if (!o.key_file.empty()) o.server.api_key = read_key(o.key_file);
    o.server.engine.threads = o.threads;
    o.server.limits.max_choices = o.server.engine.slots;  // n choices decode side by side
    o.server.transport.workers =  // every admitted or queued request, and a few more
        static_cast<int>(o.server.engine.slots + o.server.engine.max_queued + 4);
    ag::set_num_threads(o.threads);
    const ServedModel l = load(o);
    check_serve_memory(o, l.model->config());
    if (o.server.host != "127.0.0.1" && o.server.host != "localhost" && o.server.host != "::1" &&
        o.server.api_key.empty())
      fmt::print(stderr,
                 "warning: listening on {} without --api-key-file: anyone who can reach "
                 "it may use the model\n",
                 base::printable(o.server.host));
    o.server.on_listening = [&](int port) {
      fmt::print(stderr, "attograd serve: '{}' ({}) on http://{}:{}/v1\n", l.served.name,
                 l.served.chat ? "completions and chat" : "completions", o.server.host, port);
    };
    serve::run(l.served, o.server);
    fmt::print(stderr, "attograd serve: stopped\n");
    return 0;
  });
}

}  // namespace cli
