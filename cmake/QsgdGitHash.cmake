# Script mode (cmake -DSOURCE_DIR=... -DOUT=... -P QsgdGitHash.cmake): writes
# the header that carries `git describe --always --dirty` of the source tree
# into every result file. Runs at every build, not only at configure time (a
# hash from configure time goes stale with the next commit); the file is
# rewritten only when the hash changed, so nothing recompiles otherwise.
execute_process(COMMAND git describe --always --dirty --abbrev=12
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE hash OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT hash)
  set(hash "unknown")
endif()
set(text "#pragma once\n// Generated at build time by cmake/QsgdGitHash.cmake.\nnamespace qsgd::bench::build {\ninline constexpr const char* git_hash = \"${hash}\";\n}  // namespace qsgd::bench::build\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
