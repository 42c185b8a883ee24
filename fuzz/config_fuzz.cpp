// libFuzzer target: any bytes as a `--config` file for `attograd train`. Parsing must end
// in a filled RunConfig or a UsageError / std::invalid_argument naming the line or value.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "train/commands.h"
#include "train/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // the file lives in memory: /proc/self/fd/N of a memfd
  const int fd = memfd_create("config", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  train::RunConfig cfg;
  try {
    auto desc = train::run_options(cfg);
    train::parse_options({"--config", path}, desc);
    cfg.validate();
  } catch (const train::UsageError&) {
  } catch (const std::invalid_argument&) {
  }
  close(fd);
  return 0;
}
