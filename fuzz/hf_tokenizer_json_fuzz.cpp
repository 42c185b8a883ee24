// libFuzzer main for fuzz::hf_tokenizer_json (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::hf_tokenizer_json(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
