// libFuzzer main for fuzz::gguf_lora (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::gguf_lora(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
