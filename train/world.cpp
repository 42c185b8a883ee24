#include "train/world.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/hash.h"
#include "base/utf8.h"
#include "train/mpi_library.h"

#ifdef ATTOGRAD_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: the deprecated C++ bindings need another library
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace train {

namespace {

int positive_int(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  return *end == '\0' && v > 0 && v < (1 << 24) ? static_cast<int>(v) : 0;
}

World*& instance() {
  static World* world = nullptr;
  return world;
}

}  // namespace

namespace {

// A 32-bit hash of one named value, exact in a double (all_gather's type)
double setup_value_hash(const std::pair<std::string, std::string>& v) {
  return static_cast<double>(base::fnv1a_32(v.first + '=' + v.second));
}

}  // namespace

void World::expect_same_on_every_rank(std::vector<std::pair<std::string, std::string>> values) {
  setup_values_ = std::move(values);
}

Launch detect_launch(const char* (*getenv)(const char*)) {
  Launch l;
  for (const char* key : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (getenv(key)) {
      l.under_mpi = true;
      l.size = positive_int(getenv(key));
      return l;
    }
  if (getenv("PMIX_RANK")) l = {true, 0};
  return l;
}

bool World::available() {
#ifdef ATTOGRAD_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string mpi_library_version() {
#ifdef ATTOGRAD_HAVE_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "an MPI library";
  // the length may count the terminating NUL (Open MPI's does)
  const std::string version(
      text,
      strnlen(text, static_cast<size_t>(std::clamp(length, 0, MPI_MAX_LIBRARY_VERSION_STRING))));
  return base::printable(version.substr(0, version.find_first_of("\r\n")));
#else
  return "";
#endif
}

World& World::current() {
  static World single;
  return instance() ? *instance() : single;
}

#ifdef ATTOGRAD_HAVE_MPI

// ------------------------------------------------------------------ with MPI
class World::Request {
 public:
  MPI_Request handle = MPI_REQUEST_NULL;
};

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw std::runtime_error(fmt::format("MPI {} failed: {}", what, std::string(text, length)));
}

}  // namespace

World& World::join() {
  if (instance()) return *instance();
  auto* w = new World();  // lives until exit: MPI_Finalize runs from its destructor's atexit
  const Launch launch = detect_launch([](const char* k) -> const char* { return std::getenv(k); });
  if (launch.under_mpi) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    // errors come back as codes (check() names them) instead of aborting silently
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size_);
    w->mpi_ = true;
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  instance() = w;
  return *w;
}

World::Failure World::agree_setup(int code, const std::string& message) {
  setup_agreed_ = true;
  if (!distributed()) return {code, 0, message};
  // [code, count, hash of each setup value...]: the same length on every rank, failed or not
  std::vector<double> mine(2 + kSetupValues, 0.0);
  mine[0] = code;
  mine[1] = static_cast<double>(setup_values_.size());
  for (size_t i = 0; i < setup_values_.size(); ++i)
    mine[2 + std::min<size_t>(i, kSetupValues - 1)] += setup_value_hash(setup_values_[i]);
  const std::vector<double> gathered = all_gather(mine);
  Failure f;
  for (int r = 0; r < size_ && f.code == 0; ++r)
    if (gathered[r * mine.size()] != 0) f = {static_cast<int>(gathered[r * mine.size()]), r, ""};
  if (f.code == 0) return compare_setup_values(gathered, mine.size());
  f.message = broadcast(rank_ == f.rank ? message : "", f.rank);
  return f;
}

World::Failure World::compare_setup_values(const std::vector<double>& gathered,
                                           size_t per_rank) const {
  for (size_t i = 1; i < per_rank; ++i)
    for (int r = 1; r < size_; ++r) {
      if (gathered[r * per_rank + i] == gathered[i]) continue;
      if (i == 1 || setup_values_.empty())
        return {2, 0,
                fmt::format("the processes run different commands or attograd builds (rank 0 "
                            "and rank {}); start every rank with the same command",
                            r)};
      const auto& [name, value] = setup_values_[std::min(i - 2, setup_values_.size() - 1)];
      return {
          2, 0,
          fmt::format(
              "the processes were started with different settings: '{}' is {} on "
              "rank 0 and differs on rank {} (start every rank with the same "
              "options, data and environment)",
              name,
              value.empty() ? "empty" : fmt::format("'{}'", base::printable(value.substr(0, 200))),
              r)};
    }
  return {};
}

std::string World::broadcast(const std::string& text, int from) const {
  if (!distributed()) return text;
  std::string out = text;
  uint64_t length = out.size();
  check(MPI_Bcast(&length, 1, MPI_UINT64_T, from, MPI_COMM_WORLD), "MPI_Bcast");
  if (length > (uint64_t{1} << 30)) throw std::runtime_error("MPI_Bcast: a text over 1 GiB");
  out.resize(length);
  check(MPI_Bcast(out.data(), static_cast<int>(length), MPI_CHAR, from, MPI_COMM_WORLD),
        "MPI_Bcast");
  return out;
}

bool World::any(bool flag) const {
  if (!distributed()) return flag;
  int mine = flag ? 1 : 0, result = 0;
  check(MPI_Allreduce(&mine, &result, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD), "MPI_Allreduce");
  return result != 0;
}

std::vector<double> World::all_gather(const std::vector<double>& mine) const {
  if (!distributed()) return mine;
  std::vector<double> all(mine.size() * size_);
  check(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                      static_cast<int>(mine.size()), MPI_DOUBLE, MPI_COMM_WORLD),
        "MPI_Allgather");
  return all;
}

std::shared_ptr<World::Request> World::start_all_to_all(const float* send, const Pattern& to,
                                                        float* recv, const Pattern& from) const {
  auto r = std::make_shared<Request>();
  check(
      MPI_Ialltoallv(send, to.counts.data(), to.displs.data(), MPI_FLOAT, recv, from.counts.data(),
                     from.displs.data(), MPI_FLOAT, MPI_COMM_WORLD, &r->handle),
      "MPI_Ialltoallv");
  return r;
}

std::shared_ptr<World::Request> World::start_all_gather(const float* mine, int count, float* all,
                                                        const Pattern& from) const {
  auto r = std::make_shared<Request>();
  check(MPI_Iallgatherv(mine, count, MPI_FLOAT, all, from.counts.data(), from.displs.data(),
                        MPI_FLOAT, MPI_COMM_WORLD, &r->handle),
        "MPI_Iallgatherv");
  return r;
}

std::shared_ptr<World::Request> World::start_all_reduce(const float* mine, float* sum,
                                                        int count) const {
  auto r = std::make_shared<Request>();
  check(MPI_Iallreduce(mine, sum, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r->handle),
        "MPI_Iallreduce");
  return r;
}

void World::wait(const std::shared_ptr<Request>& request) const {
  check(MPI_Wait(&request->handle, MPI_STATUS_IGNORE), "MPI_Wait");
}

void World::poke(const std::shared_ptr<Request>& request) const {
  int done = 0;
  if (request) check(MPI_Test(&request->handle, &done, MPI_STATUS_IGNORE), "MPI_Test");
}

void World::abort(int code) const {
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else

// ------------------------------------------------------------------ without MPI
class World::Request {};

World& World::join() {
  if (instance()) return *instance();
  const Launch launch = detect_launch([](const char* k) -> const char* { return std::getenv(k); });
  if (launch.under_mpi && launch.size != 1)
    throw std::runtime_error(
        "this attograd was built without MPI (libopenmpi-dev was not found, or ATTOGRAD_MPI=OFF), "
        "so it cannot run as one of several processes; run it alone or rebuild with MPI");
  instance() = new World();
  return *instance();
}

World::Failure World::agree_setup(int code, const std::string& message) {
  setup_agreed_ = true;
  return {code, 0, message};
}
std::string World::broadcast(const std::string& text, int) const {
  return text;
}

bool World::any(bool flag) const {
  return flag;
}
std::vector<double> World::all_gather(const std::vector<double>& mine) const {
  return mine;
}
std::shared_ptr<World::Request> World::start_all_to_all(const float* send, const Pattern& to,
                                                        float* recv, const Pattern&) const {
  std::memcpy(recv, send, sizeof(float) * static_cast<size_t>(to.counts.at(0)));
  return nullptr;
}
std::shared_ptr<World::Request> World::start_all_gather(const float* mine, int count, float* all,
                                                        const Pattern&) const {
  std::memcpy(all, mine, sizeof(float) * static_cast<size_t>(count));
  return nullptr;
}
std::shared_ptr<World::Request> World::start_all_reduce(const float* mine, float* sum,
                                                        int count) const {
  std::memcpy(sum, mine, sizeof(float) * static_cast<size_t>(count));
  return nullptr;
}
void World::wait(const std::shared_ptr<Request>&) const {}
void World::poke(const std::shared_ptr<Request>&) const {}
void World::abort(int code) const {
  std::_Exit(code);
}

#endif

void World::setup_done() {
  if (!distributed()) return;
  const Failure f = agree_setup(0, "");
  if (f.code != 0) throw PeerFailure(f.code, f.rank, f.message);
}

World::~World() = default;

World::Failure World::first_failure(const std::string& mine) const {
  const std::vector<double> failed = all_gather({mine.empty() ? 0.0 : 1.0});
  for (int r = 0; r < static_cast<int>(failed.size()); ++r)
    if (failed[static_cast<size_t>(r)] != 0) return {1, r, broadcast(mine, r)};
  return {};
}

}  // namespace train
