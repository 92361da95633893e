#pragma once
// View types shared by every layer and model.
//
// Activations are matrices (rows = samples, or time steps x samples for
// sequence layers; columns = features, a conv layer's row being C x H x W in
// that order). Everything is LayoutRight so that a matrix of rows [a, b) is
// one contiguous span, which is what lets a layer take a time step of a
// sequence or a partial batch without copying.
//
// Layers use unmanaged views (Mat, Vec) for their inputs and outputs: the
// memory belongs to a workspace (detail/workspace.hpp) or to the flat
// parameter store, and a view handle costs no reference counting.

#include <cstddef>
#include <string>

#include <Kokkos_Core.hpp>

// Kernel label "qsgd::models::<name>". Kokkos takes labels as
// const std::string&, and a label longer than the small-string buffer would
// cost a heap allocation at every launch; this keeps each call site's label
// in a function-local static, built once.
#define QSGD_MODELS_LABEL(name)                                      \
  ([]() -> const std::string& {                                      \
    static const std::string qsgd_models_label = "qsgd::models::" name; \
    return qsgd_models_label;                                        \
  }())

namespace qsgd::models {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;

// Owning views.
template <class T>
using View1 = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace>;
template <class T>
using View2 = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace>;

// Non-owning views onto memory owned elsewhere.
template <class T>
using Vec = Kokkos::View<T*, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
template <class T>
using Mat = Kokkos::View<T**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// Rows [first, first + count) of a LayoutRight matrix, as a matrix.
template <class T>
Mat<T> rows(const Mat<T>& m, std::size_t first, std::size_t count) {
  return Mat<T>(m.data() + first * m.extent(1), count, m.extent(1));
}

}  // namespace qsgd::models
