#pragma once
// A save that outlives the process: how rank 0 saves when an MPI launcher stops the job.
//
// Open MPI 4.1's mpirun answers Ctrl-C or SIGTERM with SIGCONT to each rank, SIGTERM one
// odls_base_sigkill_timeout later (1 s by default) and SIGKILL after another, each sent to
// the rank's whole process group (docs/distributed.md). A step and a save can each take
// longer than that second. So at the launcher's signal (StopSignals::on_launcher_stop),
// rank 0's signal thread takes the run's state as the last completed step left it
// (snapshot_gate.h: at once during forward and backward, whose step is abandoned), and
// forks a saver that leaves the process group (setsid), so the SIGKILL misses it: it
// writes the checkpoint as any save does (a temporary file, renamed), takes over and then
// removes the output locks, and says "saved checkpoint ..." when done. Rank 0 waits for it
// and exits with its status, unless the SIGKILL comes first; mpirun does not wait for the
// saver (measured, docs/distributed.md), and `resume` on the output is refused, naming the
// saver's PID, until the lock is gone.
#include <sys/types.h>

#include <functional>
#include <string>

#include "io/checkpoint.h"

namespace train {

// Runs save() in a child in a session of its own and waits for it: returns the child's
// exit status (save()'s return value; 1 when it threw). The child ignores the stop signals
// and SIGPIPE, never returns from here and runs no destructor or atexit handler (no MPI,
// no OpenMP team of the parent's); save() should print only through say_from_saver().
// started(PID) runs here once the child exists; when no child can be made, save() runs in
// this process instead.
int save_in_own_session(const std::function<int()>& save,
                        const std::function<void(pid_t saver)>& started);

// A checkpoint saved under an MPI launcher (a periodic save, the save after the last step):
// written by a child in a session of its own, waited for, its failure thrown here as the
// CheckpointError it met. The launcher's stop kills this process a second after its signal
// (while it waits, the run's state cannot be taken: the gate is closed), but not the child:
// the save completes, and when this process is gone by then the child removes the output
// locks it leaves. Without a child to spare, saved in this process.
void save_outliving_this_process(const std::string& path, const io::Checkpoint& checkpoint);

// Writes text to stdout (or stderr) from a saver: through a non-blocking descriptor of its
// own, given up after a short wait (mpirun may be gone, or not reading while it waits to
// kill the ranks), so the saver never waits on a reader.
void say_from_saver(const std::string& text, bool to_stderr = false);

}  // namespace train
