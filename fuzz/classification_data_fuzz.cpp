// libFuzzer main for fuzz::classification_data (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::classification_data(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
