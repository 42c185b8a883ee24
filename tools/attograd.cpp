// attograd: the command line. Everything it does lives in train/ (commands.h).
#include "autograd/threading.h"
#include "train/commands.h"

int main(int argc, char** argv) {
  ag::select_blas_kernel(argv);
  return train::cli_main(argc, argv);
}
