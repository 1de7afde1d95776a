/* The built-in models, each a short definition in models.c, with Caffe's solver defaults. */
#ifndef TRAINER_MODELS_H
#define TRAINER_MODELS_H

#include "trainer/net.h"
#include "trainer/solver.h"

typedef struct ModelOptions {
    int unet_size;       /* unet3d: the volume is unet_size^3 voxels; a multiple of 16 */
    LayerType unet_loss; /* unet3d: LAYER_DICE_LOSS or LAYER_SOFTMAX_LOSS */
} ModelOptions;

typedef struct Model {
    const char *name, *description;
    int c, d, h, w;          /* input shape of one sample (d, h, w from options for unet3d) */
    int classes;
    int segmentation;        /* a label per voxel rather than per sample */
    int default_batch;
    float input_scale;       /* preprocessing: (pixel - 128 if subtract_mean) * input_scale */
    int subtract_mean;
    SolverConfig solver;     /* Caffe's defaults for the model */
    void (*build)(Net *net, const ModelOptions *opt);
} Model;

const Model *model_find(const char *name); /* NULL when unknown */
const char *model_names(void);              /* "lenet, cifar10_quick, ..." */

/* Builds the net for a batch; the model's input shape follows opt for unet3d. */
Net *model_build(const Model *m, int batch, const ModelOptions *opt);
/* The input shape of one sample. */
void model_input_shape(const Model *m, const ModelOptions *opt, int *c, int *d, int *h, int *w);

#endif
