// A test helper, preloaded into the ranks of the mpi.* scenarios (scenario_lib.sh,
// mpi_leak_checks): dlclose does nothing, so the Open MPI components loaded with dlopen stay
// mapped until exit, and LeakSanitizer names them in the stacks of the allocations they
// hold until then (lsan_mpi.supp suppresses those by library). Without it their frames were
// "<unknown module>", and only the slow unwinder (fast_unwind_on_malloc=0: every
// allocation's stack taken the slow way, five times the scenarios' time) reached a frame
// of libmpi or libopen-pal to suppress them by.
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
