/*
 * pmi2_bench - PMI-2 microbenchmark over Slurm's libpmi2.
 *
 * Each of N ranks puts K keys of V bytes, PMI2_KVS_Fence, then reads every
 * key of G peers (ranks r+1..r+G mod N), for R rounds with fresh keys each
 * round. Phases are separated by PMI2_KVS_Fence used as a barrier (no MPI),
 * so rank 0's clock sees the slowest rank of each phase.
 *
 * Args (name=value): k=8 v=64 g=16 rounds=3. G is capped at N-1; k=0 is
 * the floor of a job: init, the fences as barriers, finalize.
 * Output: rank 0 prints
 *   bench n=N k=K g=G v=V rounds=R init_us=.. put_us=.. fence_us=.. get_us=.. total_us=..
 * (put/fence/get summed over the rounds; total from before PMI2_Init to after
 * PMI2_Finalize), and every rank prints "cpu_us=<n> rank=R" last.
 * Every value read is checked; a mismatch prints a fail line and exits 1.
 */
#include <slurm/pmi2.h>

#include "gopmi_test.h"

#define P "bench"

static int rank = -1, size = 0;

static void value_for(char *buf, int v, int round, int r, int k)
{
    int n = snprintf(buf, (size_t)v + 1, "%d.%d.%d:", round, r, k);
    for (int i = n; i < v; i++) buf[i] = (char)('A' + (i * 7 + r + k) % 26);
    buf[v] = 0;
}

/* The fences are barriers here: no MPI. */
static void barrier(const char *why) { gt_pmi2_fence(P, rank, why); }

int main(int argc, char **argv)
{
    int k = atoi(gt_arg(argc, argv, "k", "8"));
    int v = atoi(gt_arg(argc, argv, "v", "64"));
    int g = atoi(gt_arg(argc, argv, "g", "16"));
    int rounds = atoi(gt_arg(argc, argv, "rounds", "3"));
    int spawned = 0, appnum = 0, rc, vallen = 0;
    long long t_start, t_init, t0, t1, t2, t3, put_us = 0, fence_us = 0, get_us = 0;
    char jobid[256], key[PMI2_MAX_KEYLEN], *val, *want;

    gt_setup(P);
    /* libpmi2 refuses values over PMI2_MAX_VALLEN; hydra keeps at most 1023. */
    if (k < 0 || v < 16 || v > 1023 || g < 0 || rounds < 1)
        gt_fail(P, gt_rank_hint(), "bad-args-k-%d-v-%d-g-%d-rounds-%d", k, v, g, rounds);
    val = malloc((size_t)v + 2);
    want = malloc((size_t)v + 2);
    if (val == NULL || want == NULL) gt_fail(P, gt_rank_hint(), "malloc");

    t_start = gt_now_us();
    gt_pmi2_init(P, &spawned, &size, &rank, &appnum, jobid, sizeof jobid);
    if (g > size - 1) g = size - 1;
    barrier("init");
    t_init = gt_now_us();

    for (int round = 0; round < rounds; round++) {
        t0 = gt_now_us();
        for (int i = 0; i < k; i++) {
            snprintf(key, sizeof key, "b%d-%d-%d", round, rank, i);
            value_for(val, v, round, rank, i);
            rc = PMI2_KVS_Put(key, val);
            if (rc != PMI2_SUCCESS) gt_fail(P, rank, "put-%s-rc-%d", key, rc);
        }
        t1 = gt_now_us();
        barrier("put");
        t2 = gt_now_us();
        for (int p = 1; p <= g; p++) {
            int peer = (rank + p) % size;
            for (int i = 0; i < k; i++) {
                snprintf(key, sizeof key, "b%d-%d-%d", round, peer, i);
                rc = PMI2_KVS_Get(jobid, PMI2_ID_NULL, key, val, v + 1, &vallen);
                if (rc != PMI2_SUCCESS) gt_fail(P, rank, "get-%s-rc-%d", key, rc);
                value_for(want, v, round, peer, i);
                if (vallen != v || strcmp(val, want) != 0)
                    gt_fail(P, rank, "get-%s-vallen-%d-want-%d", key, vallen, v);
            }
        }
        barrier("get");
        t3 = gt_now_us();
        put_us += t1 - t0;
        fence_us += t2 - t1;
        get_us += t3 - t2;
    }

    rc = PMI2_Finalize();
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "finalize-rc-%d", rc);
    if (rank == 0) {
        printf("bench n=%d k=%d g=%d v=%d rounds=%d init_us=%lld put_us=%lld fence_us=%lld "
               "get_us=%lld total_us=%lld\n",
               size, k, g, v, rounds, t_init - t_start, put_us, fence_us, get_us,
               gt_now_us() - t_start);
    }
    free(val);
    free(want);
    gt_print_cpu(rank);
    return 0;
}
