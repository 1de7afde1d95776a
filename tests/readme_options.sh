#!/bin/sh
# The table of options in README.md is the one generated from the option table
# (build/preload/options.md); `make update-readme` copies it in.
set -u
echo 1..1
generated=$LMS_BUILD_DIR/preload/options.md
copy=$(sed -n '/<!-- options:begin -->/,/<!-- options:end -->/p' "$LMS_SOURCE_DIR/README.md" | sed '1d;$d')
if [ "$copy" = "$(cat "$generated")" ]; then
    echo "ok 1 - README.md's table of options matches $generated"
else
    echo "not ok 1 - README.md's table of options differs from $generated (run make update-readme)"
    printf '%s\n' "$copy" | diff - "$generated" | sed 's/^/# /' >&2
fi
