# Finds Kokkos and repairs the include path of Debian's package.
#
# Debian's libtrilinos-kokkos-dev (Kokkos 3.4.01) exports Kokkos::kokkos with
# INTERFACE_INCLUDE_DIRECTORIES "/usr/lib/include", which does not exist; its
# headers live in /usr/include/trilinos, which the same config file publishes
# as Kokkos_INCLUDE_DIRS. The fix is applied to the imported target in this
# project only; system files are left alone.
find_package(Kokkos REQUIRED)

if(TARGET Kokkos::kokkos)
  get_target_property(_qsgd_kokkos_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(_qsgd_kokkos_fixed "")
  set(_qsgd_kokkos_broken FALSE)
  foreach(_dir IN LISTS _qsgd_kokkos_inc)
    if(_dir MATCHES "^\\$<" OR EXISTS "${_dir}/Kokkos_Core.hpp")
      list(APPEND _qsgd_kokkos_fixed "${_dir}")
    else()
      set(_qsgd_kokkos_broken TRUE)
    endif()
  endforeach()
  if(_qsgd_kokkos_broken)
    if(NOT Kokkos_INCLUDE_DIRS)
      message(FATAL_ERROR "Kokkos::kokkos has a missing include directory (${_qsgd_kokkos_inc}) and Kokkos_INCLUDE_DIRS is unset")
    endif()
    get_filename_component(_qsgd_real "${Kokkos_INCLUDE_DIRS}" REALPATH)
    if(NOT EXISTS "${_qsgd_real}/Kokkos_Core.hpp")
      message(FATAL_ERROR "Kokkos headers not found in ${_qsgd_real}")
    endif()
    list(APPEND _qsgd_kokkos_fixed "${_qsgd_real}")
    set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_qsgd_kokkos_fixed}")
    message(STATUS "Kokkos: include path repaired to ${_qsgd_real}")
  endif()
endif()

# Which backends this Kokkos has, for provenance and for the feature summary.
set(QSGD_KOKKOS_BACKENDS "")
foreach(_dev IN ITEMS SERIAL OPENMP THREADS CUDA HIP SYCL)
  if(Kokkos_ENABLE_${_dev} OR "${_dev}" IN_LIST Kokkos_DEVICES)
    list(APPEND QSGD_KOKKOS_BACKENDS ${_dev})
  endif()
endforeach()
message(STATUS "Kokkos ${Kokkos_VERSION}, backends: ${QSGD_KOKKOS_BACKENDS}")
