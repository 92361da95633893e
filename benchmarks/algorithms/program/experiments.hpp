#pragma once
// The experiments of qsgd-algorithms (docs/algorithms.md): each runs the
// algorithm variants, prints a short table and writes its results into the
// JSON document.

#include <cstdint>
#include <qsgd/comm/communicator.hpp>
#include <string>
#include <vector>

#include "json.hpp"

namespace qsgd::algorithms::program {

using qsgd::bench::Json;

struct Options {
  std::string command;
  std::string out;
  int seeds = 5;
  int workers = 4;     // simulated workers (convex, qsvrg)
  bool quick = false;  // tiny sizes: the ctest smoke run
  // async
  std::uint64_t updates = 20000;
  int window = 8;
  std::vector<int> taus = {0, 2, 8, -1};
  double delay_us = 0.0;
};

void experiment_convex(const Options& o, Json& j);
void experiment_qsvrg(const Options& o, Json& j);
void experiment_dqgd(const Options& o, Json& j);
void experiment_async(const Options& o, Json& j, const qsgd::comm::Communicator& comm);

}  // namespace qsgd::algorithms::program
