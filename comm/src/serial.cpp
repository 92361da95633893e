// The serial stand-in: one rank, no MPI call ever made, so that every
// strategy (and every program built on qsgd::comm) runs in one process
// without mpirun and without MPI_Init. The strategies' collectives see
// is_serial() and become local copies (detail/exchange_base.hpp); a failure
// throws (ErrorPolicy::automatic) or ends the process with the same exit
// codes as MPI_Abort would.

#include "qsgd/comm/communicator.hpp"

namespace qsgd::comm {

Communicator Communicator::serial() { return Communicator(); }

}  // namespace qsgd::comm
