# Runs a job that must fail cleanly and checks how it failed:
#   cmake "-DCOMMAND=<cmd|arg|arg...>" -DEXPECT_CODE=<n> "-DEXPECT_REGEX=<regex>"
#         [-DFAULT=<QSGD_FAULT_INJECT value>] [-DPEER_TIMEOUT=<QSGD_PEER_TIMEOUT value>]
#         -P expect_failure.cmake
# Passes when the exit status is EXPECT_CODE (non-zero) and stdout+stderr
# match EXPECT_REGEX; a hang is a failure (60 s), so is a crash (another code).
# COMMAND separates its words with '|' (a ';' would split the -D argument).
cmake_minimum_required(VERSION 3.20)
string(REPLACE "|" ";" COMMAND "${COMMAND}")
if(DEFINED FAULT)
  set(ENV{QSGD_FAULT_INJECT} "${FAULT}")
endif()
if(DEFINED PEER_TIMEOUT)
  set(ENV{QSGD_PEER_TIMEOUT} "${PEER_TIMEOUT}")
endif()
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
set(all "${out}${err}")
message(STATUS "exit status: ${rc}\n--- output ---\n${all}--------------")
if(NOT rc STREQUAL "${EXPECT_CODE}")
  message(FATAL_ERROR "expected exit status ${EXPECT_CODE}, got '${rc}'")
endif()
if(NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match: ${EXPECT_REGEX}")
endif()
