# Trace tools: lms-trace (reads the traces liblms writes) and lms-run (runs a program under
# liblms). The trace writer itself (preload/trace.c, preload/stack.c) is linked into liblms.so
# by preload/module.mk; here it is linked into the test workload that writes scripted traces.
TRACE_OBJS := $(addprefix $(BUILD)/preload/,trace.o stack.o real_dlsym.o signals.o output_file.o quote.o)

LMS_TRACE_OBJS := $(addprefix $(BUILD)/tools/,lms-trace.o json.o trace_read.o symbols.o summary.o plot.o \
                    memviz.o pickle.o tune.o)

# libdw (elfutils, Debian's libdw-dev) reads the symbols and lines of the traced program.
$(BUILD)/tools/lms-trace: $(LMS_TRACE_OBJS) $(BUILD)/policy/libpolicy.a
	$(CC) $(LDFLAGS) -o $@ $^ -ldw -lelf -lm

$(BUILD)/tools/lms-run: tools/lms-run
	@mkdir -p $(@D)
	cp $< $@ && chmod 0755 $@

$(BUILD)/tools/lms-timeline: tools/lms-timeline
	@mkdir -p $(@D)
	cp $< $@ && chmod 0755 $@

# Writes scripted traces for the tests; -rdynamic so that stacks name its functions.
$(BUILD)/tests/trace_workload: $(BUILD)/tests/trace_workload.o $(TRACE_OBJS)
	$(CC) $(LDFLAGS) -rdynamic -o $@ $^

# The tests are Python scripts (tests/tools_tap.py is their shared TAP helper) that run the
# workload and the tools from the build directory.
TOOLS_TEST_SCRIPTS := $(filter-out tests/tools_tap.py,$(wildcard tests/trace_*.py tests/tools_*.py))
TOOLS_TEST_DEPS    := tests/tools_tap.py $(BUILD)/tests/trace_workload $(BUILD)/tools/lms-trace \
                      $(BUILD)/tools/lms-run $(BUILD)/preload/options.tsv
$(BUILD)/tests/trace_%.t: tests/trace_%.py $(TOOLS_TEST_DEPS)
	@mkdir -p $(@D)
	cp $< $@ && chmod 0755 $@
$(BUILD)/tests/tools_%.t: tests/tools_%.py $(TOOLS_TEST_DEPS)
	@mkdir -p $(@D)
	cp $< $@ && chmod 0755 $@
# gpu-total-mib.py on the simulated GPU's driver.
$(BUILD)/tests/tools_gpu_total.t: $(SIM_LIB)
# lms-timeline on a timeline the simulated GPU writes for liblms's own test program.
$(BUILD)/tests/tools_timeline.t: $(BUILD)/tools/lms-timeline $(BUILD)/tests/lms_workload $(SIM_LIB)
# tune against the library: the run is liblms's own test program on the simulated GPU.
$(BUILD)/tests/tools_replay.t: $(BUILD)/tests/lms_workload
# liblms's statistics and echo, on the simulated GPU, in both backing modes (preload/module.mk).
$(BUILD)/tests/tools_stats.t: tests/tools_stats.py $(TOOLS_TEST_DEPS) $(BUILD)/tests/lms_workload $(LIBLMS) \
    $(BUILD)/tests/lms_both_modes
	@mkdir -p $(@D)
	$(LMS_IN_BOTH_MODES)

ALL_TARGETS += $(BUILD)/tools/lms-trace $(BUILD)/tools/lms-run $(BUILD)/tools/lms-timeline $(TRACE_OBJS)
INSTALL_BIN += $(BUILD)/tools/lms-trace $(BUILD)/tools/lms-run $(BUILD)/tools/lms-timeline
TESTS       += $(patsubst tests/%.py,$(BUILD)/tests/%.t,$(TOOLS_TEST_SCRIPTS))

# liblms-timeline.so: a real GPU's timeline through CUPTI (tools/gpu_timeline.c), which the
# driver loads by CUDA_INJECTION64_PATH (lms-run --timeline). Built where the toolkit has CUPTI:
# its headers and library sit in the toolkit's include/ and lib64/, or under extras/CUPTI.
CUPTI_INC := $(firstword $(dir $(wildcard $(CUDA_HOME)/include/cupti.h $(CUDA_HOME)/extras/CUPTI/include/cupti.h)))
CUPTI_LIB := $(firstword $(dir $(wildcard $(CUDA_HOME)/lib64/libcupti.so $(CUDA_HOME)/extras/CUPTI/lib64/libcupti.so)))
ifneq ($(and $(CUPTI_INC),$(CUPTI_LIB)),)
$(BUILD)/tools/gpu_timeline.o: CPPFLAGS += -I$(CUPTI_INC)
$(BUILD)/tools/liblms-timeline.so: $(BUILD)/tools/gpu_timeline.o $(addprefix $(BUILD)/preload/,output_file.o quote.o)
	$(CC) $(LDFLAGS) -shared -Wl,-z,defs -o $@ $^ -L$(CUPTI_LIB) -lcupti -lpthread
ALL_TARGETS     += $(BUILD)/tools/liblms-timeline.so
INSTALL_PRIVATE += $(BUILD)/tools/liblms-timeline.so
endif
