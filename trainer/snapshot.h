/* Snapshots: a net's weights and its solver state (momentum history, iteration), so that
 * training can resume exactly where it stopped.
 *
 * File format, version 1, all integers and floats little-endian (x86-64, aarch64):
 *
 *   offset  size  field
 *   0       8     magic "LMSSNAP" followed by a NUL byte
 *   8       4     uint32 version, 1
 *   12      4     uint32 number of parameter records, P
 *   16      32    model name, NUL padded ("cifar10_full")
 *   48      8     int64 iteration: the number of solver steps taken
 *   56            P records, in the net's parameter order (layer order; weight then bias):
 *                   24 bytes  layer name, NUL padded
 *                    4 bytes  uint32 which: 0 = weight, 1 = bias
 *                   20 bytes  int32 shape[5]: n, c, d, h, w
 *                   4*count   float values (count = product of the shape)
 *                   4*count   float solver momentum history
 *   end-8   8     uint64 FNV-1a 64-bit hash of every byte before it
 *
 * Writing is atomic: a temporary file in the same directory, fsync, rename, fsync of the
 * directory. A reader checks the size, the hash, the magic, the version, the model and every
 * record's name and shape before it changes anything in the net. */
#ifndef TRAINER_SNAPSHOT_H
#define TRAINER_SNAPSHOT_H

#include <stddef.h>
#include "trainer/net.h"

#define SNAPSHOT_MAGIC "LMSSNAP"
#define SNAPSHOT_VERSION 1

/* 0, or -1 with the reason in err (nothing is left at path or beside it). */
int snapshot_write(const char *path, Net *net, long iter, char *err, size_t errlen);
/* Whether snapshot_write can write PREFIX_iter_N.snap: the names fit, and a file can be
 * created in their directory (one is, and removed at once). 0, or -1 with the reason in err. */
int snapshot_prefix_check(const char *prefix, char *err, size_t errlen);
/* Loads weights and history into net and the iteration into *iter; 0, or -1 with the reason
 * in err and net untouched. */
int snapshot_read(const char *path, Net *net, long *iter, char *err, size_t errlen);

#endif
