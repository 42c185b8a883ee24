// A test helper: runs a command and writes its peak resident set (the kernel's ru_maxrss
// at its exit, in kB) to a file, exiting with the command's status. scenario_lib.sh's
// peak_rss_kb uses it: sampling /proc/PID/status every 20 ms misses the peak of a run that
// ends between two samples, as short runs often do.
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: peak_rss OUT_FILE COMMAND [ARG...]\n");
    return 2;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    perror("peak_rss: fork");
    return 2;
  }
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    perror(argv[2]);
    _exit(127);
  }
  int status = 0;
  struct rusage usage;
  if (wait4(pid, &status, 0, &usage) < 0) {
    perror("peak_rss: wait4");
    return 2;
  }
  FILE* out = fopen(argv[1], "w");
  if (!out || fprintf(out, "%ld\n", usage.ru_maxrss) < 0 || fclose(out) != 0) {
    perror(argv[1]);
    return 2;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
