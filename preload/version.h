/* liblms's version: the one place it is written. The library, its tools, the pkg-config file
 * and the man pages take it from here (GNUmakefile reads this line). */
#ifndef LMS_PRELOAD_VERSION_H
#define LMS_PRELOAD_VERSION_H

#define LMS_VERSION "0.1.0"

#endif
