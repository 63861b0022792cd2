/* fr_osu_iallreduce: OSU-style non-blocking test of fr_iallreduce() (as
 * osu_iallreduce): latency, and how much of it a compute between the start
 * and the wait hides. The driver is osu_nb.c, the allreduce's part
 * osu_allreduce.c. See docs/benchmarks.md. */
#include "osu_common.h"

int main(int argc, char **argv)
{
    return osu_nb_main(argc, argv, &osu_allreduce);
}
