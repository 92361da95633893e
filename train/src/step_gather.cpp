#include "qsgd/train/step_gather.hpp"

#include <type_traits>

namespace qsgd::train {

static_assert(std::is_trivially_copyable_v<trace::StepRecord>, "step records travel as bytes");

StepGather::StepGather(const comm::Communicator& comm) : comm_(comm), all_(static_cast<std::size_t>(comm.size())) {}

void StepGather::add_step(const trace::StepRecord& mine, std::uint64_t step, trace::TraceWriter* writer) {
  comm_.gather_bytes(&mine, sizeof mine, all_.data(), 0,
                     comm::MpiSite{"step record gather", "qsgd-train", static_cast<std::int64_t>(step)});
  if (writer != nullptr) writer->add_step(all_);
}

}  // namespace qsgd::train
