// libFuzzer main for fuzz::choice_items (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::choice_items(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
