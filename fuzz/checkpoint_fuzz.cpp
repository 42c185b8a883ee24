// libFuzzer target: any bytes as a checkpoint file. Loading must either succeed or throw
// a CheckpointError naming the problem; a crash, hang or other exception is a bug. What
// loads is taken further the way `sample` and `eval` would take it.
#include <cstdint>
#include <string>

#include "io/checkpoint.h"
#include "train/trainer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  io::Checkpoint ckpt;
  try {
    ckpt = io::load_checkpoint_image(bytes, "fuzz.h5");
  } catch (const io::CheckpointError&) {
    return 0;
  }
  try {
    auto tokenizer = train::make_tokenizer(ckpt.tokenizer);
    tokenizer->decode({0});
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  } catch (const std::out_of_range&) {
  }
  try {
    train::RunConfig cfg = train::RunConfig::from_json(ckpt.config);
    cfg.validate();
    // only small models: the loader's job is to be safe, not to allocate what a file asks
    if (cfg.model.num_parameters() < (1 << 20)) {
      auto model = train::model_from_checkpoint(ckpt);
      (void)model;
    }
  } catch (const std::invalid_argument&) {
  } catch (const io::CheckpointError&) {
  }
  return 0;
}
