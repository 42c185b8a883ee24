// libFuzzer main for fuzz::tokenizer_file (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::tokenizer_file(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
