// attograd: the command line. Its subcommands live in cli/ (cli.h), training in train/.
#include <csignal>
#include <exception>

#include "autograd/threading.h"
#include "base/error_text.h"
#include "base/partial_outputs.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "train/console.h"

int main(int argc, char** argv) {
  // a write beyond the file-size limit fails with EFBIG and is reported like a full disk,
  // instead of killing the process mid-checkpoint
  std::signal(SIGXFSZ, SIG_IGN);
  ag::select_blas_kernel(argv);  // may re-execute this program: nothing opened before it
  train::guard_standard_streams();
  base::remove_partials_on_fatal_signals();  // Ctrl-C leaves no temporary file or lock
  try {
    return cli::cli_main(argc, argv);
  } catch (const std::exception& e) {  // the commands report their own: a last resort
    train::noticef("attograd: error: {}\n", base::printable(base::without_error_prefix(e.what())));
    return 1;
  }
}
