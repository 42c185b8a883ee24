// What an MPI launcher's stop relies on (train/launcher_stop.h): the snapshot gate, the
// signal thread's action at a stop sent by the parent, and the output locks a saver takes
// over. The stop itself, under mpirun, is tests/cli/mpi_test.sh's ctrl_c_default_*.
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "io/files.h"
#include "support.h"
#include "train/snapshot_gate.h"
#include "train/stop_signals.h"

namespace {

using namespace std::chrono_literals;

// The exit status of a child, which must end within seconds.
int exit_status(pid_t pid) {
  int status = 0;
  for (int i = 0; i < 1000; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(10ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -2;  // hung
}

// A child whose StopSignals acts at its parent's stop: exits 10 from the action, or 20
// when the run's thread saw the signal without the action running.
pid_t fork_signalled_child(bool signal_itself) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  omp_set_num_threads(1);  // the parent's OpenMP threads are not in a forked child
  {
    train::StopSignals signals;
    signals.on_launcher_stop([] { ::_exit(10); });
    if (signal_itself) ::kill(::getpid(), SIGTERM);
    for (int i = 0; i < 500 && !train::StopSignals::requested(); ++i)
      std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(100ms);  // time for an action that should not run
    if (train::StopSignals::requested()) ::_exit(20);
  }
  ::_exit(30);
}

}  // namespace

TEST_CASE("the snapshot gate is taken only while open and never once the run ended",
          "[launcher_stop]") {
  train::SnapshotGate gate;
  std::future<bool> taken = std::async(std::launch::async, [&] { return gate.take(); });
  REQUIRE(taken.wait_for(100ms) == std::future_status::timeout);  // closed: waits
  gate.open();
  REQUIRE(taken.get());
  REQUIRE(gate.taken());

  train::SnapshotGate ended;
  { const train::SnapshotGate::Open open(&ended); }  // opened and closed again
  std::future<bool> late = std::async(std::launch::async, [&] { return ended.take(); });
  REQUIRE(late.wait_for(100ms) == std::future_status::timeout);
  ended.end();
  REQUIRE_FALSE(late.get());
  REQUIRE_FALSE(ended.take());
}

TEST_CASE(
    "a stop signal from the parent runs the launcher's action but one from elsewhere does not",
    "[launcher_stop][signals]") {
  const pid_t child = fork_signalled_child(false);
  std::this_thread::sleep_for(200ms);  // its StopSignals in place
  ::kill(child, SIGTERM);              // from its parent: as mpirun or orted send it
  REQUIRE(exit_status(child) == 10);
  REQUIRE(exit_status(fork_signalled_child(true)) == 20);  // sent by itself: a plain stop
}

TEST_CASE(
    "a forked child takes over the output locks and names itself in them until it removes them",
    "[launcher_stop][files]") {
  ag_test::TempDir dir;
  const std::string out = dir.file("run.h5");
  io::OutputLock lock(out);
  const pid_t child = ::fork();
  if (child == 0) {
    io::OutputLock::hand_over_held_to_this_process();
    std::ifstream in(lock.lock_path());
    pid_t named = 0;
    in >> named;
    io::OutputLock::release_held();
    ::_exit(named == ::getpid() ? 0 : 1);
  }
  REQUIRE(exit_status(child) == 0);
  REQUIRE_FALSE(std::filesystem::exists(lock.lock_path()));
  REQUIRE_NOTHROW(io::OutputLock(out));  // the output is free for the next run
}
