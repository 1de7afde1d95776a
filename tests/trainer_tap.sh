# Sourced by the trainer's shell tests: a scratch directory to run in (removed at exit), the
# trainer's path, and report STATUS DESCRIPTION, which prints one TAP line and counts
# failures in $failed.
trainer="$LMS_BUILD_DIR/trainer/lms-trainer"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
n=0
failed=0
report() { # status description
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi
}
