#pragma once
// Umbrella header of qsgd::comm.
#include "qsgd/comm/bucketer.hpp"
#include "qsgd/comm/communicator.hpp"
#include "qsgd/comm/exchange.hpp"
#include "qsgd/comm/partition.hpp"
