# The CUDA driver double: a libcuda.so.1 that runs the driver API on host memory, for tests.
# Others link it with -L$(CUDADOUBLE_DIR) -lcuda, or put $(CUDADOUBLE_DIR) on LD_LIBRARY_PATH.
CUDADOUBLE_DIR := $(BUILD)/tests/cudadouble
CUDADOUBLE_LIB := $(CUDADOUBLE_DIR)/libcuda.so.1

CUDADOUBLE_SRC := $(addprefix tests/cudadouble/,control.c memory.c streams.c events.c capture.c \
                    transfers.c kernels.c per_thread.c procaddress.c)
CUDADOUBLE_OBJ := $(CUDADOUBLE_SRC:%.c=$(BUILD)/%.o)

# One stub per entry point that cuda.h declares, named without version or stream suffix.
$(CUDADOUBLE_DIR)/unsupported_names.h: $(CUDA_HOME)/include/cuda.h $(CUDA_HOME)/include/cudaProfiler.h
	@mkdir -p $(@D)
	cat $^ | tr -s ' \n' '  ' | grep -o 'CUresult CUDAAPI cu[A-Za-z0-9_]*' | \
	  sed 's/.* //; s/_pt[sd][sz]$$//; s/_v[0-9][0-9]*$$//' | sort -u | \
	  sed 's/.*/CD_UNSUPPORTED(&)/' > $@.tmp && mv $@.tmp $@

$(BUILD)/tests/cudadouble/procaddress.o: $(CUDADOUBLE_DIR)/unsupported_names.h
$(BUILD)/tests/cudadouble/procaddress.o: CPPFLAGS += -I$(CUDADOUBLE_DIR)

# -Bsymbolic-functions: calls inside the double stay inside it, even when an LD_PRELOADed
# interposer exports the same entry points.
$(CUDADOUBLE_LIB): $(CUDADOUBLE_OBJ)
	$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic-functions $(LDFLAGS) -o $@ $^ -lpthread

$(CUDADOUBLE_DIR)/libcuda.so: $(CUDADOUBLE_LIB)
	ln -sf libcuda.so.1 $@

ALL_TARGETS += $(CUDADOUBLE_LIB) $(CUDADOUBLE_DIR)/libcuda.so

# The double's own tests. Each links the double directly (rpath: no other libcuda is found),
# except double_loading, which finds it the way cudart does.
DOUBLE_TEST_NAMES := devices faults graphs kernels loading memory streams vmm
DOUBLE_TESTS := $(DOUBLE_TEST_NAMES:%=$(BUILD)/tests/double_%.t)

$(BUILD)/tests/double_%.t: $(BUILD)/tests/double_%.o $(TAP_OBJ) $(CUDADOUBLE_DIR)/libcuda.so
	$(CC) $(LDFLAGS) -o $@ $(BUILD)/tests/double_$*.o $(TAP_OBJ) -L$(CUDADOUBLE_DIR) \
	  -Wl,-rpath,$(abspath $(CUDADOUBLE_DIR)) -lcuda -lpthread

# Not linked with the double: it dlopens it from LD_LIBRARY_PATH.
$(BUILD)/tests/double_loading.t: $(BUILD)/tests/double_loading.o $(TAP_OBJ) $(CUDADOUBLE_DIR)/libcuda.so
	$(CC) $(LDFLAGS) -o $@ $(BUILD)/tests/double_loading.o $(TAP_OBJ) -ldl

.SECONDARY: $(DOUBLE_TESTS:.t=.o)
TESTS += $(DOUBLE_TESTS)
