# liblms.so: the LD_PRELOAD library, with the trace writer (trace.c, stack.c: the tools'
# module writes them; they are compiled here like every file of preload/).
#
# Its files stand in three layers; a file calls only its own layer and those below it
# (tests/preload_layers.py checks the built objects with nm):
# - bottom, what liblms stands on: the real driver (real_driver.c) and glibc's dlsym beneath
#   liblms's own (real_dlsym.c), the options, the log, and their helpers;
# - middle, what it does: residency, swapping, the trace, the statistics, graphs, pointer
#   arrays, launches' parameters, and fork.c, which takes the middle's locks around fork in the
#   order they nest (the top registers it at start-up);
# - top, how calls reach it: interpose.c (dlsym, cuGetProcAddress, and the start-up that loads
#   the bottom and sets the middle going) and the wrappers of the entry points.
# options_table.c is no part of the library: the options' documentation, built from options.c.
LMS_LAYER_BOTTOM := real_dlsym real_driver options log quote output_file signals stack
LMS_LAYER_MIDDLE := residency swap step_times stats trace graphs pointer_arrays launch_scan fork
LMS_LAYER_TOP    := interpose wrappers graph_wrappers nccl_wrappers queries
LMS_OBJS := $(patsubst %,$(BUILD)/preload/%.o,$(LMS_LAYER_BOTTOM) $(LMS_LAYER_MIDDLE) $(LMS_LAYER_TOP))
LIBLMS   := $(BUILD)/preload/liblms.so

$(BUILD)/preload/%.o: ALL_CFLAGS += -fvisibility=hidden

$(LIBLMS): $(LMS_OBJS) $(BUILD)/policy/libpolicy.a preload/liblms.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=preload/liblms.map -Wl,-soname,liblms.so -Wl,-z,defs -o $@ \
	  $(LMS_OBJS) $(BUILD)/policy/libpolicy.a -ldl -lpthread

# The documentation of the options (preload/options_table.c): the README's table, lms-run's
# options, the man pages' entries.
$(BUILD)/preload/lms-options-table: $(BUILD)/preload/options_table.o $(BUILD)/preload/options.o \
    $(BUILD)/preload/log.o $(BUILD)/preload/signals.o $(BUILD)/preload/quote.o $(BUILD)/policy/libpolicy.a
	$(CC) $(LDFLAGS) -o $@ $^ -ldl -lpthread
$(BUILD)/preload/options.md: $(BUILD)/preload/lms-options-table
	$< > $@
# lms-run's options, one per variable: it reads this beside the library (share/liblms when installed).
$(BUILD)/preload/options.tsv: $(BUILD)/preload/lms-options-table
	$< --tsv > $@

ALL_TARGETS += $(LIBLMS) $(BUILD)/preload/options.md $(BUILD)/preload/options.tsv
INSTALL_LIB += $(LIBLMS)

# The layers above, read from the built objects: the test gets the lists, bottom first.
comma_list = $(subst $(eval) ,$(comma),$(strip $(1)))
$(BUILD)/tests/preload_layers.t: tests/preload_layers.py preload/module.mk $(LMS_OBJS)
	@mkdir -p $(@D)
	printf '#!/bin/sh\nexec python3 "%s" "%s" bottom=%s middle=%s top=%s\n' "$(abspath $<)" \
	  "$(abspath $(BUILD)/preload)" "$(call comma_list,$(LMS_LAYER_BOTTOM))" \
	  "$(call comma_list,$(LMS_LAYER_MIDDLE))" "$(call comma_list,$(LMS_LAYER_TOP))" > $@ && chmod +x $@
TESTS += $(BUILD)/tests/preload_layers.t

# Tests on the simulated GPU: liblms.so is linked ahead of the simulator's libcuda.so.1,
# so the program's driver calls reach liblms's wrappers as they would under LD_PRELOAD.
SIM_DIR := $(BUILD)/sim
LMS_TEST_LIBS   = $(BUILD)/tests/tap.o $(BUILD)/tests/lms_testlib.o \
                  -L$(BUILD)/preload -llms -L$(SIM_DIR) -lcuda \
                  -Wl,-rpath,$(abspath $(BUILD)/preload):$(abspath $(SIM_DIR)) -lpthread
LMS_SIM_TESTS := lms_residency lms_limits lms_threads lms_stress lms_interpose lms_graphs lms_fork lms_async \
                 lms_launch_scan lms_frees lms_pools lms_capture lms_inflight lms_queries lms_peers \
                 lms_meminfo lms_entry_points lms_nccl lms_pieces lms_loop_stress lms_plan lms_devices_contention

$(foreach t,$(LMS_SIM_TESTS),$(BUILD)/tests/$(t).t): $(BUILD)/tests/%.t: $(BUILD)/tests/%.o \
    $(BUILD)/tests/tap.o $(BUILD)/tests/lms_testlib.o $(LIBLMS) $(SIM_DIR)/libcuda.so
	$(CC) $(LDFLAGS) -o $@ $< $(LMS_TEST_LIBS)

# The simulator's test modules, loaded one after the other into the same handles.
$(BUILD)/tests/lms_launch_scan.t: $(BUILD)/tests/sim_test_module.so $(BUILD)/tests/sim_test_module_other.so
$(BUILD)/tests/lms_entry_points.t: $(BUILD)/tests/sim_test_module.so

# A second interposer, linked after liblms as if preloaded after it.
$(BUILD)/tests/liblms_next.so: $(BUILD)/tests/lms_next.o
	$(CC) -shared $(LDFLAGS) -o $@ $< -ldl
$(BUILD)/tests/lms_interpose.t: $(BUILD)/tests/liblms_next.so
$(BUILD)/tests/lms_interpose.t: LMS_TEST_LIBS += -L$(BUILD)/tests -llms_next -Wl,-rpath,$(abspath $(BUILD)/tests)

# A stand-in libnccl.so.2 on the simulator (tests/fake_nccl.c), linked after liblms as a program
# links NCCL: its collectives reach liblms's NCCL wrappers first.
FAKE_NCCL := $(BUILD)/tests/fake_nccl/libnccl.so.2
$(FAKE_NCCL): $(BUILD)/tests/fake_nccl.o $(SIM_DIR)/libcuda.so
	@mkdir -p $(@D)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libnccl.so.2 -o $@ $< -L$(SIM_DIR) -lcuda -lpthread
$(BUILD)/tests/lms_nccl.t: $(FAKE_NCCL)
$(BUILD)/tests/lms_nccl.t: LMS_TEST_LIBS += $(FAKE_NCCL) -Wl,-rpath,$(abspath $(dir $(FAKE_NCCL)))

# The output tests run this program on the simulator.
$(BUILD)/tests/lms_workload: $(BUILD)/tests/lms_workload.o $(BUILD)/tests/tap.o \
    $(BUILD)/tests/lms_testlib.o $(LIBLMS) $(SIM_DIR)/libcuda.so
	$(CC) $(LDFLAGS) -o $@ $< $(LMS_TEST_LIBS)
# An NVTX injection library (NVTX_INJECTION64_PATH) that counts liblms's ranges.
$(BUILD)/tests/nvtx_counter.so: $(BUILD)/tests/nvtx_counter.o
	$(CC) -shared $(LDFLAGS) -o $@ $< -lpthread
# The script tests run once in each backing mode, through lms_both_modes.
$(BUILD)/tests/lms_both_modes: $(BUILD)/tests/lms_both_modes.o $(BUILD)/tests/tap.o $(BUILD)/tests/lms_testlib.o \
    $(SIM_DIR)/libcuda.so
	$(CC) $(LDFLAGS) -o $@ $^ -Wl,-rpath,$(abspath $(SIM_DIR)) -lpthread
LMS_IN_BOTH_MODES = printf '\#!/bin/sh\nexec "%s" python3 "%s" "$$@"\n' "$(abspath $(BUILD)/tests/lms_both_modes)" \
                    "$(abspath $<)" > $@ && chmod +x $@
$(BUILD)/tests/lms_output.t: tests/lms_output.py $(BUILD)/tests/lms_workload $(BUILD)/tests/nvtx_counter.so \
    $(BUILD)/tests/lms_both_modes
	@mkdir -p $(@D)
	$(LMS_IN_BOTH_MODES)

# Bad environment values, through LD_PRELOAD as users run it (files liblms opens only once it
# has loaded a libcuda.so.1: the simulator's).
$(BUILD)/tests/lms_env.t: tests/lms_env.py $(LIBLMS) $(SIM_DIR)/libcuda.so $(BUILD)/tests/lms_both_modes
	@mkdir -p $(@D)
	$(LMS_IN_BOTH_MODES)

TESTS += $(foreach t,$(LMS_SIM_TESTS) lms_env lms_output,$(BUILD)/tests/$(t).t)

# On the real GPU (make check-gpu): tests/lms_gpu.sh runs lms_gpu_check under LD_PRELOAD.
$(BUILD)/tests/lms_gpu.o: CPPFLAGS += $(if $(CUDNN_INC),-I$(CUDNN_INC))
$(BUILD)/tests/lms_gpu_check: $(BUILD)/tests/lms_gpu.o
	$(NVCC) $(NVCCFLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 $(if $(CUDNN_LIB),-L$(CUDNN_LIB)) \
	  -lcudnn -lcublas -lcudart $(if $(SAN_FLAGS),-Xcompiler $(subst $(eval) ,$(comma),$(SAN_FLAGS)))
$(BUILD)/tests/lms_gpu.t: tests/lms_gpu.sh $(BUILD)/tests/lms_gpu_check $(LIBLMS)
	cp $< $@ && chmod +x $@

GPU_TESTS += $(BUILD)/tests/lms_gpu.t

# The real NCCL on the real GPU (make check-gpu): tests/lms_nccl_gpu.sh runs each case of
# lms_nccl_gpu_check under LD_PRELOAD. It loads NCCL itself, so it builds without NCCL; it links
# the driver's stub, the driver itself being found when it runs.
$(BUILD)/tests/lms_nccl_gpu_check: $(BUILD)/tests/lms_nccl_gpu.o
	$(CC) $(LDFLAGS) -o $@ $< -L$(CUDA_HOME)/lib64/stubs -lcuda -ldl
$(BUILD)/tests/lms_nccl_gpu.t: tests/lms_nccl_gpu.sh $(BUILD)/tests/lms_nccl_gpu_check $(BUILD)/tests/lms_gpu_check $(LIBLMS)
	cp $< $@ && chmod +x $@

GPU_TESTS += $(BUILD)/tests/lms_nccl_gpu.t
