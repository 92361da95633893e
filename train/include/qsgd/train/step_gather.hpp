#pragma once
// qsgd::train::StepGather: the step trace's collection across ranks. Every
// rank hands its StepRecord to add_step (collective); rank 0 gathers the K
// records as bytes and, when it writes a trace, its TraceWriter appends the
// step. The gather is the Communicator's watched one, so a dead peer ends
// the job with one line naming "step record gather of qsgd-train at step S"
// (docs/exchange.md, "MPI faults"). The gather buffer is allocated once.

#include <cstdint>
#include <vector>

#include "qsgd/comm/communicator.hpp"
#include "qsgd/train/trace.hpp"

namespace qsgd::train {

class StepGather {
 public:
  explicit StepGather(const comm::Communicator& comm);
  // Collective. `writer`: the trace on rank 0 when one is written, null on
  // every other rank (it is not touched there).
  void add_step(const trace::StepRecord& mine, std::uint64_t step, trace::TraceWriter* writer);

 private:
  const comm::Communicator& comm_;
  std::vector<trace::StepRecord> all_;  // K records, filled on rank 0
};

}  // namespace qsgd::train
