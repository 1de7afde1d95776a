# The trainer: a Caffe-like training engine in C and CUDA C (see trainer/SNAPSHOT.md).
TRAINER_LAYER_SRC := cpu_ops.c cpu_conv.c cpu_pool.c cpu_lrn.c cpu_layers.c cpu_loss.c
TRAINER_CPU_SRC := net.c cpu_backend.c $(TRAINER_LAYER_SRC) \
                   models.c solver.c data.c data_synthetic.c data_cifar10.c data_mnist.c snapshot.c \
                   options.c run.c log.c batch_pieces.c data_parallel.c
TRAINER_CPU_OBJ := $(addprefix $(BUILD)/trainer/,$(TRAINER_CPU_SRC:.c=.o))
# The tests that link the trainer's objects are one rank; the trainer is one of several with
# MPI (trainer/ranks.h). mpicc is looked up when a recipe runs, not when make starts, so that
# `make deps test` on a fresh machine builds with the Open MPI that deps has just installed.
TRAINER_ONE_RANK := $(BUILD)/trainer/ranks_single.o
TRAINER_MPICC = $(shell command -v mpicc 2>/dev/null)
# Rewritten when mpicc appears or goes, so that ranks.o is made again.
$(BUILD)/trainer/mpicc: FORCE
	@mkdir -p $(@D)
	@echo '$(TRAINER_MPICC)' | cmp -s - $@ || echo '$(TRAINER_MPICC)' > $@
$(BUILD)/trainer/ranks.o: trainer/ranks_mpi.c trainer/ranks_single.c $(BUILD)/trainer/mpicc
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(if $(TRAINER_MPICC),$$($(TRAINER_MPICC) --showme:compile)) $(ALL_CFLAGS) \
	    -c $(if $(TRAINER_MPICC),trainer/ranks_mpi.c,trainer/ranks_single.c) -o $@
TRAINER_GPU_OBJ := $(BUILD)/trainer/gpu_backend.o $(BUILD)/trainer/gpu_kernels.o
TRAINER_SIM_OBJ := $(addprefix $(BUILD)/trainer/,sim_backend.o sim_driver.o sim_kernel_table.o)
TRAINER_CUDA_LIBS := -L$(CUDA_HOME)/lib64 $(if $(CUDNN_LIB),-L$(CUDNN_LIB)) -lcudnn -lcublas -lcudart -lm

$(TRAINER_GPU_OBJ): CPPFLAGS += $(if $(CUDNN_INC),-I$(CUDNN_INC))

$(BUILD)/trainer/lms-trainer: $(BUILD)/trainer/main.o $(TRAINER_CPU_OBJ) $(TRAINER_GPU_OBJ) $(TRAINER_SIM_OBJ) \
    $(BUILD)/trainer/ranks.o $(BUILD)/trainer/nccl_gradients.o $(BUILD)/trainer/spawn.o
	$(CC) $(LDFLAGS) -o $@ $^ $(TRAINER_CUDA_LIBS) $(if $(TRAINER_MPICC),$$($(TRAINER_MPICC) --showme:link)) \
	    -ldl -lstdc++

# The kernels of --sim: a module for the simulated GPU (sim/sim_module.h) running the reference
# layers. -Bsymbolic-functions: its calls stay inside it, whatever the program exports.
TRAINER_SIM_MODULE := $(BUILD)/trainer/trainer_sim_kernels.so
$(TRAINER_SIM_MODULE): $(addprefix $(BUILD)/trainer/,sim_kernels.o sim_kernel_table.o $(TRAINER_LAYER_SRC:.c=.o))
	$(CC) -shared -Wl,-Bsymbolic-functions -Wl,-z,defs $(LDFLAGS) -o $@ $^ -lm

# CPU tests link the reference layers only: no CUDA.
TRAINER_C_TESTS := trainer_layers trainer_net trainer_data trainer_snapshot trainer_log
$(foreach t,$(TRAINER_C_TESTS),$(eval $(BUILD)/tests/$(t).t: $(BUILD)/tests/$(t).o $(TRAINER_CPU_OBJ) $(TRAINER_ONE_RANK) $(TAP_OBJ) ; \
	$$(CC) $$(LDFLAGS) -o $$@ $$^ -lm))

# The module's table and costs, opened as the simulator opens it.
$(BUILD)/tests/trainer_sim_kernels.t: $(BUILD)/tests/trainer_sim_kernels.o $(BUILD)/trainer/sim_kernel_table.o \
    $(TAP_OBJ) | $(TRAINER_SIM_MODULE)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) -ldl

# Script tests run the trainer binary; trainer_sim runs it on the simulated GPU, under liblms too.
TRAINER_SCRIPT_TESTS := trainer_cli trainer_train trainer_sim trainer_ranks
$(BUILD)/tests/trainer_%.t: tests/trainer_%.sh tests/trainer_tap.sh $(BUILD)/trainer/lms-trainer
	@mkdir -p $(@D)
	cp $< $@ && chmod +x $@
$(BUILD)/tests/trainer_sim.t: $(TRAINER_SIM_MODULE) $(SIM_LIB) $(LIBLMS) $(BUILD)/tools/lms-run $(BUILD)/trainer/bench-cifar10
$(BUILD)/tests/trainer_gpu.t: $(LIBLMS) $(BUILD)/tests/lms_gpu_check

# The GPU backend's host side, without a GPU: cuDNN descriptors as libcudnn checks them on the
# host, and the arithmetic of batch pieces and fast division.
$(BUILD)/tests/trainer_cudnn.t: $(BUILD)/tests/trainer_cudnn.o $(TRAINER_CPU_OBJ) $(TRAINER_ONE_RANK) $(TRAINER_GPU_OBJ) $(TAP_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(TRAINER_CUDA_LIBS) -lstdc++

# GPU tests: built everywhere, run by make check-gpu.
$(BUILD)/tests/trainer_gpu_layers.t: $(BUILD)/tests/trainer_gpu_layers.o $(TRAINER_CPU_OBJ) $(TRAINER_ONE_RANK) $(TRAINER_GPU_OBJ) \
    $(TAP_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(TRAINER_CUDA_LIBS) -lstdc++
$(BUILD)/tests/trainer_gpu_layers.o $(BUILD)/tests/trainer_cudnn.o: CPPFLAGS += $(if $(CUDNN_INC),-I$(CUDNN_INC))
$(BUILD)/tests/trainer_pytorch.t: tests/trainer_pytorch.py $(BUILD)/trainer/lms-trainer
	@mkdir -p $(@D)
	cp $< $@ && chmod +x $@

ALL_TARGETS += $(BUILD)/trainer/lms-trainer $(TRAINER_SIM_MODULE)
INSTALL_PRIVATE += $(TRAINER_SIM_MODULE)
INSTALL_BIN += $(BUILD)/trainer/lms-trainer
TESTS += $(addprefix $(BUILD)/tests/,$(addsuffix .t,$(TRAINER_C_TESTS) trainer_sim_kernels trainer_cudnn \
                                                  $(TRAINER_SCRIPT_TESTS)))
GPU_TESTS += $(addprefix $(BUILD)/tests/,trainer_gpu_layers.t trainer_gpu.t trainer_pytorch.t)

# make bench (GPU only): cifar10_full images/s at batch 1024, 4096, 16384.
$(BUILD)/trainer/bench-cifar10: trainer/bench-cifar10.sh $(BUILD)/trainer/lms-trainer
	cp $< $@ && chmod +x $@
BENCHES += $(BUILD)/trainer/bench-cifar10
