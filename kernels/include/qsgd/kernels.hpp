#pragma once
// Umbrella header of qsgd::kernels.
#include "qsgd/kernels/codec.hpp"
#include "qsgd/kernels/config.hpp"
#include "qsgd/kernels/counter_rng.hpp"
#include "qsgd/kernels/crc32c.hpp"
#include "qsgd/kernels/error.hpp"
#include "qsgd/kernels/message.hpp"
#include "qsgd/kernels/profiling.hpp"
#include "qsgd/kernels/quantize.hpp"
