# The simulated GPU: a libcuda.so.1 that runs the driver API on host memory, for tests.
# Others link it with -L$(SIM_DIR) -lcuda, or put $(SIM_DIR) on LD_LIBRARY_PATH.
SIM_DIR := $(BUILD)/sim
SIM_LIB := $(SIM_DIR)/libcuda.so.1

SIM_SRC := $(addprefix sim/,control.c config.c contexts.c memory.c vmm.c pointers.c ipc.c timeline_file.c \
                    streams.c events.c capture.c graphs.c transfers.c kernels.c modules.c \
                    memops.c per_thread.c procaddress.c timing.c calibration.c clock.c report.c)
SIM_OBJ := $(SIM_SRC:%.c=$(BUILD)/%.o)

# One stub per entry point that cuda.h declares, named without version or stream suffix.
$(SIM_DIR)/unsupported_names.h: $(CUDA_HOME)/include/cuda.h $(CUDA_HOME)/include/cudaProfiler.h
	@mkdir -p $(@D)
	cat $^ | tr -s ' \n' '  ' | grep -o 'CUresult CUDAAPI cu[A-Za-z0-9_]*' | \
	  sed 's/.* //; s/_pt[sd][sz]$$//; s/_v[0-9][0-9]*$$//' | sort -u | \
	  sed 's/.*/CD_UNSUPPORTED(&)/' > $@.tmp && mv $@.tmp $@

$(BUILD)/sim/procaddress.o: $(SIM_DIR)/unsupported_names.h
$(BUILD)/sim/procaddress.o: CPPFLAGS += -I$(SIM_DIR)

# -Bsymbolic-functions: calls inside the simulator stay inside it, even when an LD_PRELOADed
# interposer exports the same entry points.
$(SIM_LIB): $(SIM_OBJ)
	$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions $(LDFLAGS) -o $@ $^ -lpthread -ldl

$(SIM_DIR)/libcuda.so: $(SIM_LIB)
	ln -sf libcuda.so.1 $@

ALL_TARGETS += $(SIM_LIB) $(SIM_DIR)/libcuda.so
INSTALL_SIM += $(SIM_LIB)

# The simulator's own tests. Each links the simulator directly (rpath: no other libcuda is found),
# except sim_loading, which finds it the way cudart does.
SIM_TEST_NAMES := access capture contexts copies devices driver_memory faults graphs kernel_reach kernels loading memops memory \
                  modules per_thread pointers streams timing timing_only unmap_in_flight vmm
SIM_TESTS := $(SIM_TEST_NAMES:%=$(BUILD)/tests/sim_%.t)

# tests/module.mk, included after this file, names $(BUILD)/tests/tap.o TAP_OBJ.
$(BUILD)/tests/sim_%.t: $(BUILD)/tests/sim_%.o $(BUILD)/tests/tap.o $(SIM_DIR)/libcuda.so
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -L$(SIM_DIR) \
	  -Wl,-rpath,$(abspath $(SIM_DIR)) -lcuda -lpthread
$(BUILD)/tests/sim_streams.t $(BUILD)/tests/sim_per_thread.t $(BUILD)/tests/sim_vmm.t: $(BUILD)/tests/sim_int_kernels.o

# Not linked with the simulator: it dlopens it from LD_LIBRARY_PATH.
$(BUILD)/tests/sim_loading.t: $(BUILD)/tests/sim_loading.o $(BUILD)/tests/tap.o $(SIM_DIR)/libcuda.so
	$(CC) $(LDFLAGS) -o $@ $(BUILD)/tests/sim_loading.o $(TAP_OBJ) -ldl

# The module sim_modules loads, and a second build of it with other kernels, to be loaded
# where the first was.
$(BUILD)/tests/sim_test_module.so: tests/sim_test_module.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -shared $(LDFLAGS) -o $@ $<

$(BUILD)/tests/sim_test_module_other.so: tests/sim_test_module.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -DSIM_TEST_MODULE_OTHER -shared $(LDFLAGS) -o $@ $<

$(BUILD)/tests/sim_modules.t $(BUILD)/tests/sim_timing.t $(BUILD)/tests/sim_access.t \
  $(BUILD)/tests/sim_driver_memory.t: $(BUILD)/tests/sim_test_module.so \
  $(BUILD)/tests/sim_test_module_other.so

.SECONDARY: $(SIM_TESTS:.t=.o)
TESTS += $(SIM_TESTS)
