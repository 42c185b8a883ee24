#pragma once
// The signals that end a training run gracefully: SIGINT (Ctrl-C), SIGTERM (kill, a job
// scheduler), SIGHUP (the terminal or ssh session closed) and SIGPIPE (the reader of our
// output went away). While a StopSignals is alive, each of them only sets a flag: the run
// finishes its step, saves and exits. A second signal never interrupts the save; it can
// only cut short what would follow it. SIGINT, SIGTERM and SIGHUP are taken by a thread
// that does nothing else, never by a thread that computes.
//
// A stop signal sent by this process's parent is an MPI launcher's (Open MPI's mpirun or
// orted) about to kill the process (docs/distributed.md): on_launcher_stop() names what
// that thread then does at once, without waiting for the step (train/launcher_stop.h).
#include <csignal>
#include <functional>
#include <memory>

namespace train {

class StopSignals {
 public:
  StopSignals();   // installs the handlers and clears the count
  ~StopSignals();  // restores what was there before and clears the count
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // How many stop signals arrived, and the one that stopped the run (0 when none).
  static int count();
  static int first();
  static bool requested() { return count() > 0; }

  // Run once, in the thread that takes the signals, at the first stop signal this
  // process's parent sends. Set it before the signals can come (the run's first step).
  void on_launcher_stop(std::function<void()> action);

 private:
  struct Receiver;  // the thread that takes the signals (stop_signals.cpp says why)
  std::unique_ptr<Receiver> receiver_;
};

// SIGPIPE ignored for its scope (what was there before restored after): while a run is set
// up, a reader that went away (`attograd train |& head -1`) makes writes fail instead of
// ending the process; say() reports it once, and from the first step StopSignals takes
// SIGPIPE as a stop, so the run ends saved.
class PipeSignalIgnored {
 public:
  PipeSignalIgnored();
  ~PipeSignalIgnored();
  PipeSignalIgnored(const PipeSignalIgnored&) = delete;
  PipeSignalIgnored& operator=(const PipeSignalIgnored&) = delete;

 private:
  struct sigaction previous_;
};

// "SIGTERM", "SIGHUP", ...
const char* signal_name(int sig);

// The exit code of a run a stop signal ended, saved: 128 + the signal, as a shell reports a
// process the signal ended (130 for Ctrl-C), so `attograd train ... && next` goes no
// further; SIGTERM's (143) for a rank of a distributed run that another rank's signal
// stopped. docs/exit-codes.md.
int stopped_exit_code();
// The stop signal an exit code of stopped_exit_code() stands for, else 0.
int stop_signal_of(int exit_code);

}  // namespace train
