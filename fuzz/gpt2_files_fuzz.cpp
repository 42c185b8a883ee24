// libFuzzer main for fuzz::gpt2_files (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::gpt2_files(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
