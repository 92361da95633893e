#pragma once
// Umbrella header of qsgd_algorithms: the theory-reproduction experiments of
// spec section 3 (docs/algorithms.md).
#include "qsgd/algorithms/async_server.hpp"
#include "qsgd/algorithms/channel.hpp"
#include "qsgd/algorithms/data_parallel.hpp"
#include "qsgd/algorithms/deterministic_gd.hpp"
#include "qsgd/algorithms/linalg.hpp"
#include "qsgd/algorithms/problems.hpp"
#include "qsgd/algorithms/qsvrg.hpp"
#include "qsgd/algorithms/random.hpp"
#include "qsgd/algorithms/curve.hpp"
