/* lms_both_modes PROGRAM [ARGUMENT...]: runs a TAP test program (found in PATH) once with
 * host-located VMM on and once with it off on the simulated GPU, its TAP relayed with the mode
 * named on each line (lms_testlib.h). The script tests that run programs under liblms run
 * through it. */
#include "tests/lms_testlib.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        bail_out("usage: %s PROGRAM [ARGUMENT...]", argv[0]);
    lms_test_in_both_modes(argv + 1);
}
