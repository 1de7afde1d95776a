/* Call stacks: capture (libunwind, found at run time), interning, naming. */
#include "preload/stack.h"

#include "preload/real_dlsym.h"

#include <dlfcn.h>
#include <link.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <unistd.h>

/* More distinct call sites than this means something loops over generated code paths;
 * later stacks get id 0 rather than growing without bound. */
#define MAX_STACKS (1u << 20)
/* Frames inside liblms that may sit on top of the caller's frames. */
#define OWN_FRAMES_MAX 16
/* Frames above the caller's caller: lms_stack_capture and its caller. */
#define SKIPPED_FRAMES 2

typedef struct stack_entry {
    UT_hash_handle hh;
    uint32_t id;
    uint32_t depth;
    uintptr_t pcs[];            /* [depth], the key */
} stack_entry;

static pthread_mutex_t stacks_lock = PTHREAD_MUTEX_INITIALIZER;
static stack_entry *stacks_by_pcs;
static stack_entry **stacks_by_id;  /* [stacks_count + 1]; slot 0 unused */
static uint32_t stacks_count, stacks_capacity;

typedef int (*backtrace_fn)(void **buffer, int size);
static pthread_once_t unwinder_once = PTHREAD_ONCE_INIT;
static backtrace_fn unwinder;
/* The code of liblms, whose frames a stack leaves out; empty when this code is linked
 * into the program itself (the tests), where every frame is the caller's. */
static uintptr_t own_start, own_end;

static int find_own_code(struct dl_phdr_info *object, size_t size, void *data)
{
    (void)size;
    uintptr_t here = (uintptr_t)data;
    for (int i = 0; i < object->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &object->dlpi_phdr[i];
        uintptr_t start = object->dlpi_addr + segment->p_vaddr;
        if (segment->p_type != PT_LOAD || here < start || here >= start + segment->p_memsz)
            continue;
        if (object->dlpi_name && object->dlpi_name[0]) {  /* "" names the program */
            own_start = start;
            own_end = start + segment->p_memsz;
        }
        return 1;
    }
    return 0;
}

static void find_unwinder(void)
{
#ifdef __SANITIZE_THREAD__
    /* unw_backtrace keeps a per-thread cache whose destructor locks a mutex after
     * ThreadSanitizer has let go of the exiting thread, which crashes: use glibc's unwinder. */
    void *lib = NULL;
#else
    void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libunwind.so", RTLD_NOW | RTLD_LOCAL);
#endif
    unwinder = lib ? (backtrace_fn)lms_libc_dlsym(lib, "unw_backtrace") : NULL;
    if (!unwinder) unwinder = backtrace;
    dl_iterate_phdr(find_own_code, (void *)(uintptr_t)find_unwinder);
}

static bool frame_is_own(void *pc)
{
    return (uintptr_t)pc >= own_start && (uintptr_t)pc < own_end;
}

static stack_entry *intern(const uintptr_t *pcs, uint32_t depth)
{
    size_t key_len = depth * sizeof *pcs;
    stack_entry *entry;
    HASH_FIND(hh, stacks_by_pcs, pcs, key_len, entry);
    if (entry || stacks_count >= MAX_STACKS) return entry;
    if (stacks_count + 1 >= stacks_capacity) {
        uint32_t capacity = stacks_capacity ? stacks_capacity * 2 : 256;
        stack_entry **grown = realloc(stacks_by_id, capacity * sizeof *grown);
        if (!grown) return NULL;
        stacks_by_id = grown;
        stacks_capacity = capacity;
    }
    entry = malloc(sizeof *entry + key_len);
    if (!entry) return NULL;
    entry->id = ++stacks_count;
    entry->depth = depth;
    memcpy(entry->pcs, pcs, key_len);
    stacks_by_id[entry->id] = entry;
    HASH_ADD_KEYPTR(hh, stacks_by_pcs, entry->pcs, key_len, entry);
    return entry;
}

void lms_stack_fork_lock(void) { pthread_mutex_lock(&stacks_lock); }
void lms_stack_fork_unlock(void) { pthread_mutex_unlock(&stacks_lock); }

uint32_t lms_stack_capture(unsigned depth)
{
    if (depth == 0) return 0;
    if (depth > LMS_STACK_MAX_DEPTH) depth = LMS_STACK_MAX_DEPTH;
    pthread_once(&unwinder_once, find_unwinder);

    void *frames[LMS_STACK_MAX_DEPTH + OWN_FRAMES_MAX + SKIPPED_FRAMES];
    int count = unwinder(frames, (int)depth + OWN_FRAMES_MAX + SKIPPED_FRAMES);
    /* Leave out everything up to our caller's frame: unwinders (and sanitizers wrapping
     * them) differ in how many frames of their own they report. */
    void *caller = __builtin_return_address(0);
    int first = 0;
    while (first < count && frames[first] != caller) first++;
    first = first < count ? first + 1 : SKIPPED_FRAMES;
    while (first < count && frame_is_own(frames[first])) first++;
    if (first >= count) return 0;
    uint32_t kept = (uint32_t)(count - first) < depth ? (uint32_t)(count - first) : depth;

    uintptr_t pcs[LMS_STACK_MAX_DEPTH];
    for (uint32_t i = 0; i < kept; i++) pcs[i] = (uintptr_t)frames[first + i];
    pthread_mutex_lock(&stacks_lock);
    stack_entry *entry = intern(pcs, kept);
    uint32_t id = entry ? entry->id : 0;
    pthread_mutex_unlock(&stacks_lock);
    return id;
}

size_t lms_stack_frames(uint32_t id, const uintptr_t **pcs)
{
    size_t depth = 0;
    pthread_mutex_lock(&stacks_lock);
    if (id >= 1 && id <= stacks_count) {
        *pcs = stacks_by_id[id]->pcs;
        depth = stacks_by_id[id]->depth;
    }
    pthread_mutex_unlock(&stacks_lock);
    return depth;
}

size_t lms_stack_frame_name(uintptr_t pc, char *buf, size_t len)
{
    if (len == 0) return 0;
    Dl_info info;
    int written;
    /* Return addresses point after the call: pc - 1 lies inside the calling function. */
    if (!dladdr((void *)(pc - 1), &info) || !info.dli_fname) {
        written = snprintf(buf, len, "0x%jx", (uintmax_t)pc);
    } else {
        const char *slash = strrchr(info.dli_fname, '/');
        const char *object = slash ? slash + 1 : info.dli_fname;
        if (!*object) object = "program";
        if (info.dli_sname)
            written = snprintf(buf, len, "%s+0x%jx (%s)", info.dli_sname,
                               (uintmax_t)(pc - (uintptr_t)info.dli_saddr), object);
        else
            written = snprintf(buf, len, "%s+0x%jx", object,
                               (uintmax_t)(pc - (uintptr_t)info.dli_fbase));
    }
    if (written < 0) { buf[0] = '\0'; return 0; }
    return (size_t)written < len ? (size_t)written : len - 1;
}

typedef struct build_id_search {
    uintptr_t bias;
    char *hex;
    size_t len;
} build_id_search;

static int find_build_id(struct dl_phdr_info *object, size_t size, void *data)
{
    (void)size;
    build_id_search *search = data;
    if (object->dlpi_addr != search->bias) return 0;
    for (int i = 0; i < object->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &object->dlpi_phdr[i];
        if (segment->p_type != PT_NOTE) continue;
        const char *note = (const char *)(object->dlpi_addr + segment->p_vaddr), *end = note + segment->p_memsz;
        while (note + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *header = (const ElfW(Nhdr) *)note;
            const unsigned char *desc = (const unsigned char *)note + sizeof *header + ((header->n_namesz + 3) & ~3u);
            if (header->n_type == NT_GNU_BUILD_ID && header->n_namesz == 4 && memcmp(header + 1, "GNU", 4) == 0 &&
                header->n_descsz * 2 < search->len) {
                for (size_t b = 0; b < header->n_descsz; b++) {
                    search->hex[2 * b] = "0123456789abcdef"[desc[b] >> 4];
                    search->hex[2 * b + 1] = "0123456789abcdef"[desc[b] & 15];
                }
                search->hex[2 * header->n_descsz] = '\0';
                return 1;
            }
            note = (const char *)desc + ((header->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

bool lms_stack_frame_object(uintptr_t pc, lms_stack_object *object)
{
    Dl_info info;
    struct link_map *map = NULL;
    if (!dladdr1((void *)(pc - 1), &info, (void **)&map, RTLD_DL_LINKMAP) || !map) return false;
    object->id = map;
    object->bias = map->l_addr;
    object->build_id[0] = '\0';
    if (map->l_name && map->l_name[0]) {
        snprintf(object->path, sizeof object->path, "%s", map->l_name);
    } else {                       /* the program itself */
        ssize_t n = readlink("/proc/self/exe", object->path, sizeof object->path - 1);
        object->path[n > 0 ? n : 0] = '\0';
    }
    build_id_search search = { map->l_addr, object->build_id, sizeof object->build_id };
    dl_iterate_phdr(find_build_id, &search);
    return object->path[0] != '\0';
}
