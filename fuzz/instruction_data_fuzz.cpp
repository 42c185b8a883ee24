// libFuzzer main for fuzz::instruction_data (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::instruction_data(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
