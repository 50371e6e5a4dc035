/*
 * pmi2_secret - for the test that what gopmi carries between nodes is
 * private (integration/slurm_secure_test.go). Each rank puts one value
 * made from the token in argv[1], fences, and reads the next rank's
 * (on the other node when the ranks alternate nodes), checking it
 * against the value it computes itself.
 *
 * The value crosses no other channel: the token on the command line is
 * hex digits, while the value is letters ('0'..'9','a'..'f' become
 * 'g'..'v'), followed by '-' and the rank as letters; the program never
 * prints it. So a capture that holds the value saw the ranks' PMI data.
 *
 * Lines: "ok secret rank=R size=N", or "fail secret rank=R reason=..."
 * (exit 1).
 */
#include <slurm/pmi2.h>

#include "gopmi_test.h"

#define P "secret"

/* letters turns the hex digits of in into letters g..v. */
static int letters(const char *in, char *out, size_t n)
{
    size_t i;
    for (i = 0; in[i] != 0; i++) {
        char c = in[i];
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return -1;
        if (i + 1 >= n) return -1;
        out[i] = (char)('g' + d);
    }
    out[i] = 0;
    return 0;
}

static int value_of(const char *token, int r, char *out, size_t n)
{
    char hex[32], tail[32];
    size_t len;
    if (letters(token, out, n) != 0) return -1;
    snprintf(hex, sizeof hex, "%x", r);
    if (letters(hex, tail, sizeof tail) != 0) return -1;
    len = strlen(out);
    if (len + 1 + strlen(tail) + 1 > n) return -1;
    out[len] = '-';
    strcpy(out + len + 1, tail);
    return 0;
}

int main(int argc, char **argv)
{
    int spawned = 0, size = 0, rank = -1, appnum = 0, vallen = 0, rc;
    char jobid[256], key[PMI2_MAX_KEYLEN], mine[256], want[256], got[PMI2_MAX_VALLEN + 1];

    gt_setup(P);
    if (argc < 2 || value_of(argv[1], 0, mine, sizeof mine) != 0)
        gt_fail(P, gt_rank_hint(), "usage-pmi2_secret-HEXTOKEN");
    gt_pmi2_init(P, &spawned, &size, &rank, &appnum, jobid, sizeof jobid);
    value_of(argv[1], rank, mine, sizeof mine);
    snprintf(key, sizeof key, "secret-%d", rank);
    rc = PMI2_KVS_Put(key, mine);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "put-rc-%d", rc);
    gt_pmi2_fence(P, rank, "put");
    int peer = (rank + 1) % size;
    snprintf(key, sizeof key, "secret-%d", peer);
    value_of(argv[1], peer, want, sizeof want);
    rc = PMI2_KVS_Get(jobid, PMI2_ID_NULL, key, got, sizeof got, &vallen);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "get-%s-rc-%d", key, rc);
    if (strcmp(got, want) != 0) gt_fail(P, rank, "get-%s-wrong-value-of-%d-bytes", key, vallen);
    gt_pmi2_fence(P, rank, "get");
    rc = PMI2_Finalize();
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "finalize-rc-%d", rc);
    printf("ok " P " rank=%d size=%d\n", rank, size);
    return 0;
}
