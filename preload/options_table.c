/* Prints the README's table of options, generated from LMS_OPTION_TABLE. */
#include "preload/options.h"

int main(void)
{
    lms_options_print_markdown(stdout);
    return 0;
}
