# Benchmarks (make bench, GPU only): CUDA micro-benchmarks and the lms-bench driver.
BENCH_DIR := $(BUILD)/tools/bench

$(BENCH_DIR)/%: tools/bench/%.cu
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -o $@ $<

$(BENCH_DIR)/lms-bench: tools/bench/lms-bench
	@mkdir -p $(@D)
	ln -sf $(abspath $<) $@

BENCH_PROGRAMS := $(BENCH_DIR)/launch_cost $(BENCH_DIR)/pinned_bandwidth
ALL_TARGETS += $(BENCH_PROGRAMS)
BENCHES += $(BENCH_DIR)/lms-bench

# make bench-sim: the same experiments on the simulated H100, and the real CPU cost of the hooks.
$(BENCH_DIR)/hook_cost: $(BUILD)/tools/bench/hook_cost.o
	$(CC) $(LDFLAGS) -o $@ $< -ldl
ALL_TARGETS += $(BENCH_DIR)/hook_cost

# bench-sim's quick subset as a test: consistent, and the same twice.
$(BUILD)/tests/bench_sim.t: tests/bench_sim.sh tests/trainer_tap.sh $(BENCH_DIR)/hook_cost $(BUILD)/trainer/lms-trainer \
    $(BUILD)/preload/liblms.so $(SIM_LIB)
	@mkdir -p $(@D)
	cp $< $@ && chmod +x $@
TESTS += $(BUILD)/tests/bench_sim.t
