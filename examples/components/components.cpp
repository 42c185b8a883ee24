// One call into each of the components examples/components/CMakeLists.txt asks for: a word
// quoted for a shell (base), a count with thousands separators (report) and a float32
// rounded to bfloat16 and read back (interop).
#include <attograd/base/shell_quote.h>
#include <attograd/interop/float_codec.h>
#include <attograd/report/report.h>

#include <cstdio>
#include <string>

int main() {
  const std::string quoted = base::shell_quote("it's");
  const std::string count = report::thousands(1234567);
  std::string bytes;
  const float value = 1.0f / 3.0f;
  interop::write_floats(&value, 1, interop::StoredType::bf16,
                        [&](const char* data, size_t n) { bytes.append(data, n); });
  float back = 0;
  interop::read_floats(bytes.data(), 1, interop::StoredType::bf16, &back);
  std::printf("base: %s, report: %s, interop: %g as bfloat16 is %g\n", quoted.c_str(),
              count.c_str(), value, back);
  return bytes.size() == 2 && back != value ? 0 : 1;
}
