# The TAP producer, linked into every C test.
TAP_OBJ := $(BUILD)/tests/tap.o

$(BUILD)/tests/tap_self_test.t: $(BUILD)/tests/tap_self_test.o $(TAP_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^

TESTS += $(BUILD)/tests/tap_self_test.t
