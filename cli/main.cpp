// attograd: the command line. Its subcommands live in cli/ (cli.h), training in train/.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>

#include "autograd/threading.h"
#include "base/error_text.h"
#include "base/partial_outputs.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "train/console.h"
#include "train/stop_signals.h"
#include "train/world.h"

namespace {

// A run a stop signal ended (saved; exit code 128 + N, train::stopped_exit_code) ends by that
// signal once everything is written and closed, as a shell expects of a program that
// caught Ctrl-C: a script running `attograd train` stops there too instead of going on
// to its next line. Under an MPI launcher the code is returned (the launcher reports it).
int end_as_stopped(int code) {
  const int sig = train::stop_signal_of(code);
  if (sig == 0 || train::World::current().launched()) return code;
  std::cout.flush();
  std::fflush(nullptr);
  std::signal(sig, SIG_DFL);
  sigset_t just_it;
  sigemptyset(&just_it);
  sigaddset(&just_it, sig);
  pthread_sigmask(SIG_UNBLOCK, &just_it, nullptr);
  std::raise(sig);
  return code;  // not reached
}

}  // namespace

int main(int argc, char** argv) {
  // a write beyond the file-size limit fails with EFBIG and is reported like a full disk,
  // instead of killing the process mid-checkpoint
  std::signal(SIGXFSZ, SIG_IGN);
  ag::select_blas_kernel(argv);  // may re-execute this program: nothing opened before it
  train::guard_standard_streams();
  base::remove_partials_on_fatal_signals();  // Ctrl-C leaves no temporary file or lock
  try {
    return end_as_stopped(cli::cli_main(argc, argv));
  } catch (const std::exception& e) {  // the commands report their own: a last resort
    train::noticef("attograd: error: {}\n", base::printable(base::without_error_prefix(e.what())));
    return 1;
  }
}
