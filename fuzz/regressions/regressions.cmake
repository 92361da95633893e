# The regression inputs (regressions.cpp writes them) and what each must do;
# see qsgd_fuzz_regression in fuzz/CMakeLists.txt.
qsgd_fuzz_regression(train-options options-label-control-char OPEN options.json)
qsgd_fuzz_regression(train-options options-lr-inf OPEN options.json)
qsgd_fuzz_regression(checkpoint checkpoint-empty-state OPEN checkpoint.empty-state-memcpy
  MATCH "checkpoint.cpp:8[34]:[0-9]+: runtime error: null pointer passed as argument 1")
# The reader gets to its limit in seconds, but on a loaded machine the 10 s
# per-input timeout could fire first and hide which limit the input breaks.
qsgd_fuzz_regression(trace-raw trace-claimed-steps OPEN_MATCH "ERROR: libFuzzer: out-of-memory" ARGS -timeout=120)
qsgd_fuzz_regression(train-options options-s-truncated OPEN options.int-truncated)
qsgd_fuzz_regression(train-options options-negative-wraps OPEN options.negative-accepted)
qsgd_fuzz_regression(message-struct message-float-max-scale OPEN message.values-finite)
qsgd_fuzz_regression(trace-raw trace-hdf5-open-leak OPEN_MATCH "LeakSanitizer: detected memory leaks" SUPPRESSED)
qsgd_fuzz_regression(trace-raw trace-hdf5-compact-segv OPEN_MATCH "SEGV on unknown address.*H5VM_memcpyvv")
qsgd_fuzz_regression(trace-raw trace-hdf5-continuation-alloc
  OPEN_MATCH "requested allocation size 0x20000000000 .*exceeds maximum supported size.*H5C_protect")
qsgd_fuzz_regression(trace-raw trace-hdf5-attribute-segv
  OPEN_MATCH "heap-buffer-overflow.*H5O__attr_open_by_name.*trace.cpp:316")
qsgd_fuzz_regression(trace trace-negative-bucket-count OPEN trace.negative-bucket-count
  MATCH "contract violated \\[trace\\.flush\\].*larger than max_size")
