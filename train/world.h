#pragma once
// The processes of a run. A plain `attograd train` is a world of one and never touches
// MPI; under an MPI launcher (`mpirun -np N attograd train ...`, `srun --mpi=pmix ...`)
// World::join() initialises MPI and every process learns its rank. Rank 0 alone prints,
// writes metrics and checkpoints; every rank reads the options and data itself.
//
// Collectives must be called by every rank in the same order. Only data movement goes
// through MPI (gathers, all-to-all): every sum that reaches the weights is computed by our
// own code in a fixed order (grad_reduction.h), so results never depend on the number of
// processes or on MPI's algorithms.
//
//   train::World& world = train::World::join();   // once, at the start of a command
//   if (world.root()) print(...);
//   bool stop = world.any(StopSignals::requested());
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace train {

// Whether the environment says an MPI launcher started this process (Open MPI's
// OMPI_COMM_WORLD_SIZE, PMI's PMI_SIZE, PMIx's PMIX_RANK), and the world size it gives
// (0 when only PMIx's rank is known). `getenv` is a parameter for tests.
struct Launch {
  bool under_mpi = false;
  int size = 1;
};
Launch detect_launch(const char* (*getenv)(const char*));

// The failure of another rank during set-up, already agreed on: rank 0 prints `message`,
// the others nothing, and every rank exits with `code`.
struct PeerFailure : std::runtime_error {
  PeerFailure(int code, int rank, const std::string& message)
      : std::runtime_error(message), code(code), rank(rank) {}
  int code, rank;
};

class World {
 public:
  // The world of this process, joined once (MPI_Init under a launcher). A launch of more
  // than one process in a build without MPI is an error saying so.
  static World& join();
  // The world joined so far: one process when join() was never called.
  static World& current();
  static bool available();  // built with MPI

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool root() const { return rank_ == 0; }
  bool distributed() const { return size_ > 1; }
  // Started by an MPI launcher (-np 1 too), which ends a job by killing each process's
  // group (docs/distributed.md).
  bool launched() const { return mpi_; }

  // Set-up ends on every rank with exactly one call: with "" where it succeeded, or with
  // the error that stopped it. Returns the failure of the lowest failing rank, if any (code
  // 0: every rank succeeded). After it, a failure of one rank ends the whole job (abort).
  struct Failure {
    int code = 0, rank = 0;
    std::string message;
  };
  Failure agree_setup(int code, const std::string& message);
  // Named values this rank's set-up settled that every rank must share (a run's effective
  // options, its data's identity): agree_setup compares them (a hash of each, in order),
  // and the first that differs fails every rank with code 2 naming it, instead of ranks
  // that deadlock or diverge. At most kSetupValues are compared one by one; the rest
  // together, under the last name.
  static constexpr int kSetupValues = 96;
  void expect_same_on_every_rank(std::vector<std::pair<std::string, std::string>> values);
  bool setup_agreed() const { return setup_agreed_; }
  // agree_setup(0, "") on a rank whose set-up succeeded: throws PeerFailure when another
  // rank's failed. Nothing in a world of one.
  void setup_done();

  bool any(bool flag) const;  // logical or over the ranks
  // The lowest rank whose `mine` is not empty, with its text on every rank (code 1), or
  // code 0 when every rank's is empty: how an error met by some ranks after set-up (damaged
  // data) reaches them all, so they stop together instead of waiting on each other.
  Failure first_failure(const std::string& mine) const;
  // Rank `from`'s text, on every rank (the others' `text` is not read).
  std::string broadcast(const std::string& text, int from = 0) const;
  // Each rank's values (every rank gives the same count), concatenated in rank order.
  std::vector<double> all_gather(const std::vector<double>& mine) const;
  // Non-blocking data movement for the gradient reduction. counts[r] floats go to (or come
  // from) rank r, displs[r] floats from the buffer's start.
  class Request;
  struct Pattern {
    std::vector<int> counts, displs;
  };
  std::shared_ptr<Request> start_all_to_all(const float* send, const Pattern& to, float* recv,
                                            const Pattern& from) const;
  std::shared_ptr<Request> start_all_gather(const float* mine, int count, float* all,
                                            const Pattern& from) const;
  // MPI_Iallreduce with MPI_SUM: MPI's order of summation, not ours.
  std::shared_ptr<Request> start_all_reduce(const float* mine, float* sum, int count) const;
  void wait(const std::shared_ptr<Request>& request) const;
  // Lets MPI move the request's data along (MPI_Test): non-blocking collectives progress
  // only inside MPI calls, so backward pokes them while it runs.
  void poke(const std::shared_ptr<Request>& request) const;
  [[noreturn]] void abort(int code) const;  // ends every rank of the job

  ~World();

 private:
  World() = default;
  int rank_ = 0, size_ = 1;
  bool mpi_ = false, setup_agreed_ = false;
  std::vector<std::pair<std::string, std::string>> setup_values_;
  // the first of setup_values_ whose hash differs between the ranks, as a Failure
  Failure compare_setup_values(const std::vector<double>& gathered, size_t per_rank) const;
};

}  // namespace train
