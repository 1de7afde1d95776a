#include "trainer/batch_pieces.h"

int batch_pieces(int batch, size_t per_image, size_t max_elements, int max_images, BatchPieces *p)
{
    size_t fit = per_image ? max_elements / per_image : (size_t)batch;
    if (fit == 0) return -1;
    size_t size = (size_t)batch;
    if (fit < size) size = fit;
    if (max_images > 0 && (size_t)max_images < size) size = (size_t)max_images;
    p->size = (int)size;
    p->count = (int)(((size_t)batch + size - 1) / size);
    p->last = batch - (p->count - 1) * p->size;
    return 0;
}
