# The trainer: a Caffe-like training engine in C and CUDA C (see trainer/SNAPSHOT.md).
TRAINER_CPU_SRC := net.c cpu_backend.c cpu_conv.c cpu_pool.c cpu_lrn.c cpu_layers.c cpu_loss.c \
                   models.c solver.c data.c data_synthetic.c data_cifar10.c data_mnist.c snapshot.c \
                   options.c run.c log.c
TRAINER_CPU_OBJ := $(addprefix $(BUILD)/trainer/,$(TRAINER_CPU_SRC:.c=.o))
TRAINER_GPU_OBJ := $(BUILD)/trainer/gpu_backend.o $(BUILD)/trainer/gpu_kernels.o
TRAINER_CUDA_LIBS := -L$(CUDA_HOME)/lib64 $(if $(CUDNN_LIB),-L$(CUDNN_LIB)) -lcudnn -lcublas -lcudart -lm

$(TRAINER_GPU_OBJ): CPPFLAGS += $(if $(CUDNN_INC),-I$(CUDNN_INC))

$(BUILD)/trainer/trainer: $(BUILD)/trainer/main.o $(TRAINER_CPU_OBJ) $(TRAINER_GPU_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(TRAINER_CUDA_LIBS) -lstdc++

# CPU tests link the reference layers only: no CUDA.
TRAINER_C_TESTS := trainer_layers trainer_net trainer_data trainer_snapshot
$(foreach t,$(TRAINER_C_TESTS),$(eval $(BUILD)/tests/$(t).t: $(BUILD)/tests/$(t).o $(TRAINER_CPU_OBJ) $(TAP_OBJ) ; \
	$$(CC) $$(LDFLAGS) -o $$@ $$^ -lm))

# Script tests run the trainer binary.
TRAINER_SCRIPT_TESTS := trainer_cli trainer_train
$(BUILD)/tests/trainer_%.t: tests/trainer_%.sh tests/trainer_tap.sh $(BUILD)/trainer/trainer
	@mkdir -p $(@D)
	cp $< $@ && chmod +x $@

# GPU tests: built everywhere, run by make check-gpu.
$(BUILD)/tests/trainer_gpu_layers.t: $(BUILD)/tests/trainer_gpu_layers.o $(TRAINER_CPU_OBJ) $(TRAINER_GPU_OBJ) $(TAP_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(TRAINER_CUDA_LIBS) -lstdc++
$(BUILD)/tests/trainer_gpu_layers.o: CPPFLAGS += $(if $(CUDNN_INC),-I$(CUDNN_INC))
$(BUILD)/tests/trainer_pytorch.t: tests/trainer_pytorch.py $(BUILD)/trainer/trainer
	@mkdir -p $(@D)
	cp $< $@ && chmod +x $@

ALL_TARGETS += $(BUILD)/trainer/trainer
INSTALL_BIN += $(BUILD)/trainer/trainer
TESTS += $(addprefix $(BUILD)/tests/,$(addsuffix .t,$(TRAINER_C_TESTS) $(TRAINER_SCRIPT_TESTS)))
GPU_TESTS += $(BUILD)/tests/trainer_gpu_layers.t $(BUILD)/tests/trainer_pytorch.t

# make bench (GPU only): cifar10_full images/s at batch 1024, 4096, 16384.
$(BUILD)/trainer/bench-cifar10: trainer/bench-cifar10.sh $(BUILD)/trainer/trainer
	cp $< $@ && chmod +x $@
BENCHES += $(BUILD)/trainer/bench-cifar10
