// libFuzzer main for fuzz::serve_request (fuzz/targets.h).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::serve_request(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
