// libFuzzer main for fuzz::hf_llama_config (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::hf_llama_config(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
