/* An NVTX injection library for the tests, as Nsight Systems attaches one: load it with
 * NVTX_INJECTION64_PATH=.../nvtx_counter.so. It counts the ranges started and ended in the
 * domain "liblms", by the first word pair of their message ("swap out", "swap in"), and at
 * exit prints one line on stderr:
 *   nvtx liblms: swap out 3 swap in 2 other 0 ended 5 unmatched 0
 * "unmatched" counts ends of ids that were never started (or ended twice). */
#include <nvToolsExt.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MAX_OPEN 1024

static char liblms_domain; /* its address is the handle of domain "liblms" */
static char other_domain;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t open_ids[MAX_OPEN];
static size_t open_count;
static uint64_t next_id = 1;
static unsigned swap_out, swap_in, other, ended, unmatched;

static nvtxDomainHandle_t domain_create(const char *name)
{
    return (nvtxDomainHandle_t)(strcmp(name, "liblms") == 0 ? &liblms_domain : &other_domain);
}

static nvtxRangeId_t range_start(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attributes)
{
    if (domain != (nvtxDomainHandle_t)&liblms_domain)
        return 0;
    const char *message = attributes && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII
                              ? attributes->message.ascii : "";
    pthread_mutex_lock(&lock);
    if (strncmp(message, "swap out ", 9) == 0) swap_out++;
    else if (strncmp(message, "swap in ", 8) == 0) swap_in++;
    else other++;
    uint64_t id = next_id++;
    if (open_count < MAX_OPEN) open_ids[open_count++] = id;
    pthread_mutex_unlock(&lock);
    return id;
}

static void range_end(nvtxDomainHandle_t domain, nvtxRangeId_t id)
{
    if (domain != (nvtxDomainHandle_t)&liblms_domain)
        return;
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < open_count && open_ids[i] != id) i++;
    if (i < open_count) {
        open_ids[i] = open_ids[--open_count];
        ended++;
    } else {
        unmatched++;
    }
    pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void report(void)
{
    pthread_mutex_lock(&lock);
    fprintf(stderr, "nvtx liblms: swap out %u swap in %u other %u ended %u unmatched %u\n", swap_out,
            swap_in, other, ended, unmatched);
    pthread_mutex_unlock(&lock);
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table)
{
    const NvtxExportTableCallbacks *callbacks = get_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table;
    unsigned size;
    if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
        size <= NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *table[NVTX_CBID_CORE2_DomainRangeStartEx] = (NvtxFunctionPointer)range_start;
    *table[NVTX_CBID_CORE2_DomainRangeEnd] = (NvtxFunctionPointer)range_end;
    return 1;
}
