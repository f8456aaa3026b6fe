/* The MPI backend in a program that owns MPI: zero must not finalize MPI it did not initialize,
 * must leave the caller's communicator (and its error handler) alone, and must refuse
 * MPI_COMM_NULL and a finalized MPI with a message instead of crashing. */
#include "harness.h"

#include "zero/zero.h"

#include <mpi.h>

static zero_error zt_cerr; /* why the last zero_comm_init_*_with failed */

int main(int argc, char **argv) {
    int provided = 0, rank = 0, size = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    zt_rank = rank;

    /* The caller's own communicator: the ranks of one parity, in reverse order. */
    MPI_Comm mine;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &mine);
    int mine_size = 0, mine_rank = 0;
    MPI_Comm_size(mine, &mine_size);
    MPI_Comm_rank(mine, &mine_rank);

    zero_comm *c = NULL;
    ZT_OK(zero_comm_init_mpi(&c, &mine));
    if (!c) return zt_finish("test_comm_userinit");
    ZT_EQ_INT(zero_comm_size(c), mine_size);
    ZT_EQ_INT(zero_comm_rank(c), mine_rank);

    int64_t v = rank, want = 0; /* the sum of the world ranks of my parity */
    for (int r = rank % 2; r < size; r += 2) want += r;
    ZT_OK(zero_comm_all_reduce(c, &v, &v, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM));
    ZT_EQ_INT(v, want);

    /* A raw MPI collective on the caller's communicator still works beside ours. */
    int one = 1, total = 0;
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, mine);
    ZT_EQ_INT(total, mine_size);

    /* MPI_COMM_NULL is refused, not passed to MPI (whose default handler would abort). */
    MPI_Comm null = MPI_COMM_NULL;
    zero_comm *bad = (zero_comm *)(uintptr_t)1;
    ZT_EQ_INT(zero_comm_init_mpi_with(&bad, &null, NULL, &zt_cerr), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(bad == NULL && strstr(zt_cerr.msg, "MPI_COMM_NULL"));

    zero_comm_free(c);
    int finalized = 1;
    MPI_Finalized(&finalized);
    ZT_EQ_INT(finalized, 0); /* the program initialized MPI: zero leaves it running */
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(mine, &eh);
    ZT_CHECK(eh == MPI_ERRORS_ARE_FATAL); /* ours was set on the duplicate only */
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&mine);

    /* A communicator the program forgets to free before its own MPI_Finalize is still safe
     * to free afterwards. */
    zero_comm *left = NULL;
    ZT_OK(zero_comm_init_mpi(&left, NULL));
    ZT_EQ_INT(zero_comm_size(left), size);
    MPI_Finalize();
    zero_comm_free(left);
    zero_comm *late = (zero_comm *)(uintptr_t)1;
    ZT_EQ_INT(zero_comm_init_mpi(&late, NULL), ZERO_ERR_STATE);
    ZT_CHECK(late == NULL);
    return zt_finish("test_comm_userinit");
}
