// `merge`: a LoRA checkpoint with its adapters folded into the base weights
// (train::merged_checkpoint): a weights-only checkpoint of the plain model (lora_rank 0),
// what `export` writes and every inference command runs.
#include <fmt/format.h>

#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/command_support.h"
#include "io/checkpoint.h"
#include "train/model_loading.h"

namespace cli {

int merge_command(const Args& args) {
  return guarded("merge", [&] {
    std::string path, out;
    bool overwrite = false;
    po::options_description desc("merge options");
    auto add = desc.add_options();
    add("help,h", "show this help");
    add("checkpoint", po::value(&path)->required(),
        "the checkpoint whose adapters to merge (also the first bare argument)");
    add("out", po::value(&out)->required(),
        "the merged checkpoint to write (weights only, lora_rank 0)");
    add_overwrite_option(desc, overwrite);
    auto vm = parse_options(args, desc, "checkpoint");
    if (wants_help(vm, "merge", desc, "CHECKPOINT")) return 0;
    require_file(path, "checkpoint");
    const auto claim = claim_outputs({{"--out", out, io::OutputKind::checkpoint}},
                                     {{"--checkpoint", path}}, {.overwrite = overwrite});
    const io::Checkpoint ckpt = io::load_checkpoint(path, io::LoadOptions{.weights_only = true});
    train::refuse_gradient_dump(ckpt);
    const int64_t rank = train::RunConfig::from_json(ckpt.config).model.lora_rank;
    if (rank == 0)
      throw UsageError(fmt::format(
          "'{}' has no LoRA adapters (lora_rank 0): there is nothing to merge; its weights are "
          "the model",
          base::printable(path)));
    const io::Checkpoint merged = train::merged_checkpoint(ckpt);
    io::save_checkpoint(out, merged);
    fmt::print("merged the rank-{} adapters of {} into {} ({} parameters, weights only)\n", rank,
               base::printable(path), base::printable(out), [&] {
                 int64_t n = 0;
                 for (const auto& [name, t] : merged.model) n += t.numel();
                 return n;
               }());
    return 0;
  });
}

}  // namespace cli
