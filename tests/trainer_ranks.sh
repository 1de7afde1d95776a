#!/bin/sh
# Data-parallel training (trainer/ranks.h, trainer/data_parallel.h) with Open MPI's mpirun:
# 2 and 4 CPU ranks print the losses of one rank with the combined batch (relative difference
# below 1e-5, the sums being taken in another order); a run of 2 ranks resumed from rank 0's
# snapshot repeats the uninterrupted one; 2 simulated ranks under liblms, swapping at 4x
# oversubscription, print the CPU ranks' losses, and so do the 2 that --sim --gpu 0,1 starts
# by itself; those ranks' liblms statistics name them and show peaks that agree, as info's
# figures per rank do; bad --gpu lists, and more ranks than a node's GPUs, are refused in one
# line; a rank that fails, or is killed, ends the whole job with a message naming it and
# leaves no process behind. Skips where there is no mpirun, or where the trainer was built
# without MPI.
set -u
. "$LMS_SOURCE_DIR/tests/trainer_tap.sh"

if ! command -v mpirun >/dev/null 2>&1; then
    echo "1..0 # skip no mpirun on this machine (make deps installs Open MPI)"
    exit 0
fi
# CI runs as root, which Open MPI refuses unless told.
if [ "$(id -u)" -eq 0 ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
# Under ASan, what Open MPI keeps to the end is not a leak of the trainer's; the full stacks
# reach the MPI library that allocated it.
if [ "${SANITIZE:-}" = address ]; then
    ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0
    LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$LMS_SOURCE_DIR/tests/trainer_ranks.supp
    export ASAN_OPTIONS LSAN_OPTIONS
fi
# More ranks than cores: none bound to a core, each yielding while it waits.
oversubscribed="--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
ranks() { # N COMMAND...
    count=$1
    shift
    mpirun $oversubscribed -np "$count" "$@"
}
if ! ranks 2 "$trainer" info --model lenet >probe.txt 2>&1 && grep -q 'built without MPI' probe.txt; then
    echo "1..0 # skip the trainer was built without MPI (no mpicc when it was built)"
    exit 0
fi

# "ITER LOSS" for every displayed iteration of a log.
losses() { sed -n 's/.*] Iteration \([0-9]*\) (.*loss = \(.*\)$/\1 \2/p' "$1"; }
# Whether two loss lists have the same iterations and losses within a relative 1e-5.
close_losses() {
    paste "$1" "$2" | awk 'NF != 4 || $1 != $3 { bad = 1 }
        { d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if (d > 1e-5 * m) bad = 1 }
        END { exit bad || NR != 20 }'
}
iterations=20
flags="--model lenet --iters $iterations --display 1 --test-interval 0"

"$trainer" train $flags --cpu --batch 8 --snapshot-prefix one 2>one.log
losses one.log >one.txt
for count in 2 4; do
    ranks $count "$trainer" train $flags --cpu --batch $((8 / count)) --snapshot-prefix ranks$count 2>ranks$count.log
    status=$?
    losses ranks$count.log >ranks$count.txt
    [ $status -eq 0 ] && close_losses one.txt ranks$count.txt
    report $? "$count ranks at batch $((8 / count)) print the losses of one rank at batch 8 over $iterations iterations (last: $(tail -n 1 ranks$count.txt | cut -d' ' -f2), $(tail -n 1 one.txt | cut -d' ' -f2))"
done
# Rank 0 alone logs: one line per iteration, none from another rank.
[ "$(grep -c '] Iteration 7 (' ranks4.log)" -eq 1 ] && ! grep -q '^rank [1-9]' ranks4.log
report $? "only rank 0 logs"

ranks 2 "$trainer" train $flags --cpu --batch 4 --snapshot 10 --snapshot-prefix whole 2>whole.log &&
    ranks 2 "$trainer" train $flags --cpu --batch 4 --resume whole_iter_10.snap --snapshot-prefix resumed 2>resumed.log
status=$?
losses whole.log | awk '$1 >= 10' >whole.txt
losses resumed.log >resumed.txt
[ $status -eq 0 ] && [ -s resumed.txt ] && cmp -s whole.txt resumed.txt &&
    cmp -s whole_iter_$iterations.snap resumed_iter_$iterations.snap
report $? "2 ranks resumed from rank 0's snapshot of iteration 10 repeat the uninterrupted run's losses and snapshot"

ranks 2 "$trainer" train $flags --cpu --batch 4 --resume missing.snap 2>missing.log
status=$?
[ $status -eq 2 ] && grep -q 'error: --resume: .*missing.snap' missing.log && grep -q 'rank 0 of 2 failed (status 2): ending the job' missing.log
report $? "a snapshot rank 0 cannot read ends the job: exit $status, the reason and the rank named"

# Two ranks on a node whose GPUs they all see, but none visible: exit 2 and one line.
CUDA_VISIBLE_DEVICES= ranks 2 "$trainer" train $flags --batch 4 >crowded.out 2>crowded.log
status=$?
[ $status -eq 2 ] && [ "$(grep -c 'trainer' crowded.log)" -eq 1 ] &&
    grep -q '^lms-trainer: error: 2 ranks on one node need CUDA devices 0 to 1, but they share a view of 0: ' crowded.log
report $? "2 ranks sharing a view of no GPU: exit $status and one line"

# Simulated ranks, each with its own simulated GPU (sim/) under liblms, its cache at a quarter
# of what a rank's run demands at its peak: the CPU ranks' losses and snapshot, digit for
# digit, both ranks swapping both ways. The gradients go through host memory.
for v in $(env | sed -n 's/^\(LMS_[A-Z0-9_]*\)=.*/\1/p'); do
    case $v in LMS_BUILD_DIR | LMS_SOURCE_DIR) ;; *) unset "$v" ;; esac
done
capacity_mb=1024
LMS_SIM_CAPACITY_MB=$capacity_mb LMS_SIM_LOG=$work/sim.log LMS_THRESHOLD_KB=16 LMS_STATS=json
export LMS_SIM_CAPACITY_MB LMS_SIM_LOG LMS_THRESHOLD_KB LMS_STATS
# ASan's runtime has to come first in the process's libraries.
preload=$LMS_BUILD_DIR/preload/liblms.so
[ "${SANITIZE:-}" = address ] && preload="$(gcc -print-file-name=libasan.so) $preload"
env LD_PRELOAD="$preload" "$trainer" train $flags --batch 4 --sim --snapshot-prefix peak 2>peak.log
peak=$(sed -n 's/.*"peak_demanded":\([0-9]*\).*/\1/p' peak.log)
kib=$((${peak:-0} / 4 / 1024))
ranks 2 env LD_PRELOAD="$preload" LMS_EXCLUDE_MB=$((capacity_mb * 1024 - kib))K \
    "$trainer" train $flags --sim --batch 4 --snapshot-prefix sim 2>sim2.log
status=$?
losses sim2.log >sim2.txt
swapping=$(grep -c '"swapped_out":{"count":[1-9][0-9]*,.*"swapped_in":{"count":[1-9]' sim2.log)
[ $status -eq 0 ] && [ "$kib" -gt 0 ] && cmp -s ranks2.txt sim2.txt && cmp -s ranks2_iter_$iterations.snap sim_iter_$iterations.snap &&
    [ "$swapping" -eq 2 ]
report $? "2 simulated ranks under liblms, each cache at 1/4 of the peak demand ($kib KiB): the CPU ranks' losses and snapshot; $swapping of 2 swapped both ways"
[ ! -s sim.log ]
report $? "they made no call the simulated GPU does not support (LMS_SIM_LOG is empty)"

# --gpu 0,1 starts the 2 ranks itself, a simulated GPU each, under the liblms it was started
# with (mpirun passes LD_PRELOAD on): the mpirun ranks' losses and snapshot. mpirun's settings
# come from the environment, as a user's would.
mca="OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_mpi_yield_when_idle=1"
env $mca LD_PRELOAD="$preload" LMS_EXCLUDE_MB=$((capacity_mb * 1024 - kib))K \
    "$trainer" train $flags --sim --batch 4 --gpu 0,1 --snapshot-prefix spawned 2>spawned.log
status=$?
losses spawned.log >spawned.txt
[ $status -eq 0 ] && cmp -s ranks2.txt spawned.txt && cmp -s ranks2_iter_$iterations.snap spawned_iter_$iterations.snap
report $? "--sim --gpu 0,1 under liblms starts 2 ranks itself: the mpirun ranks' losses and snapshot (exit $status)"

# Balance: each rank's statistics name it, and no rank demanded more than another at its peak
# (1 % of slack): none holds the others' outputs, as DataParallel's GPU 0 did. info's planned
# figures per rank agree too, and with one rank's at that batch.
peaks=$(sed -n 's/.*"rank":\([0-9]*\),.*"peak_demanded":\([0-9]*\).*/\1 \2/p' spawned.log | sort -n | tr '\n' ' ')
echo "$peaks" | awk '{ for (i = 1; i < NF; i += 2) { seen[$i] = 1; p[++n] = $(i + 1) } }
    END { lo = p[1]; hi = p[1]; for (i = 2; i <= n; i++) { if (p[i] < lo) lo = p[i]; if (p[i] > hi) hi = p[i] }
          exit !(n == 2 && (0 in seen) && (1 in seen) && lo > 0 && hi - lo <= hi / 100) }'
report $? "the 2 ranks' liblms statistics name them, their peaks demanded within 1 % (rank, bytes: $peaks)"
one=$("$trainer" info --model lenet --batch 4 | sed -n 's/^  total: *\([0-9]*\) bytes.*/\1/p')
env $mca "$trainer" info --model lenet --batch 4 --sim --gpu 0,1 >info2.txt 2>info2.log
status=$?
planned=$(sed -n 's/^  rank \([0-9]*\): \([0-9]*\) bytes.*/\1 \2/p' info2.txt | tr '\n' ' ')
[ $status -eq 0 ] && [ "$planned" = "0 $one 1 $one " ] && [ "$(grep -c '^Model lenet' info2.txt)" -eq 1 ]
report $? "info of 2 ranks: rank 0 prints the net once and each rank's planned device memory, one rank's ($planned)"

# Bad lists: exit 2 and one line naming --gpu, before any rank starts; a list under a launcher
# too, from rank 0 alone.
bad=
for list in 0,0 -1,1 0,x 0, 1,,2; do
    "$trainer" train $flags --sim --gpu "$list" >bad.out 2>bad.log
    [ $? -eq 2 ] && [ "$(wc -l <bad.log)" -eq 1 ] && grep -q -- '^lms-trainer: error: --gpu' bad.log || bad="$bad $list"
done
for args in "--sim --gpu all" "--gpu 0,99" "--cpu --gpu 0,1"; do
    "$trainer" train $flags $args >bad.out 2>bad.log
    [ $? -eq 2 ] && [ "$(wc -l <bad.log)" -eq 1 ] && grep -q -- '^lms-trainer: error: --gpu' bad.log || bad="$bad '$args'"
done
ranks 2 "$trainer" train $flags --sim --gpu 0,1 >bad.out 2>bad.log
[ $? -eq 2 ] && [ "$(grep -c 'trainer' bad.log)" -eq 1 ] && grep -q '^lms-trainer: error: --gpu: a list' bad.log ||
    bad="$bad 'under mpirun'"
if [ "$(id -u)" -eq 0 ]; then
    env -u OMPI_ALLOW_RUN_AS_ROOT "$trainer" train $flags --sim --gpu 0,1 >bad.out 2>bad.log
    [ $? -eq 2 ] && [ "$(wc -l <bad.log)" -eq 1 ] && grep -q 'mpirun refuses to start ranks as root' bad.log ||
        bad="$bad 'root without OMPI_ALLOW_RUN_AS_ROOT'"
fi
[ -z "$bad" ]
report $? "bad --gpu lists get exit 2 and one line naming --gpu (failed:${bad:- none})"

# Rank 1's simulated GPU is too small for the net: it says so, prefixed with its rank, and
# ends the job. Its lines need not start mpirun's: mpirun copies each rank's output as it reads
# it, 4 KiB at a time, so rank 0's log can be cut short of a line end just before them.
ranks 2 sh -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] &&
    export LMS_SIM_CAPACITY_MB=8 LMS_SIM_CONTEXT_RESERVE_MB=0 LMS_SIM_KERNEL_RESERVE_MB=0; exec "$0" "$@"' \
    "$trainer" train $flags --sim --batch 64 2>small.log
status=$?
[ $status -eq 1 ] && grep -q 'rank 1: lms-trainer: error: lenet: out of simulated GPU memory' small.log &&
    grep -q 'rank 1: lms-trainer: rank 1 of 2 failed (status 1): ending the job' small.log
report $? "a rank that fails alone says so, prefixed with its rank, and ends the job (exit $status)"

# Kill rank 1 mid-run: mpirun ends the job, well within timeout's bound (exit 124), and names
# the rank. Its exit status is the killed rank's.
timeout 60 mpirun $oversubscribed -np 2 "$trainer" train $flags --cpu --batch 4 --iters 1000000 \
    --snapshot-prefix killed 2>killed.log &
job=$!
tries=0
until grep -q '] Iteration 3 (' killed.log || [ $tries -ge 300 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
launcher=$(ps -o pid= --ppid $job)
members=$(for p in $launcher; do ps -o pid= --ppid "$p"; done)
victim=$(for p in $members; do tr '\0' '\n' <"/proc/$p/environ" | grep -qx 'OMPI_COMM_WORLD_RANK=1' && echo "$p"; done)
[ -n "$victim" ] && kill -KILL "$victim"
wait $job
status=$?
left=
tries=0
while [ $tries -lt 100 ]; do
    left=$(for p in $members; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
    [ -z "$left" ] && break
    sleep 0.1
    tries=$((tries + 1))
done
[ -n "$victim" ] && [ $status -ne 0 ] && [ $status -ne 124 ] &&
    grep -q 'process rank 1 .* exited on signal 9' killed.log && [ -z "$left" ]
report $? "rank 1 killed: the job ends (exit $status), naming the rank, and leaves none of its ranks (${left:-none left})"

echo "1..$n"
exit $failed
