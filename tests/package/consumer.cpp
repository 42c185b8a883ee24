// One call into the component tests/package/CMakeLists.txt links (COMPONENT_name), so that
// the link needs its library and everything under it.
#include <cstdio>

#if defined(COMPONENT_core)
#include <attograd/autograd/tensor.h>
static long call() {
  return ag::zeros({2, 3}).numel();
}
#elif defined(COMPONENT_testing)
#include <attograd/autograd/op_table.h>
static long call() {
  return static_cast<long>(ag::op_table::elementwise_rows().size());
}
#elif defined(COMPONENT_nn)
#include <attograd/nn/config.h>
static long call() {
  return nn::GPTConfig{}.num_parameters();
}
#elif defined(COMPONENT_base)
#include <attograd/base/shell_quote.h>
static long call() {
  return static_cast<long>(base::shell_quote("it's").size());
}
#elif defined(COMPONENT_data)
#include <attograd/data/tokenizer.h>
static long call() {
  return static_cast<long>(data::ByteTokenizer().encode("abc").size());
}
#elif defined(COMPONENT_optim)
#include <attograd/optim/registry.h>
static long call() {
  return static_cast<long>(optim::optimizer_names().size());
}
#elif defined(COMPONENT_io)
#include <attograd/io/files.h>
static long call() {
  return io::same_file("/", "/") ? 1 : 0;
}
#elif defined(COMPONENT_train)
#include <attograd/train/config.h>
static long call() {
  return static_cast<long>(train::RunConfig{}.to_json().size());
}
#elif defined(COMPONENT_interop)
#include <attograd/interop/formats.h>
static long call() {
  return static_cast<long>(interop::export_formats().size());
}
#elif defined(COMPONENT_report)
#include <attograd/report/report.h>
static long call() {
  return static_cast<long>(report::thousands(1234567).size());
}
#elif defined(COMPONENT_serve)
#include <attograd/serve/serve.h>
static long call() {
  return static_cast<long>(serve::error_body(serve::bad_request("n", "too many")).size());
}
#elif defined(COMPONENT_bench)
#include <attograd/bench/micro.h>
static long call() {
  return reinterpret_cast<long>(&bench::run_micro) != 0;
}
#elif defined(COMPONENT_cli) || defined(COMPONENT_attograd)
#include <attograd/cli/cli.h>
static long call() {
  return static_cast<long>(cli::version_text().size());
}
#endif

int main() {
  const long value = call();
  std::printf("%ld\n", value);
  return value > 0 ? 0 : 1;
}
