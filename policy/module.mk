# The eviction policies: pure C, linked into liblms.so and into the offline tools.
POLICY_OBJS := $(addprefix $(BUILD)/policy/,policy.o lru.o lookahead.o period.o iteration.o heap.o \
                 fenwick.o idmap.o plan.o)
POLICY_LIB  := $(BUILD)/policy/libpolicy.a

$(POLICY_LIB): $(POLICY_OBJS)
	@mkdir -p $(@D)
	$(AR) rcs $@ $^

$(BUILD)/tests/policy_lru.t: $(BUILD)/tests/policy_lru.o $(POLICY_LIB) $(BUILD)/tests/tap.o
	$(CC) $(LDFLAGS) -o $@ $^

$(BUILD)/tests/policy_lookahead.t: $(BUILD)/tests/policy_lookahead.o $(POLICY_LIB) $(BUILD)/tests/tap.o
	$(CC) $(LDFLAGS) -o $@ $^

ALL_TARGETS += $(POLICY_LIB)
TESTS       += $(BUILD)/tests/policy_lru.t $(BUILD)/tests/policy_lookahead.t
