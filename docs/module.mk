# The installed documentation: man pages filled in from the tables they describe (liblms's
# options, lms-trace's commands), a pkg-config file, the README and the trace format.
MAN_PAGES := $(BUILD)/docs/liblms.7 $(BUILD)/docs/lms-run.1 $(BUILD)/docs/lms-trace.1
PKG_CONFIG_FILE := $(BUILD)/docs/liblms.pc

$(BUILD)/docs/liblms.7.entries: $(BUILD)/preload/lms-options-table
	@mkdir -p $(@D)
	$< --man > $@
$(BUILD)/docs/lms-run.1.entries: $(BUILD)/preload/lms-options-table
	@mkdir -p $(@D)
	$< --man-run > $@
# Each command's --help, as lms-trace --help lists them.
$(BUILD)/docs/lms-trace.1.entries: $(BUILD)/tools/lms-trace
	@mkdir -p $(@D)
	for c in $$($< --help | awk '/^commands:/ { f = 1; next } f && NF == 0 { exit } f { print $$1 }'); do \
	  printf '.SS %s\n.nf\n' "$$c"; $< $$c --help | sed 's/\\/\\e/g; s/-/\\-/g; s/^\./\\\&./'; printf '.fi\n'; \
	done > $@

# The paths the pages name are those of this installation: remade when PREFIX changes.
$(BUILD)/docs/prefix: FORCE
	@mkdir -p $(@D)
	@echo '$(PREFIX)' | cmp -s - $@ || echo '$(PREFIX)' > $@
.PHONY: FORCE
$(BUILD)/docs/%: docs/man/%.in $(BUILD)/docs/%.entries preload/version.h $(BUILD)/docs/prefix
	sed -e 's|@VERSION@|$(LMS_VERSION)|g' -e 's|@LIBDIR@|$(PREFIX)/lib|g' -e 's|@DOCDIR@|$(PREFIX)/share/doc/liblms|g' \
	  -e '/^@INCLUDE@$$/ { r $(BUILD)/docs/$*.entries' -e 'd; }' $< > $@

$(PKG_CONFIG_FILE): preload/version.h $(BUILD)/docs/prefix
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' '# LD_PRELOAD=$${preload} runs a program under liblms' \
	  'preload=$${libdir}/liblms.so' '' 'Name: liblms' \
	  'Description: swaps CUDA allocations to host memory, for programs larger than their GPU (LD_PRELOAD)' \
	  'Version: $(LMS_VERSION)' > $@

ALL_TARGETS += $(MAN_PAGES) $(PKG_CONFIG_FILE)
INSTALL_MAN1 += $(BUILD)/docs/lms-run.1 $(BUILD)/docs/lms-trace.1
INSTALL_MAN7 += $(BUILD)/docs/liblms.7
INSTALL_PKGCONFIG += $(PKG_CONFIG_FILE)
INSTALL_DOC += README.md docs/trace-format.md
INSTALL_DATA += $(BUILD)/preload/options.tsv
