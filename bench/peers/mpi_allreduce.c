/* Peer for row 4: OpenMPI MPI_Allreduce, float32 sum, in place, on N ranks
 * of this machine (mpirun --oversubscribe -np N). For every size given in
 * bytes: two warm-up calls, then timed calls (a barrier before each; the time
 * of a call is the slowest rank's) until about BUDGET seconds have passed
 * (at least 3 calls, at most 200). Rank 0 prints one JSON line per size:
 *   {"key": "mpi.allreduce.r2.s67108864", "value": <median s>, "unit": "s",
 *    "bytes": ..., "replicas": ..., "min": ..., "n": ...}
 *
 *   mpirun -np N mpi_allreduce [--budget SECONDS] BYTES...
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*) a, y = *(const double*) b;
  return x < y ? -1 : x > y ? 1 : 0;
}

int main(int argc, char** argv) {
  int rank = 0, ranks = 1;
  double budget = 1.0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  for (int a = 1; a < argc; ++a) {
    if (strcmp(argv[a], "--budget") == 0 && a + 1 < argc) {
      budget = atof(argv[++a]);
      continue;
    }
    size_t bytes = strtoull(argv[a], NULL, 10);
    size_t count = bytes / sizeof(float);
    float* buf = NULL;
    if (posix_memalign((void**) &buf, 64, bytes) != 0) {
      fprintf(stderr, "mpi_allreduce: cannot allocate %zu bytes\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, 0, bytes); /* zeros: sums stay finite and normal */
    for (int w = 0; w < 2; ++w)
      MPI_Allreduce(MPI_IN_PLACE, buf, (int) count, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    double times[200];
    int n = 0;
    double spent = 0;
    while (n < 200 && (n < 3 || spent < budget)) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf, (int) count, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      double t = MPI_Wtime() - t0, slowest = 0;
      MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      times[n++] = slowest;
      spent += slowest;
    }
    qsort(times, (size_t) n, sizeof(double), cmp_double);
    double median = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    if (rank == 0) {
      printf("{\"key\": \"mpi.allreduce.r%d.s%zu\", \"value\": %.9g, \"unit\": "
             "\"s\", \"bytes\": %zu, \"replicas\": %d, \"min\": %.9g, \"n\": "
             "%d}\n",
             ranks, bytes, median, bytes, ranks, times[0], n);
      fflush(stdout);
    }
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
