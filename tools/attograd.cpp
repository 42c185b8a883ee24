// attograd: the command line. Everything it does lives in train/ (commands.h).
#include <csignal>

#include "autograd/threading.h"
#include "train/commands.h"
#include "train/console.h"

int main(int argc, char** argv) {
  // a write beyond the file-size limit fails with EFBIG and is reported like a full disk,
  // instead of killing the process mid-checkpoint
  std::signal(SIGXFSZ, SIG_IGN);
  ag::select_blas_kernel(argv);  // may re-execute this program: nothing opened before it
  train::guard_standard_streams();
  return train::cli_main(argc, argv);
}
