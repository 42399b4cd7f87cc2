#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include <string>

namespace podnet::responders {

/// The two families every responder counts into (udp_echo, http_echo, burst, grpc):
///  - podnet_responder_requests_total{responder, result}: requests received, by outcome
///    ("answered", "completed", or why not);
///  - podnet_responder_dropped_total{responder, reason}: of those, the ones not served, by reason.
/// prometheus-cpp hands back the family already registered under a name, so each responder
/// calls these with the one registry.
prometheus::Family<prometheus::Counter>& ResponderRequests(prometheus::Registry& registry);
prometheus::Family<prometheus::Counter>& ResponderDropped(prometheus::Registry& registry);

/// One way a request goes unserved: counted once in each family, as its result and as its
/// reason, so that both always move together.
struct ResponderDrop {
  ResponderDrop() = default;
  ResponderDrop(prometheus::Registry& registry, const std::string& responder,
                const std::string& result, const std::string& reason);
  void Count(double n = 1) const {
    requests->Increment(n);
    dropped->Increment(n);
  }
  prometheus::Counter* requests = nullptr;
  prometheus::Counter* dropped = nullptr;
};

}  // namespace podnet::responders
