// A test helper, preloaded into a process: fsync on a file whose path contains
// $SLOW_FSYNC_PATH waits $SLOW_FSYNC_SECONDS (default 2) first, so a save is slow on any
// disk, and then creates the file $SLOW_FSYNC_MARK (when set) to say it did.
// mpi_test.sh's sigterm_slow_save uses it to give a save more than Open MPI's default one
// second between SIGTERM and SIGKILL.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int slow_path(int fd) {
  const char* part = getenv("SLOW_FSYNC_PATH");
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (part == NULL || part[0] == '\0' || n < 0) return 0;
  path[n] = '\0';
  return strstr(path, part) != NULL;
}

static void wait_a_while(void) {
  const char* s = getenv("SLOW_FSYNC_SECONDS");
  const double seconds = s ? atof(s) : 2.0;
  struct timespec left = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

int fsync(int fd) {
  static int (*real_fsync)(int);
  if (real_fsync == NULL) real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (slow_path(fd)) {
    wait_a_while();
    const char* mark = getenv("SLOW_FSYNC_MARK");
    if (mark != NULL && mark[0] != '\0') {
      const int m = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (m >= 0) close(m);
    }
  }
  return real_fsync(fd);
}
