/*
 * pmix_event - an event a client raises for its whole job reaches every
 * rank, those on other nodes too.
 *
 * Every rank registers a handler for one status code of its own
 * (PMIX_EXTERNAL_ERR_BASE - 7) and fences. Rank 0 then raises that code
 * with PMIX_RANGE_NAMESPACE and an info "gopmi.event.word"="hello"; every
 * other rank waits (up to 20 s) until its handler ran, and checks the
 * event's source (rank 0 of the job) and its info. Under -ppn 1 the other
 * ranks are on other nodes: libpmix gives the event to its host server,
 * which must carry it to the other nodes' servers.
 * Output: "ok event rank=R" per rank; a failure prints a fail line and
 * exits 1.
 */
#include <pmix.h>
#include <unistd.h>

#include "gopmi_test.h"

#define P "pmixevent"
#define CODE (PMIX_EXTERNAL_ERR_BASE - 7)

static pmix_proc_t me;
static volatile int heard, registered;
static char from_ns[PMIX_MAX_NSLEN + 1], word[64];
static volatile uint32_t from_rank = 0xffffffff;

static void on_event(size_t id, pmix_status_t status, const pmix_proc_t *source, pmix_info_t info[], size_t ninfo,
                     pmix_info_t results[], size_t nresults, pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
    (void)id;
    (void)results;
    (void)nresults;
    if (status == CODE && source != NULL) {
        snprintf(from_ns, sizeof from_ns, "%s", source->nspace);
        from_rank = source->rank;
        for (size_t i = 0; i < ninfo; i++) {
            if (PMIX_CHECK_KEY(&info[i], "gopmi.event.word") && info[i].value.type == PMIX_STRING) {
                snprintf(word, sizeof word, "%s", info[i].value.data.string);
            }
        }
        heard = 1;
    }
    if (cbfunc != NULL) cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void on_registered(pmix_status_t status, size_t id, void *cbdata)
{
    (void)id;
    (void)cbdata;
    registered = status == PMIX_SUCCESS ? 1 : -1;
}

int main(void)
{
    pmix_status_t code = CODE, rc;
    pmix_info_t info;

    gt_setup(P);
    if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, -1, "init-%s", PMIx_Error_string(rc));
    PMIx_Register_event_handler(&code, 1, NULL, 0, on_event, on_registered, NULL);
    for (int i = 0; i < 2000 && registered == 0; i++) usleep(1000);
    if (registered != 1) gt_fail(P, (int)me.rank, "register-%d", registered);

    /* Everyone listens before rank 0 speaks. */
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "fence-%s", PMIx_Error_string(rc));
    if (me.rank == 0) {
        PMIX_INFO_LOAD(&info, "gopmi.event.word", "hello", PMIX_STRING);
        rc = PMIx_Notify_event(CODE, &me, PMIX_RANGE_NAMESPACE, &info, 1, NULL, NULL);
        if (rc != PMIX_SUCCESS && rc != PMIX_OPERATION_SUCCEEDED) gt_fail(P, 0, "notify-%s", PMIx_Error_string(rc));
        PMIX_INFO_DESTRUCT(&info);
    } else {
        for (int i = 0; i < 20000 && !heard; i++) usleep(1000);
        if (!heard) gt_fail(P, (int)me.rank, "event-not-heard");
        if (strcmp(from_ns, me.nspace) != 0 || from_rank != 0) gt_fail(P, (int)me.rank, "event-from-%s:%u", from_ns, from_rank);
        if (strcmp(word, "hello") != 0) gt_fail(P, (int)me.rank, "event-info-%s", word[0] ? word : "missing");
    }

    /* Nobody leaves before everyone heard. */
    if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) gt_fail(P, (int)me.rank, "fence-%s", PMIx_Error_string(rc));
    printf("ok event rank=%u\n", me.rank);
    fflush(stdout);
    PMIx_Finalize(NULL, 0);
    return 0;
}
