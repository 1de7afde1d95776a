# The TAP producer, linked into every C test.
TAP_OBJ := $(BUILD)/tests/tap.o

$(BUILD)/tests/tap_self_test.t: $(BUILD)/tests/tap_self_test.o $(TAP_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

TESTS += $(BUILD)/tests/tap_self_test.t

# GPU smoke test: our own kernel and a cuBLAS call on the real device.
$(BUILD)/tests/gpu_smoke.t: $(BUILD)/tests/gpu_smoke.o $(TAP_OBJ)
	$(NVCC) $(NVCCFLAGS) -o $@ $^ -lcublas

GPU_TESTS += $(BUILD)/tests/gpu_smoke.t
