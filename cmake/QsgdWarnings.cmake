# Per-target warning and sanitizer settings; nothing directory-wide.
function(qsgd_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wpedantic)
    if(QSGD_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()

# Sanitizers are applied to every target of the project through this INTERFACE
# library, which qsgd::kernels links publicly.
add_library(qsgd_build_options INTERFACE)
if(QSGD_SANITIZE)
  target_compile_options(qsgd_build_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(qsgd_build_options INTERFACE -fsanitize=address,undefined)
endif()
# The quantizer's bit-reproducibility across backends needs every float
# operation rounded on its own: no contraction into FMA, on any target.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(qsgd_build_options INTERFACE -ffp-contract=off)
endif()
if(QSGD_NATIVE)
  target_compile_options(qsgd_build_options INTERFACE -march=native)
endif()
install(TARGETS qsgd_build_options EXPORT qsgdTargets)
