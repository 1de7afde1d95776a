/* The files liblms writes (LMS_TRACE, LMS_STATS_FILE): created safely, never over data. */
#ifndef LMS_PRELOAD_OUTPUT_FILE_H
#define LMS_PRELOAD_OUTPUT_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* The rank a launcher gave this process (Open MPI's mpirun, PMI's or Slurm's srun, PMIx), read
 * from its variables; -1 when none did. */
int lms_launcher_rank(void);

/* Creates the file `path` names ("%p" becomes the process id, "%r" the launcher's rank, nothing
 * without one, so that the ranks of one job write files of their own and a process that
 * starts them takes none of their names) for writing, with O_EXCL and
 * O_NOFOLLOW: an existing file, or a symbolic link, is never opened. Returns the descriptor,
 * or -1 with one line naming `variable`, the path and the reason in err. */
int lms_output_file_create(const char *variable, const char *path, mode_t mode, char *err, size_t err_len);

#endif
