// The strategy factory, the configuration hash and its startup check, and the
// fault-injection hook.

#include "qsgd/comm/exchange.hpp"

#include <climits>
#include <cstdlib>
#include <sstream>

#include "detail/exchange_base.hpp"
#include "qsgd/support/option_values.hpp"
#include "qsgd/kernels/message.hpp"

namespace qsgd::comm {

std::string to_string(StrategyKind k) {
  switch (k) {
    case StrategyKind::allreduce: return "allreduce";
    case StrategyKind::allreduce16: return "allreduce16";
    case StrategyKind::allgather: return "allgather";
    case StrategyKind::param_server: return "param-server";
    case StrategyKind::scatter_reduce: return "scatter-reduce";
    case StrategyKind::shared_scale: return "shared-scale";
    case StrategyKind::powersgd: return "powersgd";
  }
  return "strategy#" + std::to_string(static_cast<int>(k));
}

StrategyKind parse_strategy(const std::string& name) {
  for (StrategyKind k : {StrategyKind::allreduce, StrategyKind::allreduce16, StrategyKind::allgather,
                         StrategyKind::param_server, StrategyKind::scatter_reduce, StrategyKind::shared_scale,
                         StrategyKind::powersgd})
    if (name == to_string(k)) return k;
  throw Error(Errc::invalid_argument, "unknown strategy '" + name +
                                          "' (expected allreduce, allreduce16, allgather, param-server, "
                                          "scatter-reduce, shared-scale or powersgd)");
}

std::string to_string(Transport t) {
  switch (t) {
    case Transport::ring: return "ring";
    case Transport::library: return "library";
  }
  return "transport#" + std::to_string(static_cast<int>(t));
}

Transport parse_transport(const std::string& name) {
  for (Transport t : {Transport::ring, Transport::library})
    if (name == to_string(t)) return t;
  throw Error(Errc::invalid_argument, "unknown transport '" + name + "' (expected ring or library)");
}

// The transport a strategy actually uses (param-server: always the library's).
static Transport effective_transport(const ExchangeConfig& cfg) {
  return cfg.strategy == StrategyKind::param_server ? Transport::library : cfg.transport;
}

bool error_throws(ErrorPolicy policy, const Communicator& comm) {
  return policy == ErrorPolicy::throw_error || (policy == ErrorPolicy::automatic && comm.is_serial());
}

void raise_error(ErrorPolicy policy, const Communicator& comm, Errc code, int exit_code, const std::string& what,
                 bool collective) {
  if (!error_throws(policy, comm)) comm.abort(exit_code, what, collective);
  throw ExchangeError(code, exit_code, "qsgd: rank " + std::to_string(comm.rank()) + ": " + what);
}

CodecConfig effective_codec(const ExchangeConfig& cfg) {
  CodecConfig c = cfg.codec;
  // allreduce moves fp32; powersgd moves fp32 factors and fp32 elements.
  if (cfg.strategy == StrategyKind::allreduce || cfg.strategy == StrategyKind::powersgd)
    c = CodecConfig{CodecKind::fp32, 0, 0, Norm::none, 0};
  if (cfg.strategy == StrategyKind::allreduce16)
    c = CodecConfig{c.codec == CodecKind::fp16 ? CodecKind::fp16 : CodecKind::bf16, 0, 0, Norm::none, 0};
  if (!is_quantized(c.codec)) {
    c.s = 0;
    c.d = 0;
    c.norm = Norm::none;
  }
  if (!is_variable_length(c.codec)) c.chunk = 0;
  return c;
}

std::uint64_t config_hash(const ExchangeConfig& cfg, int ranks) {
  const CodecConfig c = effective_codec(cfg);
  const std::uint64_t fields[] = {
      0x7173676464ull,  // "qsgdd": version of this hash's field list
      message_version,
      static_cast<std::uint64_t>(cfg.strategy),
      static_cast<std::uint64_t>(c.codec),
      c.s,
      c.d,
      static_cast<std::uint64_t>(c.norm),
      c.chunk,
      cfg.seed,
      // The strategy's own parameter: the server's rank, PowerSGD's rank r.
      static_cast<std::uint64_t>(cfg.strategy == StrategyKind::param_server ? cfg.server
                                 : cfg.strategy == StrategyKind::powersgd   ? cfg.powersgd_rank
                                                                            : 0),
      static_cast<std::uint64_t>(ranks),
      static_cast<std::uint64_t>(effective_transport(cfg)),
      effective_transport(cfg) == Transport::ring ? cfg.segment_bytes : 0,
      // The raw-value ring's segment checksums: a rank without them would
      // never send the CRC messages its peers wait for.
      effective_transport(cfg) == Transport::ring && !cfg.ring_checksums ? 1u : 0u,
  };
  return fnv1a(fields, sizeof(fields));
}

std::string describe(const ExchangeConfig& cfg) {
  const CodecConfig c = effective_codec(cfg);
  std::ostringstream os;
  os << "strategy " << to_string(cfg.strategy) << ", codec " << to_string(c.codec);
  if (is_quantized(c.codec)) os << ", s " << c.s << ", d " << c.d << ", norm " << to_string(c.norm);
  if (is_variable_length(c.codec)) os << ", chunk " << c.chunk;
  os << ", seed " << cfg.seed;
  if (cfg.strategy == StrategyKind::param_server) os << ", server " << cfg.server;
  os << ", transport " << to_string(effective_transport(cfg));
  if (effective_transport(cfg) == Transport::ring && !cfg.ring_checksums) os << ", ring checksums off";
  return os.str();
}

FaultInjection FaultInjection::parse(const std::string& spec) {
  FaultInjection f;
  f.enabled = true;
  std::istringstream is(spec);
  std::string item;
  bool have_rank = false, have_step = false;
  while (std::getline(is, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      throw Error(Errc::invalid_argument, "QSGD_FAULT_INJECT: '" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    std::uint64_t x = 0;
    try {
      if (k != "part") x = support::parse_count("QSGD_FAULT_INJECT " + k, v);
    } catch (const support::UsageError& err) {
      throw Error(Errc::invalid_argument, err.what());
    }
    if (k == "rank") {
      if (x > static_cast<std::uint64_t>(INT_MAX)) throw Error(Errc::invalid_argument, "QSGD_FAULT_INJECT: rank too large");
      f.rank = static_cast<int>(x);
      have_rank = true;
    } else if (k == "step") {
      f.step = x;
      have_step = true;
    } else if (k == "tensor") {
      f.tensor = static_cast<std::uint32_t>(x);
    } else if (k == "part") {
      if (v == "message")
        f.part = FaultInjection::Part::message;
      else if (v == "meta")
        f.part = FaultInjection::Part::meta;
      else
        throw Error(Errc::invalid_argument, "QSGD_FAULT_INJECT: part must be message or meta, not '" + v + "'");
      continue;
    } else if (k == "stage") {
      if (x != FaultInjection::first_stage && x != FaultInjection::back_stage)
        throw Error(Errc::invalid_argument, "QSGD_FAULT_INJECT: stage must be 1 or 2");
      f.stage = static_cast<int>(x);
    } else if (k == "word") {
      if (x > static_cast<std::uint64_t>(INT64_MAX)) throw Error(Errc::invalid_argument, "QSGD_FAULT_INJECT: word too large");
      f.word = static_cast<std::int64_t>(x);
    } else if (k == "bit") {
      if (x > 63) throw Error(Errc::invalid_argument, "QSGD_FAULT_INJECT: bit must be 0..63");
      f.bit = static_cast<int>(x);
    } else {
      throw Error(Errc::invalid_argument,
                  "QSGD_FAULT_INJECT: unknown key '" + k + "' (rank, step, tensor, stage, part, word, bit)");
    }
  }
  if (!have_rank || !have_step) throw Error(Errc::invalid_argument, "QSGD_FAULT_INJECT needs rank= and step=");
  return f;
}

FaultInjection FaultInjection::from_env() {
  const char* e = std::getenv("QSGD_FAULT_INJECT");
  if (e == nullptr || *e == '\0') return {};
  return parse(e);
}

void check_shared_scale(const CodecConfig& c, int ranks) {
  if (!is_quantized(c.codec))
    throw Error(Errc::invalid_argument,
                "shared-scale sums quantization levels and needs a quantized codec (fixed, elias-dense, "
                "elias-sparse or rans), not " + to_string(c.codec));
  // The reduced chunks carry sums of K levels in [-s, s]: a code of K s levels.
  const std::uint64_t ks = static_cast<std::uint64_t>(c.s) * static_cast<std::uint64_t>(ranks);
  const std::uint64_t limit = c.codec == CodecKind::rans ? rans_max_s : max_levels;
  if (ks > limit)
    throw Error(Errc::invalid_argument, "shared-scale at " + std::to_string(ranks) + " ranks sends sums of up to K s = " +
                                            std::to_string(ks) + " levels; codec " + to_string(c.codec) +
                                            " holds at most " + std::to_string(limit) + " (lower s)");
}

template <class E>
std::unique_ptr<Exchange<E>> make_exchange(const ExchangeConfig& cfg_in, const Communicator& comm, const E& exec) {
  ExchangeConfig cfg = cfg_in;
  if (!cfg.fault.enabled) cfg.fault = FaultInjection::from_env();
  // Compare before validating, so that every rank takes the same branch.
  const std::string bad = comm.mismatch(config_hash(cfg, comm.size()), "exchange configuration", describe(cfg));
  if (!bad.empty()) raise_error(cfg.on_error, comm, Errc::invalid_argument, exit_config_mismatch, bad, true);
  validate(effective_codec(cfg));
  if (cfg.segment_bytes == 0 || cfg.window == 0)
    throw Error(Errc::invalid_argument, "exchange: segment_bytes and window must be at least 1");
  if (cfg.strategy == StrategyKind::shared_scale) check_shared_scale(cfg.codec, comm.size());
  if (cfg.strategy == StrategyKind::powersgd && cfg.powersgd_rank == 0)
    throw Error(Errc::invalid_argument, "powersgd: the rank r must be at least 1");
  const bool raw_ring = cfg.strategy == StrategyKind::allreduce || cfg.strategy == StrategyKind::allreduce16 ||
                        cfg.strategy == StrategyKind::powersgd;
  if (cfg.fault.enabled && raw_ring &&
      (cfg.fault.part != FaultInjection::Part::message || cfg.fault.word >= 0 || cfg.fault.bit != 0))
    throw Error(Errc::invalid_argument, "QSGD_FAULT_INJECT: " + to_string(cfg.strategy) +
                                            " sends raw values with no metadata; part, word and bit apply to the "
                                            "strategies that send messages (allgather, scatter-reduce, shared-scale, "
                                            "param-server)");
  switch (cfg.strategy) {
    case StrategyKind::allreduce: return detail::make_allreduce(cfg, comm, exec);
    case StrategyKind::allreduce16: return detail::make_allreduce16(cfg, comm, exec);
    case StrategyKind::allgather: return detail::make_allgather(cfg, comm, exec);
    case StrategyKind::param_server: return detail::make_param_server(cfg, comm, exec);
    case StrategyKind::scatter_reduce:
    case StrategyKind::shared_scale: return detail::make_scatter_reduce(cfg, comm, exec);
    case StrategyKind::powersgd: return detail::make_powersgd(cfg, comm, exec);
  }
  throw Error(Errc::invalid_argument,
              "make_exchange: unknown strategy " + std::to_string(static_cast<int>(cfg.strategy)));
}

QSGD_COMM_INSTANTIATE_FACTORY(make_exchange)

}  // namespace qsgd::comm
