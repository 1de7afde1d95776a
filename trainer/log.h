/* Caffe-style log lines on stderr: "I1123 10:57:27.123456 trainer] message". */
#ifndef TRAINER_LOG_H
#define TRAINER_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One rank of several (trainer/ranks.h): rank 0 logs; any other drops log_info's lines and
 * prefixes with "rank N: " each line it writes to stderr (its warnings and errors). */
void log_set_rank(int rank);

#ifdef __cplusplus
}
#endif

#endif
