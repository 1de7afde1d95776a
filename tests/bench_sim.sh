#!/bin/sh
# make bench-sim's quick subset: it runs, passes its own consistency checks (achieved <=
# ceiling <= ideal, bytes swapped >= the minimum), and the simulated H100 gives the same
# results bit for bit when run twice (everything but the date and the commit).
set -u
. "$LMS_SOURCE_DIR/tests/trainer_tap.sh"
echo "1..5"
bench=$LMS_SOURCE_DIR/tools/bench/lms-bench
for run in 1 2; do
    BENCH_SIM_QUICK=1 BENCH_OUT=$work/run$run "$bench" --sim >run$run.log 2>&1
    report $? "run $run of lms-bench --sim (quick) exits 0: consistent results"
done
# A result file without what may differ between runs: the date, the commit, real CPU times.
strip() {
    python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
for key in ("date", "commit"):
    r["machine"].pop(key)
r["overhead"].pop("calls")
print(json.dumps(r, sort_keys=True))' "$1"
}
strip run1/sim.json >one.json && strip run2/sim.json >two.json && [ -s one.json ] && cmp -s one.json two.json
report $? "the two runs' results are identical, bit for bit (real-time hook costs left out)"
grep -q '"simulated": true' run1/sim.json && grep -q '"calibration": "h100-' run1/sim.json
report $? "the results say they are simulated, and with which calibration"
python3 -c 'import json, sys
rows = json.load(open(sys.argv[1]))["cifar10"]["rows"]
swapping = [r for r in rows if r["liblms_per_iteration"]["swapped_in"]["bytes"] > 0]
sys.exit(not swapping or not all(any("policy: learned an iteration of" in line for line in r["liblms_log"])
                                 and "ns" not in r["liblms_per_iteration"]["stalls"] for r in rows))' run1/sim.json
report $? "each row keeps liblms's log (the iteration learned) and its statistics per timed iteration (no real-clock times)"
exit $failed
