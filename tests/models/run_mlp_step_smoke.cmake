# ctest -P script: runs qsgd-bench-mlp-step tiny and validates its JSON.
execute_process(
  COMMAND ${PROGRAM} --widths 64,32,10 --batch 16 --warmup 1 --steps 3 --json ${JSON}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "qsgd-bench-mlp-step exited with ${rc}")
endif()
file(READ ${JSON} text)
string(JSON median ERROR_VARIABLE err GET "${text}" step_seconds median)
if(err)
  message(FATAL_ERROR "bad JSON from qsgd-bench-mlp-step: ${err}")
endif()
string(JSON allocs GET "${text}" workspace_allocations_in_timed_steps)
string(JSON nsamples LENGTH "${text}" samples)
if(NOT median GREATER 0 OR NOT allocs EQUAL 0 OR NOT nsamples EQUAL 3)
  message(FATAL_ERROR "unexpected values: median ${median}, allocations ${allocs}, samples ${nsamples}")
endif()
