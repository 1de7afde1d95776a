/* The commands: train, test, time and info. */
#ifndef TRAINER_RUN_H
#define TRAINER_RUN_H

#include <stdio.h>
#include "trainer/options.h"
#include "trainer/net.h"

/* Each returns the process exit status: 0, 1 (a failure while running) or 2 (bad input),
 * having printed the reason. net is set up on its backend; info needs none. */
int run_train(const Config *cfg, Net *net);
int run_test(const Config *cfg, Net *net);
int run_time(const Config *cfg, Net *net);
int run_info(const Config *cfg, const Net *net, FILE *out);

#endif
