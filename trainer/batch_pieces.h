/* A batch cut into sub-batches for calls that take a bounded number of elements. cuDNN's
 * legacy API refuses any tensor of 2^31 elements or more (cudnnSetTensor4dDescriptor and
 * cudnnSetTensorNdDescriptor return NOT_SUPPORTED), so the GPU backend, as PyTorch does, runs
 * a convolution or a softmax of a larger batch as one call per piece. Pure arithmetic, tested
 * on the CPU (tests/trainer_cudnn.c). */
#ifndef TRAINER_BATCH_PIECES_H
#define TRAINER_BATCH_PIECES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDNN_MAX_ELEMENTS ((size_t)INT32_MAX) /* the most elements one cuDNN tensor may hold */

typedef struct BatchPieces {
    int size;  /* images in every piece but the last */
    int count; /* pieces */
    int last;  /* images in the last piece: size, or fewer */
} BatchPieces;

/* Cuts a batch of images of per_image elements (the largest tensor of the call) into as few
 * pieces as keep each within max_elements and, when max_images > 0, within max_images images:
 * whole pieces first, the remainder last. Returns 0, or -1 when one image alone is over
 * max_elements. */
int batch_pieces(int batch, size_t per_image, size_t max_elements, int max_images, BatchPieces *p);

/* Which of at most two shapes piece k has: 0 for a whole piece, 1 for a shorter last one. */
static inline int batch_piece_shape(const BatchPieces *p, int k)
{
    return k == p->count - 1 && p->last != p->size;
}

#ifdef __cplusplus
}
#endif

#endif
