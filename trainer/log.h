/* Caffe-style log lines on stderr: "I1123 10:57:27.123456 trainer] message". */
#ifndef TRAINER_LOG_H
#define TRAINER_LOG_H

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
