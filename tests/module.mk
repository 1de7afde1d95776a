# The TAP producer, linked into every C test.
TAP_OBJ := $(BUILD)/tests/tap.o

$(BUILD)/tests/tap_self_test.t: $(BUILD)/tests/tap_self_test.o $(TAP_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

TESTS += $(BUILD)/tests/tap_self_test.t

# GPU smoke test: our own kernel and a cuBLAS call on the real device.
$(BUILD)/tests/gpu_smoke.t: $(BUILD)/tests/gpu_smoke.o $(TAP_OBJ)
	$(NVCC) $(NVCCFLAGS) -o $@ $^ -lcublas

GPU_TESTS += $(BUILD)/tests/gpu_smoke.t

# The README's table of options is a copy of the one generated from preload/options.h.
$(BUILD)/tests/readme_options.t: tests/readme_options.sh $(BUILD)/preload/options.md
	@mkdir -p $(@D)
	cp $< $@ && chmod 0755 $@

TESTS += $(BUILD)/tests/readme_options.t

# The fault sweep (tests/fault_sweep.py): its reference workload, a sampled sweep in `make
# test`, and all of it in `make check-faults`.
$(BUILD)/tests/fault_workload: $(BUILD)/tests/fault_workload.o $(BUILD)/tests/tap.o \
    $(BUILD)/tests/lms_testlib.o $(LIBLMS) $(SIM_DIR)/libcuda.so
	$(CC) $(LDFLAGS) -o $@ $< $(LMS_TEST_LIBS)
$(BUILD)/tests/fault_sweep_sampled.t: tests/fault_sweep.py $(BUILD)/tests/fault_workload
	printf '#!/bin/sh\nexec python3 "%s" --sampled "$$@"\n' "$(abspath tests/fault_sweep.py)" > $@ && chmod +x $@

TESTS += $(BUILD)/tests/fault_sweep_sampled.t

.PHONY: check-faults
check-faults: all $(BUILD)/tests/fault_workload
	$(TEST_ENV) python3 tests/fault_sweep.py
