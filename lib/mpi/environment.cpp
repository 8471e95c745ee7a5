// taskgroup: MPI for the lifetime of an object (mpi_environment).
#include <taskgroup/mpi_session.hpp>

#include <cstdlib>

namespace taskgroup {

namespace {

int init_mpi(int* argc, char*** argv, bool& owner) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized == 0) {
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    owner = true;
  } else {
    MPI_Query_thread(&provided);
  }
  return provided;
}

}  // namespace

mpi_environment::mpi_environment() { provided_ = init_mpi(nullptr, nullptr, owner_); }
mpi_environment::mpi_environment(int& argc, char**& argv) { provided_ = init_mpi(&argc, &argv, owner_); }

mpi_environment::~mpi_environment() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owner_ && finalized == 0) MPI_Finalize();
}

int mpi_environment::rank() const noexcept {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpi_environment::size() const noexcept {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

bool mpi_environment::launched_by_mpi() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v) != nullptr) return true;  // NOLINT(concurrency-mt-unsafe): read-only use
  }
  return false;
}

}  // namespace taskgroup
